"""repair_wheel: auditwheel repair to manylinux_2_28, never grafting torch/CUDA, verified by the
checker; wheels that cannot comply stay linux_<arch> (error, or best effort)."""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "abi"))
import abi_testlib as lib  # noqa: E402

from kernelwheel.abi.checker import check_wheel, read_wheel_tags  # noqa: E402
from kernelwheel.abi.policy import load_kernel_libraries  # noqa: E402
from kernelwheel.abi.repair import auditwheel_plat_args, repair_wheel  # noqa: E402
from kernelwheel.abi.report import Rule  # noqa: E402
from kernelwheel.errors import AbiError, UsageError, WheelError  # noqa: E402
from kernelwheel.wheels.writer import retag_wheel  # noqa: E402

pytestmark = pytest.mark.skipif(not lib.have_compiler("gcc"), reason="needs gcc")

LINUX = "pkg-0.1.0+torch2.14.cu130.cxx11-cp310-abi3-linux_x86_64.whl"
STUB_C = "int stub_answer(void) { return 42; }\n"
# An extension that needs a torch library, a CUDA library and one library of our own.
NEEDS = {
    "torch-cuda": ["libc10.so", "libcudart.so.13"],
    "own-dep": ["libkwdep.so"],
    "forbidden": ["libtorch_python.so"],
    "missing": ["libkwmissing.so"],
}
TOO_NEW_C = (
    lib.PYINIT_C
    + "#define _GNU_SOURCE\n#include <unistd.h>\nint kw(void) { return close_range(3, ~0U, 0); }\n"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One extension per NEEDS entry, plus the folder holding the stub libraries it needs."""
    root = tmp_path_factory.mktemp("repair-so")
    libdir = root / "libs"
    libdir.mkdir()
    for names in NEEDS.values():
        for soname in names:
            stub = lib.build_so(
                root, soname, STUB_C, compiler="gcc", flags=[f"-Wl,-soname,{soname}"]
            )
            shutil.copyfile(stub, libdir / soname)
    out = {"libdir": libdir}
    for case, names in NEEDS.items():
        src = lib.PYINIT_C + "int stub_answer(void);\nint kw_call(void) { return stub_answer(); }\n"
        out[case] = lib.build_so(
            root,
            "ext-" + case,
            src,
            compiler="gcc",
            link=[f"-L{libdir}", "-Wl,--no-as-needed", *(f"-l:{n}" for n in names)],
        )
    (libdir / "libkwmissing.so").unlink()  # link-time only: nowhere to be found at repair time
    out["too-new"] = lib.build_so(root, "too-new", TOO_NEW_C, compiler="gcc")
    return out


@pytest.fixture
def find_libs(built: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the stub torch/CUDA/own libraries findable, as they are in a real build env."""
    monkeypatch.setenv("LD_LIBRARY_PATH", str(built["libdir"]))
    return built["libdir"]


def _wheel(tmp_path: Path, so: Path, filename: str = LINUX) -> Path:
    return lib.wheel_with_so(tmp_path / "in", so, filename=filename)


def _members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def test_plat_args() -> None:
    assert auditwheel_plat_args("x86_64", "manylinux_2_28_x86_64", "x86_64") == [
        "--plat",
        "manylinux_2_28_x86_64",
        "--only-plat",
    ]
    # auditwheel offers only the host's policies: an aarch64 wheel on x86_64 needs auto.
    assert auditwheel_plat_args("aarch64", "manylinux_2_28_aarch64", "x86_64") == ["--plat", "auto"]


def test_torch_and_cuda_are_never_grafted(
    built: dict[str, Path], find_libs: Path, tmp_path: Path
) -> None:
    wheel = _wheel(tmp_path, built["torch-cuda"])
    before = wheel.read_bytes()
    # Findable, so plain auditwheel would graft them:
    assert lib.auditwheel_verdict(wheel, ldpaths=str(find_libs)).external_libs == {
        "libc10.so",
        "libcudart.so.13",
    }
    result = repair_wheel(wheel, tmp_path / "out")
    assert result.repaired and result.tag == "manylinux_2_28_x86_64"
    assert result.wheel == tmp_path / "out" / LINUX.replace("linux_x86_64", result.tag)
    assert result.report.ok and result.report.policy == "manylinux_2_28_x86_64"
    assert result.grafted == ()
    assert not any(".libs/" in m for m in _members(result.wheel))
    assert wheel.read_bytes() == before  # the input is untouched
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [result.wheel.name]
    lib.verify_record(result.wheel)
    # The tag is what the checker proves; auditwheel agrees with the repaired wheel.
    assert check_wheel(result.wheel, policy=None).ok
    assert read_wheel_tags(result.wheel.name).platforms == ("manylinux_2_28_x86_64",)
    exclude = load_kernel_libraries().exclude_patterns()
    assert lib.auditwheel_verdict(result.wheel, exclude=exclude).complies


def test_other_libraries_are_grafted(
    built: dict[str, Path], find_libs: Path, tmp_path: Path
) -> None:
    wheel = _wheel(tmp_path, built["own-dep"])
    before = check_wheel(wheel)
    assert {v.rule for v in before.violations} == {Rule.NEEDED_LIBS}
    result = repair_wheel(wheel, tmp_path / "out")
    assert result.repaired and result.report.ok
    (grafted,) = result.grafted
    assert grafted.startswith("pkg.libs/libkwdep-") and grafted.endswith(".so")
    assert grafted in _members(result.wheel)
    lib.verify_record(result.wheel)


def test_too_new_symbols_cannot_be_repaired(built: dict[str, Path], tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, built["too-new"])
    out = tmp_path / "out"
    with pytest.raises(AbiError) as exc:
        repair_wheel(wheel, out)
    message = str(exc.value)
    assert "cannot be repaired to manylinux_2_28_x86_64" in message
    assert "close_range (GLIBC_2.34)" in message
    assert exc.value.hint and "best effort" in exc.value.hint
    assert list(out.iterdir()) == []

    result = repair_wheel(wheel, out, best_effort=True)
    assert not result.repaired
    assert result.tag == "linux_x86_64" and result.wheel == out / LINUX
    assert result.wheel.read_bytes() == wheel.read_bytes()
    assert [(v.subject, v.version) for v in result.report.violations] == [
        ("close_range", "GLIBC_2.34")
    ]


def test_forbidden_library_is_refused(
    built: dict[str, Path], find_libs: Path, tmp_path: Path
) -> None:
    wheel = _wheel(tmp_path, built["forbidden"])
    with pytest.raises(AbiError, match="libtorch_python.so"):
        repair_wheel(wheel, tmp_path / "out")


def test_unfindable_library_keeps_the_wheel(
    built: dict[str, Path], find_libs: Path, tmp_path: Path
) -> None:
    wheel = _wheel(tmp_path, built["missing"])
    with pytest.raises(AbiError, match="auditwheel repair failed") as exc:
        repair_wheel(wheel, tmp_path / "out")
    assert "libkwmissing.so" in str(exc.value)
    result = repair_wheel(wheel, tmp_path / "out", best_effort=True)
    assert result.tag == "linux_x86_64" and "libkwmissing.so" in result.log
    assert [p.name for p in (tmp_path / "out").iterdir()] == [LINUX]


def test_bad_requests(built: dict[str, Path], tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, built["torch-cuda"])
    with pytest.raises(UsageError, match="is for aarch64"):
        repair_wheel(wheel, tmp_path / "out", policy="manylinux_2_28_aarch64")
    pure = lib.make_wheel(tmp_path, "pkg-0.1.0-py3-none-any.whl", {"pkg/__init__.py": b""})
    with pytest.raises(WheelError, match="pure"):
        repair_wheel(pure, tmp_path / "out")


def test_retag_rewrites_name_wheel_file_and_record(tmp_path: Path) -> None:
    wheel = lib.make_wheel(
        tmp_path,
        "pkg-0.1.0-cp39-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
        {"pkg/__init__.py": b"x = 1\n"},
    )
    out = retag_wheel(wheel, "manylinux_2_28_aarch64", tmp_path)
    assert out.name == "pkg-0.1.0-cp39-abi3-manylinux_2_28_aarch64.whl"
    with zipfile.ZipFile(out) as zf:
        text = zf.read("pkg-0.1.0.dist-info/WHEEL").decode()
        assert zf.read("pkg/__init__.py") == b"x = 1\n"
    assert [line for line in text.splitlines() if line.startswith("Tag:")] == [
        "Tag: cp39-abi3-manylinux_2_28_aarch64"
    ]
    lib.verify_record(out)


@pytest.mark.skipif(
    not lib.have_compiler("aarch64-linux-gnu-gcc"),
    reason="needs Debian's gcc-aarch64-linux-gnu cross compiler (apt-get install "
    "gcc-aarch64-linux-gnu)",
)
def test_aarch64_wheel_on_x86_64_host(tmp_path: Path) -> None:
    """auditwheel accepts only --plat auto across architectures; the result still carries
    exactly manylinux_2_28_aarch64, which the checker proves."""
    src = lib.PYINIT_C + "#include <string.h>\nsize_t kw_len(const char *s) { return strlen(s); }\n"
    so = lib.build_so(tmp_path, "arm", src, compiler="aarch64-linux-gnu-gcc")
    name = "pkg-0.1.0+torch2.9.cpu.cxx11-cp39-abi3-linux_aarch64.whl"
    wheel = _wheel(tmp_path, so, filename=name)
    result = repair_wheel(wheel, tmp_path / "out")
    assert result.repaired and result.tag == "manylinux_2_28_aarch64"
    assert result.wheel.name == name.replace("linux_aarch64", "manylinux_2_28_aarch64")
    assert result.report.ok and result.report.arch == "aarch64"
    assert check_wheel(result.wheel, policy=None).ok
    lib.verify_record(result.wheel)


def test_repair_keeps_licences_urls_description_and_kept_metadata(
    built: dict[str, Path], find_libs: Path, tmp_path: Path
) -> None:
    """auditwheel unpacks and re-zips the wheel (here grafting a library too): the licence
    files, the METADATA (2.4: License-Expression, License-File, Project-URL, description) and
    other .dist-info files come out unchanged, listed in a RECORD that verifies."""
    from packaging.tags import Tag
    from support.wheelread import read_wheel

    from kernelwheel.wheels import WheelSpec, write_wheel

    spec = WheelSpec(
        "pkg",
        "0.1.0+torch2.14.cu130.cxx11",
        Tag("cp310", "abi3", "linux_x86_64"),
        {"pkg/__init__.py": b"", "pkg/_x.abi3.so": built["own-dep"].read_bytes()},
        license="MIT",
        license_files={"LICENSE": b"MIT licence\n", "COPYING": b"copying\n"},
        project_urls=(("Upstream", "https://example.org/u.git"),),
        description="# pkg\n\nFrom a card.\n",
        dist_info_files={"hub/metadata.json": b"{}\n"},
        executables=frozenset({"pkg/_x.abi3.so"}),
    )
    raw = write_wheel(spec, tmp_path / "raw", compress=False)
    result = repair_wheel(raw, tmp_path / "out")
    assert result.repaired and result.grafted
    lib.verify_record(result.wheel)
    before, after = read_wheel(raw), read_wheel(result.wheel)  # read_wheel verifies RECORD too
    dist_info = "pkg-0.1.0+torch2.14.cu130.cxx11.dist-info"
    for name in ("licenses/LICENSE", "licenses/COPYING", "hub/metadata.json", "METADATA"):
        assert after.files[f"{dist_info}/{name}"] == before.files[f"{dist_info}/{name}"], name
    assert after.metadata["License-Expression"] == "MIT"
    assert after.metadata.get_all("License-File") == ["COPYING", "LICENSE"]
