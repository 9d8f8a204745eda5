"""``kernelwheel build PATH``: build wheels for the selected variants of a kernel project."""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

from ..builder.envs import EnvSpec, locked
from ..builder.pipeline import BuildRequest, BuiltWheel, build_variant
from ..errors import KernelwheelError, ProjectError, UsageError
from ..hub.export import export_variant
from ..log import step
from ..model.project import KernelProject
from ..model.recipes import Recipes, VariantRecipe
from ..model.variant import Arch, BackendKind, Variant
from .matrix import Planned, add_selection_arguments, plan_from_args
from .ui import ConsoleUI


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
        default=None,
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
        help="build exactly this variant (Hub name, e.g. torch214-cxx11-cu130-x86_64-linux); "
        "repeatable",
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
        default=None,
        help="build environments live here (default: $KERNELWHEEL_CACHE_DIR or "
        "~/.cache/kernelwheel)",
    )
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
        default=None,
        help="parallel compile jobs (ninja and nvcc --threads); default: CPU count",
    )
    p.add_argument(
        "--hub-layout",
        type=Path,
        metavar="DIR",
        help="also write each built variant as a Hub kernel repo tree DIR/build/<variant>/ "
        "(loadable by kernels.get_local_kernel, convertible back with 'kernelwheel to-wheel')",
    )
    p.add_argument(
        "--plat",
        default="manylinux_2_28",
        metavar="POLICY",
        help="repair wheels to this manylinux policy with auditwheel and prove it with the ABI "
        "checker (default: manylinux_2_28)",
    )
    p.add_argument(
        "--no-repair",
        action="store_true",
        help="keep linux_<arch> wheels (still ABI-checked against their tag)",
    )
    p.add_argument(
        "--best-effort",
        action="store_true",
        help="a wheel that cannot comply is kept as linux_<arch> with the checker's report "
        "instead of failing the variant",
    )
    add_selection_arguments(p)
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


def default_variant(recipes: Recipes, project: KernelProject) -> Variant:
    """The newest torch in the recipes, its CUDA flavour (or cpu), for this machine's arch."""
    arch = Arch.host()
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
        packages = recipe.cuda.requirements()  # pinned, with sha256 hashes where known
    extra = (recipe.index_url,) if recipe.index_url and not args.index_url else ()
    return EnvSpec(
        torch_requirement=recipe.torch_requirement,
        packages=packages,
        index_url=args.index_url,
        extra_index_urls=extra,
        find_links=tuple(args.find_links),
    )


def _selected(planned: Planned, args: argparse.Namespace) -> list[VariantRecipe]:
    """--variant names, else the selectors, else (nothing selected anywhere) the default."""
    if args.variant:
        out = []
        for name in args.variant:
            variant = Variant.parse(name)
            reason = planned.full.reason_for(variant.name)
            if reason is not None:
                raise UsageError(
                    f"variant {variant.name} is left out of this kernel's matrix: {reason}",
                    hint="see 'kernelwheel matrix PATH' for the variants it builds",
                )
            out.append(planned.recipes.recipe_for(variant))
        return out
    options = planned.options
    if options.only is None and all(
        options.source(name) == "default" for name in ("build", "skip", "archs")
    ):
        return [planned.recipes.recipe_for(default_variant(planned.recipes, planned.project))]
    return list(planned.plan.selected)


def _describe(wheel: BuiltWheel) -> tuple[str, str, str]:
    data = wheel.path.read_bytes()
    return wheel.path.name, f"{len(data) / 1024:.0f} KiB", hashlib.sha256(data).hexdigest()


def summary_table(built: list[BuiltWheel]) -> str:
    if not built:
        return "no wheels built"
    rows = [_describe(w) for w in built]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'wheel':<{width}}  {'size':>9}  sha256"]
    lines += [f"{name:<{width}}  {size:>9}  {digest}" for name, size, digest in rows]
    return "\n".join(lines)


def write_github_summary(
    built: list[BuiltWheel], failed: list[tuple[str, KernelwheelError]]
) -> None:
    """On GitHub Actions, append a Markdown table to the job's step summary."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    lines = ["### kernelwheel build", "", "| wheel | size | sha256 |", "|---|---|---|"]
    lines += [f"| `{n}` | {s} | `{d}` |" for n, s, d in (_describe(w) for w in built)]
    for name, exc in failed:
        lines.append(f"| ✕ {name} | failed | {str(exc).splitlines()[0]} |")
    with open(target, "a") as fh:
        fh.write("\n".join(lines) + "\n")


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    planned = plan_from_args(args.path, args)
    project, options = planned.project, planned.options
    recipes = _selected(planned, args)
    if args.print_build_identifiers:
        for recipe in recipes:
            ui.print(recipe.name)
        return 0
    version, source = resolve_version(project, args.version)
    ui.info("", f"{project.name} {version} (version from {source}); {len(recipes)} variant(s)")
    cache_dir = (
        options.cache_dir
        or Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()
    )
    jobs = options.jobs or os.cpu_count() or 1
    built: list[BuiltWheel] = []
    failed: list[tuple[str, KernelwheelError]] = []
    for recipe in recipes:
        ui.group(recipe.name)
        try:
            req = BuildRequest(
                project=project,
                variant=recipe.variant,
                version=version,
                out_dir=options.output_dir,
                work_dir=cache_dir / "work" / project.package,
                cache_dir=cache_dir,
                env_spec=None if args.python else env_spec(recipe, args),
                python=args.python,
                cuda_home=args.cuda_home,
                default_capabilities=recipe.cuda.capabilities if recipe.cuda else (),
                cuda_system_paths=tuple(Path(p) for p in recipe.cuda.system_paths)
                if recipe.cuda
                else (),
                jobs=jobs,
                manylinux=None if args.no_repair else args.plat,
                best_effort=args.best_effort,
                recipes_dir=options.recipes,
            )
            # Builds of one variant share its work folder: serialize them across processes.
            with locked(req.work_dir / f"{recipe.name}.lock"):
                wheel = build_variant(req, ui)
            if args.hub_layout is not None:
                with step(ui, recipe.name, "hub layout") as detail:
                    folder = export_variant(
                        wheel.path,
                        project,
                        wheel.variant,
                        wheel.namespace,
                        args.hub_layout,
                        capabilities=wheel.capabilities,
                    )
                    detail.append(str(folder))
            built.append(wheel)
        except KernelwheelError as exc:
            if len(recipes) == 1:
                raise
            failed.append((recipe.name, exc))
            ui.error(f"{recipe.name}: {exc}")
        finally:
            ui.endgroup()
    ui.print(summary_table(built))
    write_github_summary(built, failed)
    if failed:
        ui.error(
            f"{len(failed)} of {len(recipes)} variant(s) failed: "
            + ", ".join(name for name, _ in failed)
        )
        return max(exc.exit_code for _, exc in failed)
    return 0
