"""Issue 38 family 6, the machine's side: hostile values of the environment a build reads end in
a clear answer and in bounded time, never a traceback or a hang (each through the real CLI;
GPUs from a fake nvidia-smi on PATH, interpreters that are scripts)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from kernelwheel.builder import preflight
from kernelwheel.cli import main
from kernelwheel.plan import defaults
from kernelwheel.plan.planning import plan_project, select

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
SMI = '#!/bin/sh\necho "GPU-1234abcd, 9.0"\necho "GPU-5678abcd, 9.0"\n'


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)  # PyTorch's index answers
    for name in (
        "VIRTUAL_ENV",
        "KERNELWHEEL_PYTHON",
        "KERNELWHEEL_CUDA_DRIVER",
        "CUDA_DEVICE_ORDER",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two H100s, as nvidia-smi lists them."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "nvidia-smi").write_text(SMI)
    (folder / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize(
    ("visible", "gpu"),
    [
        ("\u0660", False),  # Arabic-Indic zero: CUDA reads ASCII digits only
        ("\u00b2", False),  # superscript two: isdigit(), but int() fails
        ("\uff11", False),  # fullwidth one
        ("0,\u00b2", True),  # GPU 0, then an entry that names none: CUDA stops there
        ("1", True),
    ],
)
def test_cuda_visible_devices_with_non_ascii_digits(
    visible: str, gpu: bool, two_gpus: None, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    (name,) = captured.out.split()
    assert ("-cu" in name) is gpu, name


def _hanging_venv(root: Path) -> Path:
    """A virtual environment whose python never answers (and leaves a mark while it runs)."""
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho $$ >> {root / 'pids'}\nexec sleep 600\n")
    python.chmod(0o755)
    return root


def _alive(pids_file: Path) -> list[int]:
    alive = []
    for pid in (int(p) for p in pids_file.read_text().split()):
        state = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True
        )
        if state.stdout.strip() and not state.stdout.strip().startswith("Z"):
            alive.append(pid)
    return alive


def test_an_active_venv_that_never_answers_delays_the_build_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It blocked `build` for 300 s though it only guides the default: now the implicit
    interpreter's bound (30 s; 2 s here), then the default without it and a note naming it."""
    assert defaults.IMPLICIT_PROBE_TIMEOUT <= 30
    monkeypatch.setattr(defaults, "IMPLICIT_PROBE_TIMEOUT", 2.0)
    venv = _hanging_venv(tmp_path / "venv")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    started = time.monotonic()
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers"])
    took = time.monotonic() - started
    captured = capsys.readouterr()
    assert code == 0 and captured.out.split() == ["torch215-cxx11-cpu-x86_64-linux"]
    assert took < 15, took
    assert (venv / "pids").exists() and _alive(venv / "pids") == []  # the probe was stopped
    # the note the build shows under its default names the interpreter that hung
    default = select(plan_project(IMG2GRAY, {}, env={"VIRTUAL_ENV": str(venv)})).default
    assert default is not None
    note = f"the active virtual environment {venv}: its python {venv / 'bin' / 'python'} gave no "
    assert any(n.startswith(f"not the torch of {note}answer within 2 s") for n in default.notes), (
        default.notes
    )


def test_a_python_the_user_named_that_never_answers_is_named_in_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kernelwheel.compat.interpreter as interpreter

    real = interpreter.report

    def quick(python: Path, **kwargs: object) -> dict[str, object]:
        kwargs["timeout"] = 2.0  # the probe's 300 s, shortened for the test
        return real(python, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(interpreter, "report", quick)
    venv = _hanging_venv(tmp_path / "venv")
    python = venv / "bin" / "python"
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    code = main(["build", str(IMG2GRAY), "--print-build-identifiers", "--python", str(python)])
    err = capsys.readouterr().err
    assert code == 5, err
    assert f"cannot run --python {python}: no answer within 2 s" in err
    assert "Traceback" not in err and _alive(venv / "pids") == []
