"""A C++ compiler that links libstdc++ statically (no libstdc++.so, like the GPU machine's
/opt/gcc) is detected before anything is compiled (issue 13 item 13): the build stops with a
ToolchainError a CLI user can act on (which compiler, how to pick it), not at repair with glibc
symbols and a Python function to call."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT, IMG2GRAY

from kernelwheel.builder.steps import check_cxx_toolchain
from kernelwheel.cli import main
from kernelwheel.errors import ToolchainError


def static_compiler(tmp_path: Path) -> Path:
    """A fake g++ that, like a toolchain shipping only libstdc++.a, echoes the bare name."""
    cxx = tmp_path / "opt-gcc" / "bin" / "g++"
    cxx.parent.mkdir(parents=True)
    cxx.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -print-file-name=*) echo "${a#*=}"; exit 0;; esac; done\n'
        "exit 1\n"
    )
    cxx.chmod(0o755)
    return cxx


def test_a_static_libstdcxx_compiler_is_refused_with_a_cli_fix(tmp_path: Path) -> None:
    cxx = static_compiler(tmp_path)
    with pytest.raises(ToolchainError) as info:
        check_cxx_toolchain(str(cxx), {"PATH": os.environ["PATH"]})
    message = str(info.value)
    assert str(cxx) in message and "statically" in message
    fix = message.split("fix:", 1)[1]
    assert "env -u CXX -u CC kernelwheel build" in fix
    if shutil.which("g++"):
        assert "CXX=" in fix and "g++" in fix
    assert "()" not in message  # no Python function to call


def test_the_system_compiler_passes() -> None:
    if not shutil.which("c++"):
        pytest.skip("no system C++ compiler")
    check_cxx_toolchain("c++", {"PATH": os.environ["PATH"]})


def test_cli_build_stops_before_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CXX", str(static_compiler(tmp_path)))
    out = tmp_path / "out"
    code = main(["build", str(IMG2GRAY), "--only", CPU_VARIANT, "-o", str(out), "--no-repair"])
    err = capsys.readouterr().err
    assert code == ToolchainError.exit_code, err
    assert "Traceback" not in err and "links libstdc++ statically" in err
    assert not list(out.glob("*.whl"))


def test_abi_fix_names_no_python_function() -> None:
    from kernelwheel.abi.checker import _explain_version
    from kernelwheel.abi.policy import load_kernel_libraries, load_policy

    policy = load_policy("manylinux_2_28", "x86_64")
    _, fix = _explain_version(
        "__libc_single_threaded", "libc.so.6", "GLIBC_2.32", policy, load_kernel_libraries()
    )
    assert "()" not in fix and "kernelwheel build" in fix
