"""Issue 30, for real: a header that newly shadows another on the include path. After adding
inc1/cfg.h in front of inc2/cfg.h, the rebuild (compiler cache and reuse on, as by default) must
compile the new header in: it once said "unchanged: compile skipped" and kept the old value."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def _project(root: Path) -> Path:
    files = {
        "build.toml": '[general]\nname = "shadow"\nversion = 1\nbackends = ["cpu"]\n\n'
        '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\ninclude = ["inc1", "inc2"]\n\n'
        '[kernel.k]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["csrc/k.cpp"]\n',
        "csrc/k.cpp": "int kw_k() { return 1; }\n",
        "inc2/cfg.h": '#pragma once\n#define KW_CFG_MARKER "kw-cfg-from-inc2"\n',
        # torch/library.h, not torch/all.h: a quarter of the compile, and all the test needs
        "torch-ext/torch_binding.cpp": "#include <torch/library.h>\n"
        '#include "registration.h"\n'
        '#include "cfg.h"\n\n'
        "__attribute__((used)) static const char kw_cfg_marker[] = KW_CFG_MARKER;\n\n"
        "at::Tensor twice(at::Tensor const &x) { return x.mul(2); }\n\n"
        "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
        '  ops.def("twice(Tensor x) -> Tensor");\n'
        '  ops.impl("twice", c10::kCPU, &twice);\n}\n\n'
        "REGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n",
        "torch-ext/shadow/__init__.py": "from ._ops import ops\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "inc1").mkdir()  # searched first, empty for now
    return root


def _markers(out: Path) -> set[str]:
    (wheel,) = out.glob("shadow-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (so,) = [n for n in zf.namelist() if n.endswith(".so")]
        data = zf.read(so)
    return {m for m in ("kw-cfg-from-inc1", "kw-cfg-from-inc2") if m.encode() in data}


def test_a_header_that_newly_shadows_another_is_compiled_in(tmp_path: Path) -> None:
    root = _project(tmp_path / "shadow")
    first, second = tmp_path / "one", tmp_path / "two"
    assert main(["build", str(root), "--variant", VARIANT, "-o", str(first)]) == 0
    assert _markers(first) == {"kw-cfg-from-inc2"}
    (root / "inc1" / "cfg.h").write_text('#pragma once\n#define KW_CFG_MARKER "kw-cfg-from-inc1"\n')
    assert main(["build", str(root), "--variant", VARIANT, "-o", str(second)]) == 0
    log = (second / "logs" / f"{VARIANT}.log").read_text()
    assert "compile skipped" not in log
    assert _markers(second) == {"kw-cfg-from-inc1"}


def test_a_dev_build_without_the_compiler_cache_compiles_a_newly_shadowing_header_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # without the compiler cache no reuse entry kept the headers that would shadow an input:
    # `dev` said "unchanged: ninja had nothing to compile" and kept inc2's value
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", "1")
    root = _project(tmp_path / "shadow")
    args = ["dev", str(root), "--variant", VARIANT, "--no-load-check"]
    assert main(args) == 0
    (root / "inc1" / "cfg.h").write_text('#pragma once\n#define KW_CFG_MARKER "kw-cfg-from-inc1"\n')
    assert main(args) == 0
    out = capsys.readouterr().out
    package = Path(out.split(f"dev build of shadow ({VARIANT}): ")[-1].splitlines()[0])
    (so,) = package.glob("*.so")
    assert b"kw-cfg-from-inc1" in so.read_bytes() and b"kw-cfg-from-inc2" not in so.read_bytes()


@pytest.mark.parametrize("no_ccache", ["", "1"])
def test_a_header_named_as_torchs_that_nothing_includes_recompiles_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_ccache: str,
) -> None:
    # csrc/Exception.h, included by nothing: the next dev compiled every unit that read torch's
    # c10/util/Exception.h, whose include folder the shadowing check did not know
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", no_ccache)
    root = _project(tmp_path / "shadow")
    args = ["dev", str(root), "--variant", VARIANT, "--no-load-check"]
    assert main(args) == 0
    (root / "csrc" / "Exception.h").write_text("#pragma once\n")
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "unchanged" in out and "compiled " not in out, out
