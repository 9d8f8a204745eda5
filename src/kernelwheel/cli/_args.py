"""Arguments shared by several commands, defined once so a flag means the same everywhere.

Every option flag defaults to None ("not given"), so the lower layers of the precedence
(defaults < [tool.kernelwheel] < KERNELWHEEL_*) show through; :func:`option_values` hands the
given ones to :func:`kernelwheel.plan.options.resolve_options`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..model.variant import LocalVersionStyle
from ..plan.options import FATBIN_COMPRESSION_MODES, OPTIONS, resolve_command_option, resolve_jobs

PRECEDENCE = (
    "Precedence, lowest first: defaults < [tool.kernelwheel] in the kernel's pyproject.toml "
    "< KERNELWHEEL_* environment variables < these flags (docs/options.md)."
)


def add_variant_argument(parser: argparse.ArgumentParser, what: str, example: str) -> None:
    """``--variant GLOB``: the same glob language (braces and ranges expanded) in every command
    that selects variants; ``what`` says what a match does here."""
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="GLOB",
        help=f"{what}; a Hub variant name or a glob, braces and ranges expanded (e.g. {example}, "
        "'torch21{0..4}-*'); repeatable; a glob matching nothing is an error",
    )


def add_project_argument(parser: argparse.ArgumentParser) -> None:
    """``[DIR]``: the kernel project; without it, the one the current folder lies in."""
    parser.add_argument(
        "path",
        type=Path,
        nargs="?",
        metavar="DIR",
        help="the kernel project folder (holding build.toml, or that file); default: the "
        "project the current folder is in, its build.toml found here or in a folder above, "
        "up to the git repository's root (as git and cargo find theirs)",
    )


def project_path(args: argparse.Namespace) -> Path:
    """The project ``[DIR]`` names: DIR itself (exactly, its build.toml is not searched for),
    else :func:`~kernelwheel.model.project.find_project_root` from the current folder."""
    path: Path | None = args.path
    if path is not None:
        return path
    from ..model.project import find_project_root  # commands without a project never load it

    return find_project_root()


def add_locking_arguments(parser: argparse.ArgumentParser, json_what: str) -> None:
    """What ``lock`` and ``download`` share: --json, --cache-dir (where their log goes), --jobs."""
    add_json_argument(parser, json_what)
    add_cache_dir_argument(parser)
    add_jobs_argument(parser)


def jobs_value(args: argparse.Namespace) -> int:
    """``--jobs`` (else KERNELWHEEL_JOBS, else auto) as a count, for commands without a project."""
    return resolve_jobs(resolve_command_option("jobs", args.jobs))


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as JSON on stdout (and progress on stderr)",
    )


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The option flags of ``args`` by option name (None: not given)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}


# Selection flags by argparse dest; a command has those it defines.
_SELECTORS = (
    ("variant", "--variant"),
    ("only", "--only"),
    ("build", "--build"),
    ("skip", "--skip"),
    ("archs", "--arch"),
)


def refuse_conflicting_selectors(args: argparse.Namespace) -> None:
    """``--variant`` and ``--only`` each say exactly what to select: given with another
    selection flag, the two would disagree, so the command refuses instead of picking one.
    (Lower layers, pyproject.toml and KERNELWHEEL_*, are overridden as documented.)"""
    given = [flag for dest, flag in _SELECTORS if getattr(args, dest, None)]
    for exclusive in ("--variant", "--only"):
        if exclusive in given and len(given) > 1:
            others = [flag for flag in given if flag != exclusive]
            raise UsageError(
                f"{exclusive} cannot be combined with {' or '.join(others)}: both choose the "
                "variants",
                hint=f"use {exclusive} alone, or drop it and select with --build/--skip/--arch",
            )


def add_target_python_argument(parser: argparse.ArgumentParser, purpose: str) -> None:
    """``--python``: the user's interpreter a command works for (install, variants), found as
    ``install/service.target_python`` finds it."""
    parser.add_argument(
        "--python",
        metavar="PY",
        help=f"the interpreter {purpose}: a path, or a name looked up on PATH (python3.12) "
        "(default: $VIRTUAL_ENV's, else python3 on PATH)",
    )


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="kernelwheel's cache; this command's log goes to DIR/logs/ "
        "(default: ~/.cache/kernelwheel; or KERNELWHEEL_CACHE_DIR)",
    )


def add_jobs_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--jobs",
        "-j",
        metavar="N",
        help="how many CPUs to keep busy: compiler processes in build, variants converted at "
        "once in to-wheel/lock/download; a number or auto (default: auto, all CPUs); "
        "or KERNELWHEEL_JOBS",
    )


def add_selection_arguments(
    parser: argparse.ArgumentParser,
    *,
    recipes: bool = True,
    default: str = "'*', every variant",
) -> None:
    """--build/--skip/--only/--arch and (unless ``recipes=False``) --recipes; ``default`` says
    what is selected when no layer selects anything."""
    group = parser.add_argument_group("selection", PRECEDENCE)
    group.add_argument(
        "--build",
        action="append",
        metavar="GLOB",
        help="select only variants whose name matches; braces expand "
        f"(e.g. 'torch2{{13,14}}-*'); repeatable (default: {default})",
    )
    group.add_argument(
        "--skip",
        action="append",
        metavar="GLOB",
        help="leave out variants whose name matches (e.g. '*-aarch64-*'); repeatable",
    )
    group.add_argument(
        "--only",
        metavar="NAME",
        help="exactly this variant (ignores build, skip and arch from pyproject.toml and the "
        "environment; refused together with those flags)",
    )
    group.add_argument(
        "--arch",
        action="append",
        dest="archs",
        metavar="ARCH",
        help="x86_64, aarch64, auto/native (this machine) or all (default); repeatable",
    )
    if recipes:
        group.add_argument(
            "--recipes", metavar="DIR", help="a recipes folder (default: the bundled recipes)"
        )


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    """The build settings: output, environments, pip sources, repair, export, version style."""
    out = parser.add_argument_group("output")
    out.add_argument(
        "--output-dir",
        "-o",
        help="where wheels and logs/ go (default: ./wheelhouse; without DIR, the project's "
        "wheelhouse/)",
    )
    out.add_argument(
        "--hub-layout",
        metavar="DIR",
        help="also write each built variant as a Hub kernel repo tree DIR/build/<variant>/ "
        "(loadable by kernels.get_local_kernel, convertible back with 'kernelwheel to-wheel')",
    )
    add_local_version_style_argument(out)
    env = parser.add_argument_group("build environment", PRECEDENCE)
    env.add_argument(
        "--python",
        metavar="PY",
        help="build with this interpreter's torch instead of a kernelwheel-made environment "
        "(it must have the variant's torch, setuptools and ninja); a path, or a name looked up "
        "on PATH (python3)",
    )
    env.add_argument("--cuda-home", help="the CUDA toolkit to use (default: found)")
    env.add_argument(
        "--cache-dir", help="build environments live here (default: ~/.cache/kernelwheel)"
    )
    env.add_argument(
        "--no-ccache",
        action="store_true",
        default=None,
        help="compile everything: no compiler cache (ccache), no reuse of an unchanged "
        "variant's shared object or repaired wheel",
    )
    env.add_argument(
        "--keep-intermediates",
        action="store_true",
        default=None,
        help="keep nvcc's intermediate files (<work>/<variant>/nvcc-keep) after a CUDA "
        "compile, for debugging; by default they are removed when the compile ends",
    )
    env.add_argument(
        "--ccache-remote",
        metavar="URL",
        help="share compiled objects between machines through ccache's remote storage: "
        "redis://HOST[:PORT], http://HOST/PATH or file:/FOLDER (docs/compiler-cache.md)",
    )
    env.add_argument(
        "--find-links",
        action="append",
        metavar="DIR_OR_URL",
        help="extra place pip looks for torch/toolchain wheels; repeatable",
    )
    env.add_argument(
        "--index-url", help="pip index for build environments (default: PyPI + recipe index)"
    )
    env.add_argument(
        "--no-index",
        action="store_true",
        default=None,
        help="pip uses no index, only --find-links: a fully offline build",
    )
    env.add_argument(
        "--cutlass-path",
        action="append",
        metavar="[NAME=]DIR",
        help="a local CUTLASS checkout of the release a kernel's depends names, used instead of "
        "PyPI's nvidia-cutlass headers (required for releases PyPI lacks); NAME=DIR serves only "
        "dependency NAME (e.g. cutlass_3_9=/src/cutlass-3.9.2); repeatable",
    )
    add_jobs_argument(env)
    env.add_argument(
        "--memory-per-thread",
        metavar="MIB",
        help="memory one compiler thread is assumed to need: jobs x threads stay within the "
        "available memory divided by it (default: auto, 2560)",
    )
    env.add_argument(
        "--variant-jobs",
        metavar="N",
        help="variants compiled at the same time, each with its share of the CPUs and memory "
        "(default: auto, one per 2 CPUs, at least 2 on 2 or more)",
    )
    cuda = parser.add_argument_group("CUDA device code", PRECEDENCE)
    cuda.add_argument(
        "--fatbin-compression",
        metavar="MODE",
        help="nvcc's fatbin compression (--compress-mode, CUDA >= 12.8): "
        f"{', '.join(FATBIN_COMPRESSION_MODES)} (default: default, nvcc's choice)",
    )
    cuda.add_argument(
        "--cuda-capabilities",
        metavar="LIST",
        help="compile for these capabilities instead of build.toml's and the recipe's, e.g. "
        "'9.0 10.0+PTX' (+PTX also embeds PTX); 'all': that full list, also for the default "
        "build, which otherwise compiles for this machine's GPUs",
    )
    cuda.add_argument(
        "--nvcc-threads",
        metavar="N",
        help="threads per nvcc (--threads); the CPUs the .cu files leave go to C++ jobs "
        "(default: auto, the CPUs shared among the .cu files, at most one per capability)",
    )
    cuda.add_argument(
        "--with-cpu-kernels",
        action="store_true",
        default=None,
        help="GPU variants also compile the cpu kernels, with KERNELWHEEL_WITH_CPU and "
        "KERNELWHEEL_WITH_CUDA defined (default: one backend per variant, as kernel-builder)",
    )
    parser.add_argument(
        "--allow-fixed-op-namespaces",
        action="store_true",
        default=None,
        help="accept Python code that registers torch ops under a fixed namespace "
        "(custom_op('ns::op')) instead of add_op_namespace_prefix (default: refused, as "
        "kernel-builder does: two builds loaded together would clash)",
    )
    repair = parser.add_argument_group("repair", PRECEDENCE)
    repair.add_argument(
        "--plat",
        metavar="POLICY",
        help="repair wheels to this manylinux policy with auditwheel and prove it with the ABI "
        "checker (default: manylinux_2_28)",
    )
    repair.add_argument(
        "--no-repair",
        dest="repair",
        action="store_false",
        default=None,
        help="keep linux_<arch> wheels (still ABI-checked against their tag)",
    )
    repair.add_argument(
        "--no-load-check",
        dest="load_check",
        action="store_false",
        default=None,
        help="do not import each linked extension in the build environment before its wheel "
        "is written (the check that fails a build on a wrong op schema or undefined symbol)",
    )
    repair.add_argument(
        "--no-abi-remedies",
        dest="abi_remedies",
        action="store_false",
        default=None,
        help="compile without kernelwheel's ABI remedies (the forced-include header binding "
        "libc/libm to the policy's versions, the compat source): the host's headers decide "
        "which symbol versions the wheel needs (docs/portability.md)",
    )
    repair.add_argument(
        "--best-effort",
        action="store_true",
        default=None,
        help="a wheel that cannot comply is kept as linux_<arch> with the checker's report "
        "instead of failing the variant",
    )


def add_local_version_style_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> None:
    parser.add_argument(
        "--local-version-style",
        choices=[s.value for s in LocalVersionStyle],
        help="dotted (default: +torch2.14.cu130.cxx11, orders right under PEP 440) or compact "
        "(+torch214cu130cxx11, the kernel-builder design's form)",
    )
