"""``kernelwheel to-wheel REPO VERSION``: convert a Hub kernel repo's build/ variants to wheels."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan.options import resolve_command_option, resolve_jobs
from ._args import add_jobs_argument, add_local_version_style_argument
from .ui import ConsoleUI

if TYPE_CHECKING:
    from ..hub import ToWheelResult


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "to-wheel",
        help="convert a Hub kernel repo (or a git clone of one) into wheels, one per variant",
        description=(
            "Convert every build/<variant>/ folder of a Hugging Face Hub kernel repo into a "
            "wheel: {name}-{version}+{local}-cp39-abi3-{platform}.whl for compiled variants, "
            "py3-none-any for noarch ones. REPO is a Hub repo id (downloaded with "
            "huggingface_hub, honouring HF_ENDPOINT, HF_TOKEN, HF_HOME/HF_HUB_CACHE and "
            "HF_HUB_OFFLINE; only build/ is fetched) or a local git clone. Every file is "
            "verified against the hash its source announces; each binary wheel gets an import "
            "guard and the ABI check of 'kernelwheel check'."
        ),
        epilog=(
            "VERSION:\n"
            "  1.1.2         the release tag v1.1.2 (legacy repos)\n"
            "  1             the release branch v1 (current repos)\n"
            "  '>=1.1,<2'    the highest vX.Y.Z tag in the range\n"
            "  with --revision, VERSION is only the version stamped on the wheels\n"
            "\n"
            "examples:\n"
            "  kernelwheel to-wheel drbh/img2gray 1.1.2\n"
            "  kernelwheel to-wheel kernels-community/activation 1 --variant 'torch2{8,9}-*'\n"
            "  kernelwheel to-wheel ./img2gray-clone '>=1.1,<2' -o wheelhouse\n"
            "  kernelwheel to-wheel drbh/img2gray 1.1.3 --revision 0123abcd...\n"
            "\n"
            "exit codes: 0 all selected variants written; 2 bad arguments (a --variant glob "
            "matching nothing, an unusable -o); 4 a variant name could not be mapped, or two "
            "variant folders make the same wheel; 7 a wheel could not be written (e.g. a name "
            "the file system refuses) or read back for the ABI check; 8 a variant failed the "
            "ABI check; 9 repo/revision/integrity problem (nothing written) or a variant folder "
            "could not be converted; 130/143 interrupted (SIGINT/SIGTERM, nothing left behind). "
            "With several failed variants, the highest code."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("repo", metavar="REPO", help="Hub repo id (org/name) or a local git clone")
    p.add_argument("version", metavar="VERSION", help="1.1.2, 1, or a PEP 440 range (see below)")
    p.add_argument("--revision", metavar="REV", help="convert this branch, tag or commit instead")
    p.add_argument(
        "--output-dir",
        "-o",
        type=Path,
        default=Path("wheelhouse"),
        help="where the wheels go (default: ./wheelhouse)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="GLOB",
        help="convert only variants matching this glob (brace expansion allowed, e.g. "
        "'torch2{7,8}-*-x86_64-linux'); repeatable; a glob matching nothing is an error",
    )
    p.add_argument(
        "--allow-abi-violations",
        action="store_true",
        help="write wheels whose shared objects fail the ABI check (reported, not refused)",
    )
    p.add_argument(
        "--name",
        metavar="NAME",
        help="the package and distribution name (default: metadata.json's name; for the flat "
        "layout else the name the shim folder and the _<name>_<id> extension agree on, else "
        "the repo's name)",
    )
    add_jobs_argument(p)
    add_local_version_style_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    from ..errors import UsageError
    from ..hub import ToWheelRequest, to_wheels  # imported when used: other commands start faster
    from ..model.project import is_package_name, package_name

    if args.name is not None and not is_package_name(package_name(args.name)):
        raise UsageError(
            f"--name {args.name!r} does not make a Python package name",
            hint="use letters, digits, '_' and '-', starting with a letter (e.g. 'activation')",
        )
    request = ToWheelRequest(
        name=args.name,
        repo=args.repo,
        version=args.version,
        revision=args.revision,
        output_dir=args.output_dir,
        variants=tuple(args.variant),
        allow_abi_violations=args.allow_abi_violations,
        local_version_style=resolve_command_option(
            "local_version_style", args.local_version_style
        ),
        jobs=resolve_jobs(resolve_command_option("jobs", args.jobs)),
    )
    result = to_wheels(request, ui)
    report(result, ui)
    return result.exit_code


def report(result: ToWheelResult, ui: ConsoleUI) -> None:
    ui.print()
    ui.print(f"revision: {result.resolution.describe()}")
    for c in result.converted:
        ui.print(f"  {c.wheel}")
        extra = [f"{c.layout.value} layout, package {c.package}", f"ABI {c.abi}", *c.notes]
        ui.print("    " + "; ".join(extra))
    for name in result.not_selected:
        ui.print(f"  - {name}: not selected by --variant")
    for r in result.rejected:
        ui.warn(f"{r.variant}: not converted: {r.reason}")
    total = len(result.converted) + len(result.rejected)
    summary = f"{len(result.converted)} of {total} selected variant(s) written"
    if result.rejected:
        ui.error(f"{summary}; {len(result.rejected)} not converted (see above)")
    else:
        ui.print(summary)
