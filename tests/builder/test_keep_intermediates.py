"""Issue 30: nvcc's --keep intermediates (hundreds of MB per CUDA variant) are removed when the
compile ends, whether it succeeds, fails or is interrupted; the keep-intermediates option keeps
them for debugging. The compile worker is replaced by a stand-in that writes what nvcc --keep
writes and ends as asked."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.requests import build_request
from support.variants import TORCH214_CU130

from kernelwheel._util import Runner
from kernelwheel.builder import pipeline, steps
from kernelwheel.builder.compile_plan import Toolchain
from kernelwheel.builder.request import BuildRequest
from kernelwheel.errors import BuildError
from kernelwheel.model.variant import Variant
from kernelwheel.toolchain.envs import CudaToolkit, EnvInfo

NVCC13 = ("7.5", "8.0", "8.6", "8.7", "8.8", "8.9", "9.0", "10.0", "11.0", "10.3", "12.0", "12.1")
CU130 = Variant.parse(TORCH214_CU130)


def _request(root: Path, **settings: Any) -> BuildRequest:
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "k.cu").write_text("// x\n")
    (root / "torch-ext" / "kk").mkdir(parents=True)
    (root / "torch-ext" / "binding.cpp").write_text("// x\n")
    (root / "torch-ext" / "kk" / "__init__.py").write_text("")
    (root / "build.toml").write_text(
        textwrap.dedent(
            """\
            [general]
            name = "kk"
            backends = ["cuda"]
            [torch]
            src = ["torch-ext/binding.cpp"]
            [kernel.k]
            backend = "cuda"
            depends = ["torch"]
            src = ["csrc/k.cu"]
            """
        )
    )
    req = build_request(root, CU130, jobs=4, no_ccache=True, **settings)
    req.log.parent.mkdir(parents=True)  # as the build's opening makes it
    return req


ENV = EnvInfo(
    Path("/env/bin/python"), "3.11", "x86_64", Path("/env/lib"), "2.14.1", "13.0", None, True
)
PREPARED = pipeline.Prepared(ENV, None, None, None)


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The compile worker's stand-in: writes into the keep folder, then exits with
    ``state["code"]`` (or raises ``state["raise"]``, as an interrupt would arrive)."""
    state: dict[str, Any] = {"code": 1, "raise": None, "kept": None}
    toolkit = CudaToolkit(Path("/cuda"), "13.0")
    monkeypatch.setattr(
        steps, "probe_toolchain", lambda *a, **k: Toolchain(toolkit, NVCC13, cpus=4)
    )
    monkeypatch.setattr(steps, "provide_headers", lambda *a, **k: ())
    monkeypatch.setattr(steps, "compile_env", lambda *a, **k: ({}, False))

    class Worker(Runner):
        def logged(self, cmd: Any, log: Path, **kwargs: Any) -> int:  # the compile worker
            keep = Path(kwargs["cwd"]) / "nvcc-keep"
            assert keep.is_dir(), "the keep folder exists while compiling"
            (keep / "k.cudafe1.cpp").write_bytes(b"x" * 1000)
            state["kept"] = keep
            if state["raise"] is not None:
                raise state["raise"]
            if state["code"] == 0:
                result = '{"shared_object": "k.so", "py_limited_api": "0x03090000"}'
                Path(cmd[3]).write_text(result)
            return int(state["code"])

    state["runner"] = Worker()
    return state


@pytest.mark.parametrize("ending", ["succeeds", "fails", "interrupted"])
def test_the_keep_folder_is_removed_when_the_compile_ends(
    tmp_path: Path, worker: dict[str, Any], ending: str
) -> None:
    req = _request(tmp_path / "p")
    if ending == "interrupted":
        worker["raise"] = KeyboardInterrupt()
    if ending == "succeeds":
        worker["code"] = 0
        compiled = pipeline.compile_extension(req, PREPARED, "_kk_0123456789", worker["runner"])
        assert compiled.shared_object == Path("k.so")
    else:
        with pytest.raises(KeyboardInterrupt if ending == "interrupted" else BuildError):
            pipeline.compile_extension(req, PREPARED, "_kk_0123456789", worker["runner"])
    assert worker["kept"] is not None and not worker["kept"].exists()


def test_keep_intermediates_keeps_them(tmp_path: Path, worker: dict[str, Any]) -> None:
    req = _request(tmp_path / "p", keep_intermediates=True)
    with pytest.raises(BuildError):
        pipeline.compile_extension(req, PREPARED, "_kk_0123456789", worker["runner"])
    assert (worker["kept"] / "k.cudafe1.cpp").stat().st_size == 1000
