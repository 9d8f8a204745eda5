"""The interpreter probe (kernelwheel.compat.interpreter) and the errors its two callers give: the
build's environment probe (toolchain.envs.probe) and kernelwheel install's (install.probe)."""

from __future__ import annotations

import dataclasses
import stat
import sys
from pathlib import Path

import pytest

from kernelwheel.cli import main
from kernelwheel.compat import interpreter as _interpreter
from kernelwheel.errors import InstallError, ToolchainError, UsageError
from kernelwheel.install import probe as install_probe
from kernelwheel.toolchain import envs

# kernelwheel's own interpreter has no torch (torch lives in the build environments).
NO_TORCH = Path(sys.executable)


def _fake_python(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_reads_python_platform_tags_and_a_missing_torch() -> None:
    if _has_torch():
        pytest.skip("this interpreter has torch")
    found = _interpreter.run(NO_TORCH)
    assert found.python == sys.version_info[:2]
    assert found.python_version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert found.implementation == sys.implementation.name
    assert found.tags and found.tags[0].startswith(f"cp{sys.version_info[0]}{sys.version_info[1]}")
    assert found.torch is None and found.torch_dist is None
    assert found.torch_error is not None and "torch" in found.torch_error


def test_a_missing_interpreter_did_not_start(tmp_path: Path) -> None:
    with pytest.raises(_interpreter.ProbeFailed) as info:
        _interpreter.run(tmp_path / "no-python")
    assert not info.value.started
    assert "No such file" in str(info.value)


def test_an_interpreter_that_fails_reports_its_stderr(tmp_path: Path) -> None:
    broken = _fake_python(tmp_path, "echo 'SyntaxError: not a Python 3' >&2; exit 1")
    with pytest.raises(_interpreter.ProbeFailed) as info:
        _interpreter.run(broken)
    assert info.value.started
    assert str(info.value) == "SyntaxError: not a Python 3"


def test_a_hanging_interpreter_times_out_without_quoting_the_script(tmp_path: Path) -> None:
    hanging = _fake_python(tmp_path, "exec sleep 30")
    with pytest.raises(_interpreter.ProbeFailed) as info:
        _interpreter.run(hanging, timeout=0.5)
    assert info.value.started
    assert str(info.value) == "no answer within 0.5 s"


def test_build_probe_errors_name_the_interpreter_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="cannot run the interpreter .*no-python") as info:
        envs.probe(tmp_path / "no-python")
    assert info.value.hint
    broken = _fake_python(tmp_path, "echo 'boom' >&2; exit 3")
    with pytest.raises(ToolchainError, match=r"failed to start:\nboom") as info:
        envs.probe(broken)
    assert info.value.hint and "omit --python" in info.value.hint
    if not _has_torch():
        with pytest.raises(ToolchainError, match="has no usable torch") as info:
            envs.probe(NO_TORCH)
        assert info.value.hint and "omit --python" in info.value.hint


def test_install_probe_errors_name_the_interpreter_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match="cannot run --python .*no-python") as info:
        install_probe.probe(tmp_path / "no-python")
    assert info.value.hint and "--python" in info.value.hint
    with pytest.raises(UsageError, match="cannot run --python .*: Permission denied"):
        install_probe.probe(Path("/etc/passwd"))  # not executable: a bad --python, exit 2
    with pytest.raises(SystemExit):
        main(["variants", "--help"])
    assert "a --python that cannot be run" in capsys.readouterr().out  # the code is documented
    # It ran and ended without the probe's facts (a script, a Python 2): a bad --python, exit 2
    # (before: exit 10, "no fitting build, a torch that does not import, pip failed").
    broken = _fake_python(tmp_path, "echo 'first line' >&2; echo 'the reason' >&2; exit 3")
    with pytest.raises(UsageError) as bad:
        install_probe.probe(broken)
    assert bad.value.message.startswith(f"--python {broken} did not run kernelwheel's probe")
    assert bad.value.message.endswith(": the reason")  # the last line, where the error is
    assert bad.value.hint and "--python .venv/bin/python" in bad.value.hint
    # Killed by a signal while probed (a torch import that crashes): the environment's fault.
    (tmp_path / "crash").mkdir()
    crashing = _fake_python(tmp_path / "crash", "echo 'Segmentation fault' >&2; kill -SEGV $$")
    with pytest.raises(InstallError) as info:
        install_probe.probe(crashing)
    assert info.value.message == (f"cannot inspect the interpreter {crashing}: Segmentation fault")


def test_an_interpreter_without_torch_is_a_target_for_tvm_ffi_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was refused ("has no usable torch"): a tvm-ffi build, which needs no torch, could not
    be installed there. A torch that is installed but does not import is still refused."""
    if _has_torch():
        pytest.skip("this interpreter has torch")
    monkeypatch.setenv("KERNELWHEEL_CUDA_DRIVER", "12.8")
    target = install_probe.probe(NO_TORCH)
    assert target.torch is None and target.torch_dist is None and target.driver == (12, 8)
    assert target.describe().startswith("no torch, ")
    assert target.describe().endswith(", CUDA driver: 12.8")
    found = _interpreter.run(NO_TORCH)
    broken = dataclasses.replace(found, torch_dist="2.13.0", torch_error="ImportError: libc10")
    monkeypatch.setattr(_interpreter, "run", lambda *args, **kwargs: broken)
    with pytest.raises(InstallError, match="has no usable torch .ImportError: libc10") as info:
        install_probe.probe(NO_TORCH)
    assert info.value.hint and "never installs or changes torch" in info.value.hint


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def test_install_python_is_a_path_or_a_name_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """kernelwheel install --python reads its value as the build's --python does (and pip)."""
    from kernelwheel.cli import main
    from kernelwheel.install.service import target_python

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    named = _fake_python(bin_dir, "exit 3")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.chdir(tmp_path)
    assert target_python("python") == named  # on PATH, not ./python
    assert target_python("bin/python") == tmp_path / "bin" / "python"
    code = main(["install", "img2gray", "--find-links", str(tmp_path), "--python", "python3.99"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--python: no 'python3.99' on PATH" in err and "Traceback" not in err
