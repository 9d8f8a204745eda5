"""``kernelwheel to-wheel REPO VERSION``: convert a Hub kernel repo's build/ variants to wheels."""

from __future__ import annotations

import argparse
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from .._util import output_dir, sha256_file
from ..plan.options import resolve_command_option
from ._args import (
    add_json_argument,
    add_option_arguments,
    add_variant_argument,
    jobs_value,
    path_arg,
)
from .ui import ConsoleUI, header, slug

if TYPE_CHECKING:
    from ..hub.towheel import ToWheelResult


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
            "  kernelwheel to-wheel drbh/img2gray 1.1.2 --variant 'torch2{7..9}-*' --json\n"
            "  kernelwheel to-wheel drbh/img2gray 1.1.3 --revision 0123abcd...\n"
            "\n"
            "log: OUTPUT_DIR/logs/to-wheel-<repo>.log (every step, every reason, any error)\n"
            "\n"
            "exit codes: 0 all selected variants written; 2 bad arguments (a --variant glob "
            "matching nothing, an unusable -o); 4 a variant name could not be mapped, or two "
            "variant folders make the same wheel; 7 a wheel could not be written (e.g. a name "
            "the file system refuses) or read back for the ABI check; 8 a variant failed the "
            "ABI check; 9 repo/revision/integrity problem (nothing written) or a variant folder "
            "could not be converted; 130/143 interrupted (SIGINT/SIGTERM, nothing left behind). "
            "With several failed variants, the highest code."
        ),
    )
    p.add_argument(
        "repo",
        metavar="REPO",
        help="Hub repo id (org/name) or a local git clone; REPO@VERSION (as 'kernelwheel "
        "variants' takes it) stands for REPO VERSION",
    )
    p.add_argument(
        "version", metavar="VERSION", nargs="?", help="1.1.2, 1, or a PEP 440 range (see below)"
    )
    p.add_argument("--revision", metavar="REV", help="convert this branch, tag or commit instead")
    p.add_argument(
        "--output-dir",
        "-o",
        type=path_arg,
        default=Path("wheelhouse"),
        help="where the wheels (and logs/) go (default: ./wheelhouse)",
    )
    add_variant_argument(p, "convert only the variants it matches", "'torch2{7,8}-*-x86_64-linux'")
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
    add_json_argument(p, "each variant's wheel path, sha256, status and the log")
    add_option_arguments(p, "jobs", "local_version_style", grouped=False)


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    # imported when used: starts faster
    from ..errors import UsageError, VariantError
    from ..hub.towheel import ToWheelRequest, refused_source, to_wheels
    from ..model.names import is_package_name, package_name, shadowing

    if args.name is not None and not is_package_name(package_name(args.name)):
        raise UsageError(
            f"--name {args.name!r} does not make a Python package name",
            hint="use letters, digits, '_' and '-', starting with a letter (e.g. 'activation')",
        )
    if args.name is not None and (shadowed := shadowing(args.name, package_name(args.name))):
        raise UsageError(
            f"--name {args.name!r} would shadow {shadowed}",
            hint=f"choose a name of the kernel's own, e.g. --name {args.name}-kernel",
        )
    version_given = args.version is not None
    if not version_given:  # REPO@VERSION, as variants takes it
        from ..hub.variants import split_source

        args.repo, args.version = split_source(args.repo, "REPO")
        if args.version is None:
            raise UsageError(
                "VERSION is missing",
                hint=f"kernelwheel to-wheel {args.repo} VERSION (or {args.repo}@VERSION), e.g. "
                "1 (branch v1) or 1.1.2 (tag v1.1.2)",
            )
    if (refused := refused_source(args.repo)) is not None:  # before the output folder is made
        if version_given and "@" in args.repo:
            refused.hint = (
                f"give the version once: kernelwheel to-wheel {args.repo} (or "
                f"{args.repo.rpartition('@')[0]} {args.version})"
            )
        raise refused
    name = args.repo.rstrip("/").rsplit("/", 1)[-1] if Path(args.repo).is_dir() else args.repo
    made = not args.output_dir.exists()
    output_dir(args.output_dir, "--output-dir")  # a file or an unwritable folder: a clear error
    log = ui.log_to(args.output_dir / "logs" / f"to-wheel-{slug(name)}.log", header("to-wheel"))
    try:
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
            jobs=jobs_value(args),
        )
        result = to_wheels(request, ui, runner=args.runner)
    except (UsageError, VariantError):
        # Refused for its arguments: the log and the output folder made for it go (when empty).
        ui.discard_log()
        if made:
            with suppress(OSError):
                args.output_dir.rmdir()
        raise
    if args.json:  # the log keeps the report all the same
        lines = [f"revision: {result.resolution.describe()}"]
        lines += [f"  {c.wheel}: {c.abi}" for c in result.converted]
        lines += [f"  {r.variant}: not converted: {r.reason}" for r in result.rejected]
        ui.log_only("\n".join(lines))
        ui.print_json(to_json(result, log))
    else:
        report(result, ui, log)
    return result.exit_code


def to_json(result: ToWheelResult, log: Path) -> dict[str, object]:
    wheels: list[dict[str, object]] = [
        {
            "variant": c.variant,
            "status": "written",
            "path": str(c.wheel),
            "sha256": sha256_file(c.wheel),
            "log": str(log),
            "layout": c.layout.value,
            "package": c.package,
            "abi": c.abi,
            "kernels_minver": c.kernels_minver,
            "notes": list(c.notes),
        }
        for c in result.converted
    ]
    wheels += [
        {
            "variant": r.variant,
            "status": "rejected",
            "path": None,
            "sha256": None,
            "log": str(log),
            "reason": r.reason,
            "exit_code": r.exit_code,
        }
        for r in result.rejected
    ]
    wheels += [
        {"variant": n, "status": "not-selected", "path": None, "sha256": None, "log": None}
        for n in result.not_selected
    ]
    return {
        "command": "to-wheel",
        "ok": result.exit_code == 0,
        "repo": result.where,
        "revision": result.resolution.describe(),
        "commit": result.resolution.commit,
        "log": str(log),
        "wheels": wheels,
    }


def report(result: ToWheelResult, ui: ConsoleUI, log: Path) -> None:
    ui.print()
    ui.print(f"revision: {result.resolution.describe()}")
    for c in result.converted:
        ui.print(f"  {c.wheel}")
        extra = [f"{c.layout.value} layout, package {c.package}", f"ABI {c.abi}", *c.notes]
        if c.kernels_minver is not None:
            extra.append(f"kernels-minver {c.kernels_minver} (kept in .dist-info/hub/)")
        ui.print("    " + "; ".join(extra))
    for name in result.not_selected:
        ui.print(f"  - {name}: not selected by --variant")
    for r in result.rejected:
        ui.warn(f"{r.variant}: not converted: {r.reason}")
    total = len(result.converted) + len(result.rejected)
    summary = f"{len(result.converted)} of {total} selected variant(s) written"
    if result.rejected:
        ui.error(f"{summary}; {len(result.rejected)} not converted (see above; log: {log})")
    else:
        ui.print(summary)
