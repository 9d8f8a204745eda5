"""What the author sees, for real (g++ through torch's ninja, as `kernelwheel build` runs it): a
compile error is shown under the error with the project's own path, and the fixed kernel
builds with its warning summed up and no warning from kernelwheel's own flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.builds import CPU_VARIANT
from support.tinykernel import write_tiny_kernel

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

BROKEN = """\
#include <ATen/core/Tensor.h>

at::Tensor add_one_cpu(at::Tensor const& x) {
  int unused = 3;
  return x.add(1)
}
"""


def test_a_compile_error_on_screen_then_the_fixed_build_sums_up_its_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = write_tiny_kernel(tmp_path / "tiny-add")
    kernel = project / "csrc" / "add_one.cpp"
    kernel.write_text(BROKEN)
    out = tmp_path / "wheelhouse"
    build = ["build", str(project), "-o", str(out), "--variant", CPU_VARIANT]

    assert main(build) == 6
    err = capsys.readouterr().err
    assert f"error: {CPU_VARIANT}: compiling csrc/add_one.cpp failed (exit 1)" in err
    # gcc's own lines, the path the author's (not the work folder's link), the caret under it
    first = r"^csrc/add_one\.cpp:5:18: error: expected .;. before .}. token\n(.*\n){3}"
    shown = re.search(first, err, re.M)
    assert shown is not None, err
    assert "    5 |   return x.add(1)\n" in shown.group(0)
    assert "csrc/add_one.cpp: In function" in err
    assert "fix: the compiler's first error is above" in err
    assert "Traceback" not in err and "/project/csrc" not in err

    kernel.write_text(BROKEN.replace("x.add(1)", "x.add(1);"))
    assert main(build) == 0
    err = capsys.readouterr().err
    # the unused variable (python's -Wall) is the one warning, summed up for its unit
    assert re.search(
        rf"^warning: {CPU_VARIANT}: csrc/add_one\.cpp: 1 warning \(first: "
        r"csrc/add_one\.cpp:4:7: unused variable .unused. \[-Wunused-variable\]\)$",
        err,
        re.M,
    ), err
    assert err.count("warning: ") == 1, err
    # kernelwheel's Py_LIMITED_API and torch's were two definitions: "redefined" in every unit
    log = (out / "logs" / f"{CPU_VARIANT}.log").read_text()
    assert "unused variable" in log and "redefined" not in log, log
    # the one left is torch's (3.10), and the wheel's tag follows it
    (wheel,) = out.glob("tiny_add-*.whl")
    assert "-cp310-abi3-" in wheel.name
