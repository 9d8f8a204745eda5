"""Wheel writer: names, metadata, RECORD, reproducibility, atomicity, bad input."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.wheelread import read_wheel

from kernelwheel.errors import WheelError
from kernelwheel.wheels import WheelSpec, wheel_filename, write_wheel
from kernelwheel.wheels.record import record_hash

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
        ({"license_files": {"../LICENSE": b""}}, "licence file '../LICENSE'"),
        ({"license_files": {"/LICENSE": b""}}, "escapes the wheel root"),
        ({"dist_info_files": {"RECORD": b""}}, "generated metadata"),
        ({"dist_info_files": {"licenses/LICENSE": b""}}, "generated metadata"),
        ({"dist_info_files": {"hub/../../x.py": b""}}, "escapes the wheel root"),
        ({"project_urls": (("Up, stream", "https://x"),)}, "invalid Project-URL"),
        ({"project_urls": (("Upstream", "https://x\nName: evil"),)}, "invalid Project-URL"),
        ({"project_urls": (("Upstream", ""),)}, "invalid Project-URL"),
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


DESCRIPTION = "# img2gray\n\nFrom RGB to grey — fast.\n\nFrom here on, a line starting with From.\n"


def test_licence_urls_and_description_reach_metadata_2_4(tmp_path: Path) -> None:
    """License-Expression in its canonical SPDX spelling, a License-File per licence file (kept
    under .dist-info/licenses/ and listed in RECORD), Project-URLs, and the Markdown
    description as the body: packaging's strict core-metadata parser accepts all of it."""
    from packaging.metadata import Metadata

    spec = _spec(
        license="apache-2.0 OR mit",
        license_files={"LICENSE": b"Apache\n", "COPYING.LESSER": b"LGPL\n"},
        project_urls=(("Upstream", "https://github.com/x/y.git"), ("Source", "https://h/z")),
        description=DESCRIPTION,
        dist_info_files={"hub/metadata.json": b"{}\n"},
    )
    path = write_wheel(spec, tmp_path)
    contents = read_wheel(path)  # every file, licences included, matches RECORD
    dist_info = "img2gray-0.1.0+torch2.14.cu130.cxx11.dist-info"
    assert contents.files[f"{dist_info}/licenses/LICENSE"] == b"Apache\n"
    assert contents.files[f"{dist_info}/licenses/COPYING.LESSER"] == b"LGPL\n"
    assert contents.files[f"{dist_info}/hub/metadata.json"] == b"{}\n"
    raw = contents.files[f"{dist_info}/METADATA"]
    meta = Metadata.from_email(raw, validate=True)
    assert meta.metadata_version == "2.4"
    assert str(meta.license_expression) == "Apache-2.0 OR MIT"
    assert meta.license is None
    assert [str(f) for f in meta.license_files or []] == ["COPYING.LESSER", "LICENSE"]
    assert meta.project_urls == {
        "Upstream": "https://github.com/x/y.git",
        "Source": "https://h/z",
    }
    assert meta.description_content_type == "text/markdown"
    assert meta.description == DESCRIPTION  # "From " lines are not mangled
    assert meta.requires_dist is not None and len(meta.requires_dist) == 2


@pytest.mark.parametrize("text", ["other", "Apache 2.0 license"])
def test_a_licence_that_is_no_spdx_expression_stays_free_text(tmp_path: Path, text: str) -> None:
    md = read_wheel(write_wheel(_spec(license=text), tmp_path)).metadata
    assert md["License"] == text
    assert md["License-Expression"] is None


@pytest.mark.parametrize(
    ("text", "closest"),
    [("Apache 2.0", "Apache-2.0"), ("MIT License", "MIT"), ("BSD 3-Clause", "BSD-3-Clause")],
)
def test_a_licence_that_is_no_spdx_expression_is_warned_with_the_closest_ids(
    text: str, closest: str
) -> None:
    """It was written as free text in silence; now warned of (not refused), naming the value
    and the closest SPDX ids packaging lists."""
    from packaging.licenses import canonicalize_license_expression

    from kernelwheel.wheels import license_warning

    warning = license_warning(text)
    assert warning is not None and repr(text) in warning
    assert f"did you mean {closest}" in warning
    assert str(canonicalize_license_expression(closest)) == closest  # an id packaging accepts
    for fine in (None, "", "apache-2.0", "MIT OR Apache-2.0", "LicenseRef-mine", "other"):
        assert license_warning(fine) is None, fine


def test_no_licence_no_description_no_such_fields(tmp_path: Path) -> None:
    md = read_wheel(write_wheel(_spec(), tmp_path)).metadata
    for field in ("License", "License-Expression", "License-File", "Project-URL"):
        assert md[field] is None, field
    assert md["Description-Content-Type"] is None
    assert md.get_payload() == ""


def test_members_given_as_files_give_the_same_wheel(tmp_path: Path) -> None:
    """A member named by its file (streamed in chunks, sampled by seeking, hashed while copied:
    issue 38 family 12) gives the wheel its bytes would: the same archive, byte for byte,
    deflated or stored alike."""
    import hashlib

    noise = b"".join(hashlib.sha256(i.to_bytes(4, "little")).digest() for i in range(1 << 16))
    code = b"\x7fELF" + bytes(range(256)) * 64
    files = {
        "img2gray/__init__.py": b"x = 1\n" * 100,
        "img2gray/fatbin.so": code + noise,  # 2 MiB of noise: more than one 1 MiB chunk
        "img2gray/mostly_code.so": code * 40 + noise[:8192],
        "img2gray/empty.json": b"",
    }
    on_disk: dict[str, bytes | Path] = {}
    for name, data in files.items():
        (path := tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        on_disk[name] = path
    spec = _spec(files=files, executables=frozenset({"img2gray/fatbin.so"}))
    from_bytes = write_wheel(spec, tmp_path / "a")
    from_files = write_wheel(_spec(files=on_disk, executables=spec.executables), tmp_path / "b")
    assert from_bytes.read_bytes() == from_files.read_bytes()
    assert read_wheel(from_files).files["img2gray/fatbin.so"] == code + noise


def test_extract_package_streams_and_checks_record(tmp_path: Path) -> None:
    """The Hub export's reader: the package's members unpacked with their sha256, the dist-info
    left out; a member that does not match its RECORD row is refused, named."""
    import hashlib

    from kernelwheel.wheels.reader import extract_package

    path = write_wheel(_spec(), tmp_path)
    got = extract_package(path, "img2gray/", tmp_path / "out")
    assert got == {
        "__init__.py": hashlib.sha256(b"x = 1\n").digest(),
        "_img2gray_ab.abi3.so": hashlib.sha256(b"\x7fELF...").digest(),
    }
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(got)
    tampered = tmp_path / "t" / path.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, b"x = 2\n" if info.filename == "img2gray/__init__.py" else data)
    with pytest.raises(WheelError, match="__init__.py does not match its RECORD hash"):
        extract_package(tampered, "img2gray/", tmp_path / "out2")
