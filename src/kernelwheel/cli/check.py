"""``kernelwheel check WHEEL...``: prove each wheel's ABI compliance, or name what breaks it."""

from __future__ import annotations

import argparse
import errno
import os
from collections.abc import Sequence
from pathlib import Path

from ..abi.checker import FROM_TAG, check_shared_object, check_wheel, read_wheel_tags
from ..abi.policy import DEFAULT_POLICY
from ..abi.report import Rule, SoReport, WheelReport
from ..abi.torch_floor import load_shim_table
from ..builder.load_check import wheel_call_warnings
from ..errors import AbiError, UsageError, WheelError
from ._args import path_arg
from .ui import ConsoleUI

# Violations listed per group (same rule, file and fix) before the table says "... and N more".
_SHOWN_PER_GROUP = 10


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = "\n".join(f"  {r.value:<16} {r.description}" for r in Rule)
    p = sub.add_parser(
        "check",
        help="check wheels (or .so files) against manylinux, abi3 and the C++ ABI",
        description=(
            "Check every shared object in each wheel: versioned glibc/libstdc++ symbols against "
            "the manylinux policy's caps (auditwheel's data), Python C-API symbols against the "
            "stable ABI of the wheel's cp3X-abi3 tag, needed libraries against the allowed ones, "
            "and __cxx11 mangling against the C++ ABI in the wheel's local version; a build "
            "against libtorch's stable ABI (+torchX.Y.stable...) must import none of libtorch's "
            "C++ API; files named .so must be ELF. Each wheel's integrity is checked too (the "
            "record rule: RECORD lists every file once with a matching hash, no duplicate, "
            "'../' or symlink entries). A call in a wheel's package of an op its extension "
            "does not define (renamed or removed) is warned of, as build warns of it. "
            f"Exits 0 when everything complies, {AbiError.exit_code} on any violation, "
            f"{UsageError.exit_code} for a path that is no wheel or .so, "
            f"{WheelError.exit_code} for a wheel that cannot be read."
        ),
        epilog=(
            f"rules:\n{rules}\n\n"
            "examples:\n"
            "  kernelwheel check wheelhouse/*.whl\n"
            "  kernelwheel check --json dist/img2gray-*.whl\n"
            "  kernelwheel check --policy tag wheelhouse/*manylinux*.whl   # verify the tag\n"
            "  kernelwheel check build/_img2gray.abi3.so --python-abi 3.10 --cxx-abi cxx11"
        ),
    )
    p.add_argument("paths", nargs="+", type=path_arg, metavar="WHEEL", help="wheels or .so files")
    p.add_argument("--json", action="store_true", help="print a machine-readable report")
    p.add_argument(
        "--policy",
        default=DEFAULT_POLICY,
        help=f"target manylinux policy (default: {DEFAULT_POLICY}); 'tag' checks the policy "
        "each wheel's platform tag claims",
    )
    p.add_argument(
        "--python-abi",
        metavar="X.Y|none",
        help="abi3 floor to check Python symbols against (default: the wheel's cp3X-abi3 tag; "
        "3.9 for a .so); 'none' skips the rule",
    )
    p.add_argument(
        "--cxx-abi",
        choices=["cxx11", "cxx98", "none"],
        help="C++ ABI to check (default: from the wheel's local version, e.g. +torch2.9.cu128."
        "cxx11; unchecked when absent); 'none' skips the rule",
    )
    p.add_argument(
        "--torch-abi",
        choices=["stable", "full"],
        help="'stable' checks the object as a build against libtorch's stable ABI (the torch-abi "
        "rule), 'full' skips that rule (default: stable when the wheel's local version says so, "
        "e.g. +torch2.10.stable.cu130; full for a .so)",
    )


def _override(value: str | None, default: str | None) -> str | None:
    if value is None:
        return default
    return None if value.lower() == "none" else value


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    _refuse_unmatched(args.paths)
    policy: str | None = None if args.policy == "tag" else args.policy
    reports: list[WheelReport | SoReport] = []
    calls: list[tuple[str, ...]] = []  # each wheel's package calls of ops its binding lacks
    for path in args.paths:
        if path.suffix == ".whl":
            stable = FROM_TAG if args.torch_abi is None else args.torch_abi == "stable"
            report: WheelReport | SoReport = check_wheel(
                path,
                policy=policy,
                python_abi=_override(args.python_abi, FROM_TAG),
                cxxabi=_override(args.cxx_abi, FROM_TAG),
                torch_stable_abi=stable,
            )
        else:
            report = check_shared_object(
                path,
                policy=policy or DEFAULT_POLICY,
                python_abi=_override(args.python_abi, "3.9"),
                cxxabi=_override(args.cxx_abi, None),
                torch_stable_abi=args.torch_abi == "stable",
            )
        reports.append(report)
        calls.append(wheel_call_warnings(path) if path.suffix == ".whl" else ())
    ok = all(r.ok for r in reports)
    if args.json:
        kinds = {WheelReport: "wheel", SoReport: "shared_object"}
        dicts = [
            {"kind": kinds[type(r)], **r.to_dict()}
            | ({"warnings": list(said)} if isinstance(r, WheelReport) else {})
            for r, said in zip(reports, calls, strict=True)
        ]
        ui.print_json({"ok": ok, "reports": dicts})
    else:
        for report, said in zip(reports, calls, strict=True):
            render(report, ui, said)
    if ok:
        return 0
    bad = sum(1 for r in reports if not r.ok)
    count = sum(len(r.violations) for r in reports)
    rules = sorted({v.rule for r in reports for v in r.violations}, key=list(Rule).index)
    # a wheel that lies in its RECORD, or installs another's files, has no ABI problem
    what = (
        "ABI violation(s)"
        if all(rule.per_object for rule in rules)
        else f"violation(s) of the {', '.join(rule.value for rule in rules)} rule(s)"
    )
    ui.error(
        f"{count} {what} in {bad} of {len(reports)} file(s); each entry above says why and how "
        "to fix it"
    )
    return AbiError.exit_code


def _refuse_unmatched(paths: list[Path]) -> None:
    """A shell glob that matched nothing reaches us as the pattern itself: say so. A kernel
    project's folder (``kernelwheel check .`` after ``dev``): where its wheels come from."""
    for path in paths:
        if (path / "build.toml").is_file():
            wheels = path / "wheelhouse"
            raise UsageError(
                f"{path}: is a kernel project (build.toml), not a wheel or shared object",
                hint=f"'kernelwheel check {wheels}/*.whl'"
                if any(wheels.glob("*.whl"))
                else f"'kernelwheel build' run in {path} writes its wheel to {wheels}, then "
                f"'kernelwheel check {wheels}/*.whl' (kernelwheel dev and test write no wheel)",
            )
        if path.exists():
            continue
        if any(c in str(path) for c in "*?["):
            where = (
                f"{path.parent} holds no such file"
                if path.parent.is_dir()
                else f"there is no folder {path.parent}"
            )
            raise UsageError(
                f"no file matched {str(path)!r}",
                hint=f"{where} (the shell passes a pattern that matches nothing through as it "
                "is); build or download the wheels first",
            )
        if path.is_symlink():  # exists() follows it: a loop, or a link to nowhere
            try:
                os.stat(path)
            except OSError as exc:
                what = "loops" if exc.errno == errno.ELOOP else "points to no file"
            else:
                continue  # its target appeared since
            raise UsageError(
                f"{path}: a symbolic link that {what} (-> {os.readlink(path)})",
                hint="point it at a wheel or .so file (ls -l shows where it points), or pass the "
                "file itself",
            )
        raise UsageError(f"{path}: no such file", hint="pass existing wheels or .so files")


def _mark(ui: ConsoleUI, state: bool | None) -> str:
    return "-" if state is None else ui.ok_mark if state else ui.fail_mark


def _render_torch_floor(report: WheelReport | SoReport, ui: ConsoleUI) -> None:
    """The torch floor declared (METADATA) and measured (libtorch shim imports), if any."""
    table = load_shim_table()
    if isinstance(report, SoReport):
        if report.torch_floor is not None and report.torch_floor.imports:
            ui.print(f"  torch floor measured: {report.torch_floor.describe(table)}")
        return
    measured = report.measured_torch
    if not measured.imports and report.declared_torch is None:
        return
    declared = report.declared_torch or "no torch requirement"
    ui.print(f"  torch floor declared: {declared}; measured: {measured.describe(table)}")
    if report.torch_floor_warning:
        ui.print(f"  ! warning: {report.torch_floor_warning}")


_LINUX = ("manylinux", "musllinux", "linux")


def render(report: WheelReport | SoReport, ui: ConsoleUI, warnings: Sequence[str] = ()) -> None:
    """A table per wheel: one row per shared object, one mark per rule, then each violation,
    then the ``warnings`` of what no rule covers (a call of an op the binding lacks)."""
    objects = report.objects if isinstance(report, WheelReport) else (report,)
    ui.group(report.wheel if isinstance(report, WheelReport) else report.file)
    python = f"abi3 >= {report.python_abi}" if report.python_abi else "not checked"
    stable = " | torch stable ABI" if report.status(Rule.TORCH_ABI) is not None else ""
    ui.print(
        f"  target {report.policy} | Python {python} | C++ ABI {report.cxxabi or 'not checked'}"
        f"{stable}"
    )
    columns = [r for r in Rule if r.per_object]
    if isinstance(report, WheelReport) and report.integrity_checked:
        for rule in (Rule.RECORD, Rule.WHEEL):
            ui.print(f"  {_mark(ui, report.status(rule))} {rule.value}")
    if not objects:
        platforms = (
            read_wheel_tags(report.wheel).platforms if isinstance(report, WheelReport) else ()
        )
        other = [p for p in platforms if p != "any" and not p.startswith(_LINUX)]
        ui.print(
            f"  no ELF file: a {other[0]} wheel's binaries are not checked (the check reads ELF)"
            if other
            else "  no shared objects (nothing to check)"
        )
    else:
        width = max(len("file"), *(len(o.file) for o in objects))
        ui.print("  " + "file".ljust(width) + "  " + "  ".join(r.value for r in columns))
        for o in objects:
            marks = "  ".join(_mark(ui, o.status(r)).ljust(len(r.value)) for r in columns)
            ui.print("  " + o.file.ljust(width) + "  " + marks)
            if o.requires:
                needs = ", ".join(f"{p} {v}" for p, v in o.requires)
                ui.print("  " + " " * width + f"  needs {needs}")
    _render_torch_floor(report, ui)
    if isinstance(report, WheelReport):
        for v in report.integrity:
            ui.print(f"  {ui.fail_mark} {v.rule.value}  {v.subject}: {v.cause}")
        for fix in dict.fromkeys(v.fix for v in report.integrity):
            ui.print(f"      fix:   {fix}")
    for o in objects:
        for rule in columns:
            # Violations with the same fix are listed together, then explained once.
            violated = [v for v in o.violations if v.rule is rule]
            for fix in dict.fromkeys(v.fix for v in violated):
                group = [v for v in violated if v.fix == fix]
                for v in group[:_SHOWN_PER_GROUP]:
                    version = f" ({v.version})" if v.version else ""
                    ui.print(f"  {ui.fail_mark} {rule.value}  {o.file}: {v.subject}{version}")
                if len(group) > _SHOWN_PER_GROUP:
                    ui.print(
                        f"    ... and {len(group) - _SHOWN_PER_GROUP} more like these "
                        "(--json lists all)"
                    )
                cause = "cause (of the first)" if len({v.cause for v in group}) > 1 else "cause"
                ui.print(f"      {cause}: {group[0].cause}")
                ui.print(f"      fix:   {fix}")
    for warning in warnings:
        ui.print(f"  ! {warning}")
    verdict = "complies" if report.ok else f"{len(report.violations)} violation(s)"
    ui.print(f"  {ui.ok_mark if report.ok else ui.fail_mark} {verdict}")
    ui.endgroup()
