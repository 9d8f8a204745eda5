"""Wheel writer: names, metadata, RECORD, reproducibility, atomicity, bad input."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

from kernelwheel.errors import WheelError
from kernelwheel.wheels import WheelSpec, read_wheel, record_hash, wheel_filename, write_wheel

TAG = Tag("cp310", "abi3", "linux_x86_64")


def _spec(**kw: object) -> WheelSpec:
    base: dict[str, object] = dict(
        name="img2gray",
        version="0.1.0+torch2.14.cu130.cxx11",
        tag=TAG,
        files={"img2gray/__init__.py": b"x = 1\n", "img2gray/_img2gray_ab.abi3.so": b"\x7fELF..."},
        requires_dist=("torch==2.14.*", "numpy>=1.26"),
        requires_python=">=3.10",
        summary="a kernel",
        executables=frozenset({"img2gray/_img2gray_ab.abi3.so"}),
    )
    base.update(kw)
    return WheelSpec(**base)  # type: ignore[arg-type]


def test_filename_keeps_local_version() -> None:
    assert (
        wheel_filename("img2gray", "0.1.0+torch2.14.cu130.cxx11", TAG)
        == "img2gray-0.1.0+torch2.14.cu130.cxx11-cp310-abi3-linux_x86_64.whl"
    )
    assert wheel_filename("My-Kernel", "1.0", TAG).startswith("my_kernel-1.0-")


def test_metadata_and_record(tmp_path: Path) -> None:
    path = write_wheel(_spec(), tmp_path)
    contents = read_wheel(path)  # verifies every RECORD hash
    md = contents.metadata
    assert md["Name"] == "img2gray"
    assert md["Version"] == "0.1.0+torch2.14.cu130.cxx11"
    assert md.get_all("Requires-Dist") == ["torch==2.14.*", "numpy>=1.26"]
    assert md["Requires-Python"] == ">=3.10"
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert names == sorted(names[:2]) + names[2:]
        assert names[-1].endswith(".dist-info/RECORD")
        wheel_txt = zf.read("img2gray-0.1.0+torch2.14.cu130.cxx11.dist-info/WHEEL").decode()
        assert "Tag: cp310-abi3-linux_x86_64" in wheel_txt
        assert "Root-Is-Purelib: false" in wheel_txt
        so = zf.getinfo("img2gray/_img2gray_ab.abi3.so")
        assert (so.external_attr >> 16) & 0o777 == 0o755
        record = zf.read(names[-1]).decode()
        assert f"img2gray/__init__.py,{record_hash(b'x = 1' + bytes([10]))},6" in record


def test_byte_identical_and_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = write_wheel(_spec(), tmp_path / "a").read_bytes()
    b = write_wheel(_spec(), tmp_path / "b").read_bytes()
    assert a == b
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    c = write_wheel(_spec(), tmp_path / "c")
    assert c.read_bytes() != a
    with zipfile.ZipFile(c) as zf:
        assert zf.infolist()[0].date_time[:3] == (2023, 11, 14)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"name": "bad name"}, "invalid distribution name"),
        ({"version": "1.0+torch 2"}, "invalid version"),
        ({"requires_dist": ("torch==",)}, "invalid requirement"),
        ({"files": {"../evil.py": b""}}, "escapes the wheel root"),
        ({"files": {"img2gray-0.1.0.dist-info/METADATA": b""}}, "generated metadata"),
    ],
)
def test_bad_input_is_refused_and_nothing_written(
    tmp_path: Path, kw: dict[str, object], match: str
) -> None:
    with pytest.raises(WheelError, match=match):
        write_wheel(_spec(**kw), tmp_path)
    assert not list(tmp_path.iterdir())


def test_read_wheel_detects_tampering(tmp_path: Path) -> None:
    path = write_wheel(_spec(), tmp_path)
    tampered = tmp_path / "t" / path.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "img2gray/__init__.py":
                data = b"x = 2\n"
            dst.writestr(info, data)
    with pytest.raises(WheelError, match="does not match its RECORD hash"):
        read_wheel(tampered)


def test_known_digests_give_the_same_wheel(tmp_path: Path) -> None:
    """RECORD takes a digest the caller already computed instead of hashing again: same bytes."""
    import hashlib

    files = {"img2gray/__init__.py": b"x = 1\n", "img2gray/_img2gray_ab.abi3.so": b"\x7fELF..."}
    known = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    plain = write_wheel(_spec(), tmp_path / "a").read_bytes()
    reused = write_wheel(_spec(sha256=known), tmp_path / "b").read_bytes()
    assert plain == reused


def test_incompressible_members_are_stored(tmp_path: Path) -> None:
    """Deflate pays for text and code, not for compressed fatbins: those are stored, wherever
    in an object the incompressible bytes sit; the choice depends on the bytes alone."""
    import hashlib

    noise = b"".join(hashlib.sha256(i.to_bytes(4, "little")).digest() for i in range(1 << 15))
    code = b"\x7fELF" + bytes(range(256)) * 64
    files = {
        "img2gray/__init__.py": b"x = 1\n" * 100,
        "img2gray/fatbin.so": code + noise,  # ~1 MiB noise after 16 KiB of code
        "img2gray/mostly_code.so": code * 40 + noise[:8192],
        "img2gray/small_noise.bin": noise[:5000],
    }
    path = write_wheel(_spec(files=files, executables=frozenset()), tmp_path)
    with zipfile.ZipFile(path) as zf:
        kinds = {i.filename: i.compress_type for i in zf.infolist()}
    assert kinds["img2gray/__init__.py"] == zipfile.ZIP_DEFLATED
    assert kinds["img2gray/fatbin.so"] == zipfile.ZIP_STORED
    assert kinds["img2gray/mostly_code.so"] == zipfile.ZIP_DEFLATED
    assert kinds["img2gray/small_noise.bin"] == zipfile.ZIP_STORED
    assert read_wheel(path).files["img2gray/fatbin.so"] == code + noise


def test_uncompressed_wheel_for_repair_holds_the_same_files(tmp_path: Path) -> None:
    """compress=False (the raw wheel auditwheel re-zips): every member stored, same contents and
    RECORD as the deflated wheel, so only the container differs."""
    files = {"img2gray/__init__.py": b"x = 1\n" * 100, "img2gray/code.so": bytes(range(256)) * 64}
    spec = _spec(files=files, executables=frozenset())
    deflated = write_wheel(spec, tmp_path / "a")
    stored = write_wheel(spec, tmp_path / "b", compress=False)
    with zipfile.ZipFile(deflated) as za, zipfile.ZipFile(stored) as zb:
        assert {i.compress_type for i in zb.infolist()} == {zipfile.ZIP_STORED}
        assert zipfile.ZIP_DEFLATED in {i.compress_type for i in za.infolist()}
        assert za.namelist() == zb.namelist()
        for name in za.namelist():
            assert za.read(name) == zb.read(name), name
    assert stored.stat().st_size > deflated.stat().st_size
