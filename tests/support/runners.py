"""A process runner for tests that starts nothing: it records every command kernelwheel gives
it and answers each from a function, so a test replaces the processes of a whole build by
passing this runner in (no module attribute is patched)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelwheel._util import Runner


@dataclass(frozen=True)
class Reply:
    """What a faked command does: its exit code and its output."""

    code: int = 0
    stdout: str = ""
    stderr: str = ""


class ScriptedRunner(Runner):
    """Records each command (as strings) in :attr:`commands`, with its working folder in
    :attr:`folders`, and answers it with ``answer(cmd, cwd)``. :meth:`spawn` is refused: no
    faked command may stay running."""

    def __init__(self, answer: Callable[[list[str], Path | None], Reply]) -> None:
        self.answer = answer
        self.commands: list[list[str]] = []
        self.folders: list[Path | None] = []

    def _reply(self, cmd: Sequence[str | Path], cwd: Path | None) -> tuple[list[str], Reply]:
        args = [str(c) for c in cmd]
        self.commands.append(args)
        self.folders.append(cwd)
        return args, self.answer(args, cwd)

    def logged(
        self,
        cmd: Sequence[str | Path],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        args, reply = self._reply(cmd, cwd)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as fh:
            fh.write(f"$ {' '.join(args)}\n{reply.stdout}{reply.stderr}")
        return reply.code

    def captured(
        self,
        cmd: Sequence[str | Path],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        input: str | None = None,
        merge_stderr: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        args, reply = self._reply(cmd, cwd)
        out, err = (
            (reply.stdout + reply.stderr, "") if merge_stderr else (reply.stdout, reply.stderr)
        )
        return subprocess.CompletedProcess(args, reply.code, out, err)

    def captured_bytes(
        self, cmd: Sequence[str | Path], *, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        args, reply = self._reply(cmd, None)
        return subprocess.CompletedProcess(
            args, reply.code, reply.stdout.encode(), reply.stderr.encode()
        )

    def spawn(self, cmd: Sequence[str | Path]) -> subprocess.Popen[bytes]:
        raise AssertionError(f"a scripted runner starts nothing: {cmd}")


def is_torch_probe(cmd: Sequence[str]) -> bool:
    """Whether ``cmd`` is kernelwheel's interpreter probe (compat.interpreter)."""
    return len(cmd) > 2 and cmd[1] == "-c" and "KERNELWHEEL-PROBE" in cmd[2]


def torch_probe_reply(
    python: str,
    purelib: Path,
    *,
    torch: str = "2.14.1+cpu",
    cuda: str | None = None,
    tags: Sequence[str] = ("cp311-cp311-manylinux_2_28_x86_64",),
) -> Reply:
    """What the interpreter probe prints for an x86_64 CPython 3.11 with ``torch`` (built for
    CUDA ``cuda``, else for the CPU) in ``purelib``, supporting the wheel ``tags``."""
    backend = [int(n) for n in cuda.split(".")] if cuda else None
    report = {
        "python": [3, 11],
        "implementation": "cpython",
        "executable": python,
        "machine": "x86_64",
        "purelib": str(purelib),
        "prefix": str(purelib.parent),
        "sys_path": [],
        "pip": True,
        "torch": [torch, "cuda" if cuda else "cpu", backend, True, None],
        "torch_cuda": cuda,
        "torch_hip": None,
        "torch_dist": torch,
        "tags": list(tags),
    }
    return Reply(stdout="KERNELWHEEL-PROBE " + json.dumps(report) + "\n")


class RecordingRunner(Runner):
    """kernelwheel's real runner that also records each command (as strings) in
    :attr:`commands`: proof that a command went through the runner it was given."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def logged(
        self,
        cmd: Sequence[str | Path],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        self.commands.append([str(c) for c in cmd])
        return super().logged(cmd, log, env=env, cwd=cwd)

    def captured(
        self,
        cmd: Sequence[str | Path],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        input: str | None = None,
        merge_stderr: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        self.commands.append([str(c) for c in cmd])
        return super().captured(
            cmd, timeout=timeout, env=env, cwd=cwd, input=input, merge_stderr=merge_stderr
        )

    def captured_bytes(
        self, cmd: Sequence[str | Path], *, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        self.commands.append([str(c) for c in cmd])
        return super().captured_bytes(cmd, input=input)
