"""``kernelwheel build PATH``: build wheels for the selected variants of a kernel project."""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

from ..envs import EnvSpec
from ..errors import KernelwheelError, ProjectError, UsageError
from ..pipeline import BuildRequest, BuiltWheel, build_variant
from ..project import KernelProject, load_project
from ..recipes import Recipes, VariantRecipe, load_recipes
from ..ui import ConsoleUI
from ..variant import Arch, BackendKind, Variant


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "build",
        help="compile a kernel project into wheels, one per variant",
        description=(
            "Compile a kernel project (build.toml, csrc/, torch-ext/) into abi3 wheels. Each "
            "variant is built in its own environment holding that variant's torch and CUDA "
            "toolchain (created once and cached). Without a selector, the default variant for "
            "this machine is built: the newest torch in the recipes with its CUDA flavour."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel build kernels/img2gray\n"
            "  kernelwheel build kernels/img2gray --variant torch213-cxx11-cpu-x86_64-linux\n"
            "  kernelwheel build kernels/img2gray --print-build-identifiers\n"
            "  kernelwheel build kernels/img2gray --python /usr/bin/python3 "
            "--variant torch211-cxx11-cu130-x86_64-linux   # use an existing torch"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", type=Path, help="the kernel project folder (holding build.toml)")
    p.add_argument(
        "--output-dir",
        "-o",
        type=Path,
        default=Path("wheelhouse"),
        help="where wheels and logs/ go (default: ./wheelhouse)",
    )
    p.add_argument(
        "--version",
        help="the wheel version before the local part; default: build.toml general.version, "
        "then a VERSION file beside build.toml",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="build this variant (Hub name, e.g. torch214-cxx11-cu130-x86_64-linux); repeatable",
    )
    p.add_argument(
        "--print-build-identifiers",
        action="store_true",
        help="print the names of the variants that would be built, and exit",
    )
    p.add_argument(
        "--python",
        type=Path,
        help="build with this interpreter's torch instead of a kernelwheel-made environment "
        "(it must have the variant's torch, setuptools and ninja)",
    )
    p.add_argument("--cuda-home", type=Path, help="the CUDA toolkit to use (default: found)")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser(),
        help="build environments live here (default: $KERNELWHEEL_CACHE_DIR or "
        "~/.cache/kernelwheel)",
    )
    p.add_argument("--recipes", type=Path, help="a recipes folder (default: the bundled one)")
    p.add_argument(
        "--find-links",
        action="append",
        default=[],
        metavar="DIR_OR_URL",
        help="extra place pip looks for torch/toolchain wheels (offline builds); repeatable",
    )
    p.add_argument(
        "--index-url", help="pip index for build environments (default: PyPI + recipe index)"
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=os.cpu_count() or 1,
        help="parallel compile jobs (ninja and nvcc --threads); default: CPU count",
    )
    p.set_defaults(func=run)


def resolve_version(project: KernelProject, explicit: str | None) -> tuple[str, str]:
    """(version, where it came from)."""
    if explicit:
        return explicit, "--version"
    if project.version:
        return project.version, f"{project.build_toml.name} general.version"
    version_file = project.root / "VERSION"
    if version_file.is_file():
        text = version_file.read_text().strip()
        if text:
            return text, str(version_file)
    raise ProjectError(
        "no version for the wheel",
        file=project.build_toml,
        key="general.version",
        hint="pass --version X.Y.Z, set general.version in build.toml, or write a VERSION file",
    )


def host_arch() -> Arch:
    machine = platform.machine().lower()
    return Arch.AARCH64 if machine in ("aarch64", "arm64") else Arch.X86_64


def default_variant(recipes: Recipes, project: KernelProject) -> Variant:
    """The newest torch in the recipes, its CUDA flavour (or cpu), for this machine's arch."""
    arch = host_arch()
    wants_cuda = "cuda" in project.backends
    for variant in reversed(recipes.variants()):
        if variant.arch is not arch or variant.backend is None:
            continue
        if (variant.backend.kind is BackendKind.CUDA) == wants_cuda:
            return variant
    raise UsageError("the recipes have no variant for this machine", hint="pass --variant NAME")


def env_spec(recipe: VariantRecipe, args: argparse.Namespace) -> EnvSpec:
    assert recipe.torch_requirement is not None
    packages: tuple[str, ...] = ()
    if recipe.cuda is not None and recipe.cuda.source == "pypi":
        packages = tuple(p.requirement for p in recipe.cuda.packages)
    extra = (recipe.index_url,) if recipe.index_url and not args.index_url else ()
    return EnvSpec(
        torch_requirement=recipe.torch_requirement,
        packages=packages,
        index_url=args.index_url,
        extra_index_urls=extra,
        find_links=tuple(args.find_links),
    )


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    project = load_project(args.path)
    recipes = load_recipes(args.recipes)
    names = args.variant or [default_variant(recipes, project).name]
    variants = [Variant.parse(n) for n in names]
    if args.print_build_identifiers:
        for v in variants:
            ui.print(v.name)
        return 0
    version, source = resolve_version(project, args.version)
    ui.info("", f"{project.name} {version} (version from {source}); {len(variants)} variant(s)")
    work_dir = args.cache_dir / "work" / project.package
    built: list[BuiltWheel] = []
    failed: list[tuple[str, KernelwheelError]] = []
    for variant in variants:
        ui.group(f"{variant.name}")
        try:
            recipe = recipes.recipe_for(variant)
            req = BuildRequest(
                project=project,
                variant=variant,
                version=version,
                out_dir=args.output_dir,
                work_dir=work_dir,
                cache_dir=args.cache_dir,
                env_spec=None if args.python else env_spec(recipe, args),
                python=args.python,
                cuda_home=args.cuda_home,
                default_capabilities=recipe.cuda.capabilities if recipe.cuda else (),
                jobs=args.jobs,
            )
            built.append(build_variant(req, ui))
        except KernelwheelError as exc:
            if len(variants) == 1:
                raise
            failed.append((variant.name, exc))
            ui.error(f"{variant.name}: {exc}")
        finally:
            ui.endgroup()
    for wheel in built:
        ui.print(f"{wheel.path}")
    if failed:
        ui.error(
            f"{len(failed)} of {len(variants)} variant(s) failed: "
            + ", ".join(name for name, _ in failed)
        )
        return max(exc.exit_code for _, exc in failed)
    return 0
