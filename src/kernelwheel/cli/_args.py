"""Arguments shared by several commands, defined once so a flag means the same everywhere.

Every option flag defaults to None ("not given"), so the lower layers of the precedence
(defaults < [tool.kernelwheel] < KERNELWHEEL_*) show through; :func:`option_values` hands the
given ones to :func:`kernelwheel.plan.options.resolve_options`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..model.variant import LocalVersionStyle
from ..plan.options import OPTIONS

PRECEDENCE = (
    "Precedence, lowest first: defaults < [tool.kernelwheel] in the kernel's pyproject.toml "
    "< KERNELWHEEL_* environment variables < these flags (docs/options.md)."
)


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The option flags of ``args`` by option name (None: not given)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}


def add_jobs_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--jobs",
        "-j",
        metavar="N",
        help="how many CPUs to keep busy: compiler processes in build, variants converted at "
        "once in to-wheel/lock/download; a number or auto (default: auto, all CPUs)",
    )


def add_selection_arguments(parser: argparse.ArgumentParser, *, recipes: bool = True) -> None:
    """--build/--skip/--only/--arch and (unless ``recipes=False``) --recipes."""
    group = parser.add_argument_group("selection", PRECEDENCE)
    group.add_argument(
        "--build",
        action="append",
        metavar="GLOB",
        help="build only variants whose name matches; braces expand "
        "(e.g. 'torch2{13,14}-*'); repeatable (default: '*')",
    )
    group.add_argument(
        "--skip",
        action="append",
        metavar="GLOB",
        help="leave out variants whose name matches (e.g. '*-aarch64-*'); repeatable",
    )
    group.add_argument(
        "--only", metavar="NAME", help="exactly this variant (ignores build, skip and arch)"
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
        "--output-dir", "-o", help="where wheels and logs/ go (default: ./wheelhouse)"
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
        help="build with this interpreter's torch instead of a kernelwheel-made environment "
        "(it must have the variant's torch, setuptools and ninja)",
    )
    env.add_argument("--cuda-home", help="the CUDA toolkit to use (default: found)")
    env.add_argument(
        "--cache-dir", help="build environments live here (default: ~/.cache/kernelwheel)"
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
    add_jobs_argument(env)
    cuda = parser.add_argument_group("CUDA device code", PRECEDENCE)
    cuda.add_argument(
        "--fatbin-compression",
        metavar="MODE",
        help="nvcc's fatbin compression (--compress-mode, CUDA >= 12.8): default, size, speed, "
        "balance or none (default: default, nvcc's choice)",
    )
    cuda.add_argument(
        "--cuda-capabilities",
        metavar="LIST",
        help="compile for these capabilities instead of build.toml's and the recipe's, e.g. "
        "'9.0 10.0+PTX' (+PTX also embeds PTX)",
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


