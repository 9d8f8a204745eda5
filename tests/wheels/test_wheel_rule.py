"""Issue 38, family 1: a kernel wheel may carry only itself. The wheel rule
(:func:`~kernelwheel.wheels.reader.wheel_rule_problems`) refuses a member of another
distribution's package, a ``.pth``, ``sitecustomize``/``usercustomize``, ``.data/scripts``,
METADATA whose Name or Version is not the file name's, and a torch requirement the local label
contradicts; ``check``, ``install``, ``index`` and ``to-wheel`` run it. Every hostile wheel is a
sound one (RECORD true) made here, so only the rule under test can refuse it."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.installkit import isolate, kernel_wheel, torch_wheel, venv_with_torch
from support.tamper import rewrite

from kernelwheel.abi.checker import check_wheel
from kernelwheel.abi.report import Rule
from kernelwheel.cli import main
from kernelwheel.errors import AbiError, WheelError
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.index import build_index
from kernelwheel.wheels.reader import (
    WHEEL_RULE,
    integrity_problems,
    verify_contents,
    verify_wheel,
    wheel_rule_problems,
)

CU130 = "torch2.14.cu130.cxx11"
DIST_INFO = f"img2gray-0.1.0+{CU130}.dist-info"
METADATA = f"{DIST_INFO}/METADATA"


def _problems(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        assert integrity_problems(zf) == []  # the record rule holds: only the wheel rule judges
        found = wheel_rule_problems(wheel.name, zf)
    assert all(p.rule == WHEEL_RULE and p.fix for p in found)
    return [f"{p.subject}: {p.cause}" for p in found]


def _metadata(wheel: Path, old: str, new: str) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(METADATA).decode()
    assert old in text
    return rewrite(wheel, restamp={METADATA: text.replace(old, new).encode()})


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    """A kernel build as kernelwheel writes it: +torch2.14.cu130.cxx11, torch==2.14.*."""
    return kernel_wheel(tmp_path, CU130)


@pytest.mark.parametrize(
    ("member", "cause"),
    [
        ("torch/__init__.py", "a top-level package 'torch' that is not img2gray's own"),
        ("evil.pth", "a .pth file: site runs its import lines"),
        ("img2gray/deep/evil.pth", "a .pth file"),
        ("sitecustomize.py", "a sitecustomize module: site imports it at every interpreter start"),
        ("usercustomize/__init__.py", "a usercustomize module"),
        (f"img2gray-0.1.0+{CU130}.data/scripts/x", "installs outside site-packages (.data/scripts"),
        (f"img2gray-0.1.0+{CU130}.data/headers/x.h", "(.data/headers"),
        (f"img2gray-0.1.0+{CU130}.data/purelib/torch/x.py", "'torch' that is not img2gray's"),
        ("numpy.libs/libevil.so", "'numpy' that is not img2gray's own"),
        ("README", "a top-level file 'README'"),
        ("torch-2.14.1.data/purelib/x.py", "a .data folder of another distribution"),
    ],
)
def test_a_member_that_is_not_the_wheels_own_is_refused(
    wheel: Path, member: str, cause: str
) -> None:
    rewrite(wheel, add=((member, b"import os\n"),))
    found = _problems(wheel)
    assert any(f.startswith(f"{member}: ") and cause in f for f in found), found
    with pytest.raises(WheelError, match="fails the wheel rule") as caught:
        verify_wheel(wheel)  # what install and index run
    assert wheel.name in caught.value.message and member in caught.value.message
    assert caught.value.hint and "rebuild" in caught.value.hint


@pytest.mark.parametrize(
    ("old", "new", "cause"),
    [
        ("Name: img2gray", "Name: torch", "METADATA Name: is 'torch', the file name says img2gray"),
        (f"Version: 0.1.0+{CU130}", f"Version: 0.2.0+{CU130}", "METADATA Version: is '0.2.0+"),
        (
            f"Version: 0.1.0+{CU130}",
            "Version: 0.1.0+torch2.14.cpu.cxx11",
            "the file name says 0.1.0+torch2.14.cu130.cxx11",
        ),
        (
            "Requires-Dist: torch==2.14.*",
            "Requires-Dist: torch==2.13.*",
            "torch==2.13.* does not pin the torch 2.14 the label +torch2.14.cu130.cxx11 was built",
        ),
        ("Requires-Dist: torch==2.14.*", "Requires-Dist: torch>=2.0", "does not pin the torch"),
        (
            "Requires-Dist: torch==2.14.*",
            'Requires-Dist: torch==2.13.*; python_version >= "3"',
            "does not pin the torch 2.14",
        ),
        ("Requires-Dist: torch==2.14.*", "Requires-Dist: torch>=2.14", "admits torch 2.15"),
        (
            "Requires-Dist: torch==2.14.*",
            "Requires-Dist: torch==2.14.1+cpu",
            "asks for torch's cpu build, the label +torch2.14.cu130.cxx11 is a cu130 build",
        ),
    ],
)
def test_metadata_that_is_not_the_file_names_is_refused(
    wheel: Path, old: str, new: str, cause: str
) -> None:
    _metadata(wheel, old, new)
    found = _problems(wheel)
    assert any(cause in f for f in found), found


def test_a_top_level_txt_cannot_make_torch_the_wheels_own(wheel: Path) -> None:
    rewrite(wheel, add=((f"{DIST_INFO}/top_level.txt", b"img2gray\ntorch\n"), ("torch/x.py", b"")))
    found = _problems(wheel)
    assert any("top_level.txt: declares the top-level package 'torch'" in f for f in found)
    assert any(f.startswith("torch/x.py: ") for f in found)


def test_the_wheels_kernelwheel_writes_pass(tmp_path: Path) -> None:
    """Builds (per-torch, stable-ABI, tvm-ffi, noarch), to-wheel --name (a package other than
    the distribution's name: top_level.txt says so), a repaired wheel's ``<name>.libs/``."""
    cu = kernel_wheel(tmp_path, CU130)
    noarch = kernel_wheel(tmp_path, "cuda", name="layer-norm")
    plain = kernel_wheel(tmp_path, None, name="relu")
    stable = write_wheel(
        WheelSpec(
            "img2gray",
            "0.1.0+torch2.10.stable.cu130",
            Tag("cp39", "abi3", "manylinux_2_28_x86_64"),
            {"img2gray/__init__.py": b"", "img2gray.libs/LICENSE.txt": b""},
            requires_dist=("torch>=2.10",),
        ),
        tmp_path,
    )
    tvm = write_wheel(
        WheelSpec(
            "add-one",
            "0.1.0+tvmffi0.1.cu130",
            Tag("py3", "none", "linux_x86_64"),
            {"add_one/__init__.py": b""},
            requires_dist=("apache-tvm-ffi>=0.1,<0.2",),
        ),
        tmp_path,
    )
    renamed = write_wheel(
        WheelSpec(
            "relu-kernel",
            "1.0+universal",
            Tag("py3", "none", "any"),
            {"relu/__init__.py": b""},
            requires_dist=("torch",),
        ),
        tmp_path,
    )
    with zipfile.ZipFile(renamed) as zf:
        assert zf.read("relu_kernel-1.0+universal.dist-info/top_level.txt") == b"relu\n"
    with zipfile.ZipFile(cu) as zf:  # the usual wheel is unchanged: no top_level.txt
        assert not [n for n in zf.namelist() if n.endswith("top_level.txt")]
    for good in (cu, noarch, plain, stable, tvm, renamed):
        assert _problems(good) == []
        verify_wheel(good)
        verify_contents(good)
        report = check_wheel(good)
        assert report.ok and report.status(Rule.WHEEL) is True, report.summary()


def test_check_reports_it_as_a_violation(wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rewrite(wheel, add=(("torch/__init__.py", b"raise SystemExit\n"),))
    report = check_wheel(wheel)
    assert not report.ok and report.status(Rule.WHEEL) is False
    assert report.status(Rule.RECORD) is True
    assert main(["check", str(wheel)]) == AbiError.exit_code
    out = capsys.readouterr().out
    assert "wheel  torch/__init__.py: a top-level package 'torch'" in out and "fix:" in out


def test_index_refuses_to_publish_it(wheel: Path, tmp_path: Path) -> None:
    rewrite(wheel, add=(("sitecustomize.py", b"import os\n"),))
    site = tmp_path / "site"
    assert main(["index", str(wheel.parent), "-o", str(site)]) == WheelError.exit_code
    assert not site.exists() or not any(site.rglob("*.whl"))
    with pytest.raises(WheelError, match="sitecustomize.py: a sitecustomize module"):
        build_index(wheel.parent, site)


def test_to_wheel_refuses_what_it_would_write(tmp_path: Path) -> None:
    """to-wheel checks what it wrote (a Hub layout reaching here with a package the wheel does
    not own would be refused, not kept)."""
    spec = WheelSpec(
        "img2gray",
        f"0.1.0+{CU130}",
        Tag("cp39", "abi3", "manylinux_2_28_x86_64"),
        {"img2gray/__init__.py": b"", "torch/__init__.py": b""},
        requires_dist=("torch==2.14.*",),
    )
    written = write_wheel(spec, tmp_path)  # the writer writes what it is given
    with pytest.raises(WheelError, match="torch/__init__.py: a top-level package 'torch'"):
        verify_contents(written)


@pytest.mark.slow
def test_install_refuses_it_before_pip_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``install`` replaced torch's own ``torch/__init__.py`` with the wheel's."""
    isolate(monkeypatch)
    house = tmp_path / "wh"
    house.mkdir()
    wheel = kernel_wheel(house, "torch2.14.cpu.cxx11")
    rewrite(wheel, add=(("torch/__init__.py", b"raise SystemExit('replaced')\n"),))
    venv = venv_with_torch(tmp_path / "venv", torch_wheel(tmp_path, "2.14.1+cpu", None))
    args = ["install", "--python", str(venv.python), "img2gray", "-f", str(house), "--no-index"]
    assert main([*args, "--dry-run"]) == WheelError.exit_code
    assert main(args) == WheelError.exit_code
    err = capsys.readouterr().err
    assert "torch/__init__.py: a top-level package 'torch' that is not img2gray's own" in err
    assert "replaced" not in venv.run("-c", "import torch; print(torch.__version__)").stdout
