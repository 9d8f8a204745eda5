"""``kernelwheel check`` beyond the ABI (issue 13): a ``.so`` that is not ELF or is a symlink
entry fails; the integrity pip relies on (RECORD present and matching, no duplicate, escaping or
symlink entries) is checked and each problem named; unreadable inputs are errors, not
tracebacks."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

from kernelwheel.abi.checker import check_wheel
from kernelwheel.abi.report import Rule
from kernelwheel.cli import main
from kernelwheel.errors import AbiError, UsageError
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.record import format_record, parse_record, record_hash

TAG = Tag("cp39", "abi3", "manylinux_2_28_x86_64")
NAME = "demo-1.0+torch2.14.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
DIST = "demo-1.0+torch2.14.cpu.cxx11.dist-info"


def _wheel(tmp_path: Path, files: dict[str, bytes] | None = None) -> Path:
    spec = WheelSpec(
        name="demo",
        version="1.0+torch2.14.cpu.cxx11",
        tag=TAG,
        files=files or {"demo/__init__.py": b"x = 1\n"},
    )
    return write_wheel(spec, tmp_path)


def _rewrite(
    wheel: Path,
    *,
    drop: tuple[str, ...] = (),
    replace: dict[str, bytes] | None = None,
    add: tuple[tuple[zipfile.ZipInfo | str, bytes], ...] = (),
) -> Path:
    """Copy ``wheel``'s entries into a new zip, changed as asked, and put it in its place."""
    with zipfile.ZipFile(wheel) as zf:
        entries = [(i, zf.read(i)) for i in zf.infolist()]
    tmp = wheel.with_suffix(".new")
    with zipfile.ZipFile(tmp, "w") as out:
        for info, data in entries:
            if info.filename in drop:
                continue
            out.writestr(info, (replace or {}).get(info.filename, data))
        for extra, data in add:
            out.writestr(extra, data)
    tmp.replace(wheel)
    return wheel


def _symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    info.create_system = 3
    return info


def _record_problems(wheel: Path) -> list[str]:
    report = check_wheel(wheel)
    return [f"{v.subject}: {v.cause}" for v in report.violations if v.rule is Rule.RECORD]


def test_a_clean_wheel_complies(tmp_path: Path) -> None:
    report = check_wheel(_wheel(tmp_path))
    assert report.ok and report.status(Rule.RECORD) is True


def test_a_so_that_is_not_elf_is_a_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/_demo.abi3.so": b"MZ" + bytes(80)})
    report = check_wheel(wheel)
    assert not report.ok
    (v,) = report.violations
    assert v.rule is Rule.ELF and v.file == "demo/_demo.abi3.so" and "not an ELF" in v.cause
    assert main(["check", str(wheel)]) == AbiError.exit_code
    out = capsys.readouterr().out
    assert "no shared objects" not in out and "complies" not in out


def test_a_macos_wheel_says_its_binaries_are_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "no shared objects (nothing to check)" of a wheel holding its Mach-O .so."""
    spec = WheelSpec(
        name="demo",
        version="1.0+torch2.8.metal",
        tag=Tag("cp39", "abi3", "macosx_11_0_arm64"),
        files={"demo/__init__.py": b"", "demo/_demo.abi3.so": b"\xcf\xfa\xed\xfe" + bytes(80)},
    )
    assert main(["check", str(write_wheel(spec, tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "a macosx_11_0_arm64 wheel's binaries are not checked" in out
    assert "no shared objects" not in out


def test_a_symlink_entry_named_so_is_a_violation(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    _rewrite(wheel, add=((_symlink("demo/_demo.abi3.so"), b"/usr/lib/libc.so.6"),))
    report = check_wheel(wheel)
    assert not report.ok
    rules = {(v.rule, v.file) for v in report.violations}
    assert (Rule.ELF, "demo/_demo.abi3.so") in rules


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("content", "demo/__init__.py: does not match its RECORD hash"),
        ("no-record", f"{DIST}/RECORD: missing"),
        ("unlisted", "demo/extra.py: not listed in RECORD"),
        ("listed-missing", "demo/gone.py: listed in RECORD but not in the wheel"),
        ("duplicate", "demo/__init__.py: appears 2 times in the archive"),
        ("dotdot", "../evil.py: escapes the install folder"),
        ("symlink", "demo/link.py: is a symlink entry"),
        ("record-dup", "demo/__init__.py: listed 2 times in RECORD"),
    ],
)
def test_integrity_problems_are_named(tmp_path: Path, change: str, expected: str) -> None:
    wheel = _wheel(tmp_path)
    record = f"{DIST}/RECORD"
    with zipfile.ZipFile(wheel) as zf:
        rows = parse_record(zf.read(record), where="t")
    if change == "content":
        _rewrite(wheel, replace={"demo/__init__.py": b"x = 2\n"})
    elif change == "no-record":
        _rewrite(wheel, drop=(record,))
    elif change == "unlisted":
        _rewrite(wheel, add=(("demo/extra.py", b""),))
    elif change == "listed-missing":
        new = format_record([("demo/gone.py", record_hash(b""), "0"), *rows])
        _rewrite(wheel, replace={record: new})
    elif change == "duplicate":
        with pytest.warns(UserWarning, match="Duplicate name"):
            _rewrite(wheel, add=(("demo/__init__.py", b"x = 1\n"),))
    elif change == "dotdot":
        new = format_record([("../evil.py", record_hash(b""), "0"), *rows])
        _rewrite(wheel, replace={record: new}, add=(("../evil.py", b""),))
    elif change == "symlink":
        new = format_record([("demo/link.py", record_hash(b"/etc/passwd"), "11"), *rows])
        _rewrite(wheel, replace={record: new}, add=((_symlink("demo/link.py"), b"/etc/passwd"),))
    elif change == "record-dup":
        _rewrite(wheel, replace={record: format_record([rows[0], *rows])})
    problems = _record_problems(wheel)
    assert any(p.startswith(expected) for p in problems), problems
    assert main(["check", str(wheel)]) == AbiError.exit_code


def test_record_is_csv_and_a_crafted_name_cannot_spoof_an_entry(tmp_path: Path) -> None:
    """A file named like a RECORD row (comma, quotes, newline-free) stays one field: pip's csv
    reading of our RECORD sees exactly the files there are, with their real hashes."""
    import csv
    import io

    evil = 'demo/a,sha256=AAAA,1\n"demo/b.py'.replace("\n", "")
    files = {"demo/__init__.py": b"", evil: b"payload", 'demo/q"uote.py': b"q"}
    wheel = _wheel(tmp_path, files)
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(f"{DIST}/RECORD").decode()
    rows = list(csv.reader(io.StringIO(text)))  # how pip reads it
    assert all(len(r) == 3 for r in rows)
    by_path = {r[0]: r[1] for r in rows}
    assert by_path[evil] == record_hash(b"payload")
    assert by_path['demo/q"uote.py'] == record_hash(b"q")
    assert "demo/a" not in by_path and '"demo/b.py' not in by_path
    assert check_wheel(wheel).ok  # check reads RECORD the same way
    assert parse_record(text.encode(), where="t") == [tuple(r) for r in rows]


def test_check_of_a_folder_or_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(tmp_path)]) == UsageError.exit_code
    assert main(["check", str(tmp_path / "nope.so")]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "is a folder" in err


def test_a_corrupt_deflate_stream_is_a_wheel_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path, {"demo/__init__.py": b"x = 1\n" * 2000})
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("demo/__init__.py")
    start = info.header_offset + 30 + len(info.filename.encode())
    data[start + 2 : start + 12] = b"\xff" * 10  # scramble the compressed bytes
    wheel.write_bytes(bytes(data))
    code = main(["check", str(wheel)])
    captured = capsys.readouterr()
    assert code == AbiError.exit_code, captured.err
    assert "Traceback" not in captured.err
    assert "demo/__init__.py" in captured.out and "cannot be decompressed" in captured.out


# -- issue 30: check refuses what pip refuses, and reads members streamed ----------------------


def test_a_wheel_without_metadata_or_with_two_dist_info_folders_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip refuses both ('has no METADATA', 'multiple .dist-info directories'); check said
    'complies'. Each wheel keeps a RECORD that matches what it holds, so only the rule fails."""
    record = f"{DIST}/RECORD"
    no_meta = _wheel(tmp_path / "a")
    with zipfile.ZipFile(no_meta) as zf:
        rows = [r for r in parse_record(zf.read(record), where="t") if "METADATA" not in r[0]]
    _rewrite(no_meta, drop=(f"{DIST}/METADATA",), replace={record: format_record(rows)})
    assert f"{DIST}/METADATA: missing" in " ".join(_record_problems(no_meta))

    two = _wheel(tmp_path / "b")
    other = "other-1.0.dist-info/METADATA"
    meta = b"Metadata-Version: 2.1\nName: other\nVersion: 1.0\n"
    with zipfile.ZipFile(two) as zf:
        rows = parse_record(zf.read(record), where="t")
    rows = [(other, record_hash(meta), str(len(meta))), *rows]
    _rewrite(two, replace={record: format_record(rows)}, add=((other, meta),))
    problems = " ".join(_record_problems(two))
    assert "2 .dist-info folders" in problems and "pip refuses it" in problems
    for wheel in (no_meta, two):
        assert main(["check", str(wheel)]) == AbiError.exit_code
    out = capsys.readouterr().out
    assert "complies" not in out


def _bomb(tmp_path: Path, size: int) -> Path:
    """A wheel whose one member is ``size`` zero bytes (deflated ~1000:1), RECORD matching."""
    wheel = _wheel(tmp_path)
    record = f"{DIST}/RECORD"
    digest = hashlib.sha256()
    zero = bytes(1 << 20)
    for _ in range(size >> 20):
        digest.update(zero)
    hashed = "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as zf:
        rows = parse_record(zf.read(record), where="t")
    _rewrite(wheel, replace={record: format_record([("demo/zeros.bin", hashed, str(size)), *rows])})
    with zipfile.ZipFile(wheel, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("demo/zeros.bin", "w", force_zip64=True) as fh:
            for _ in range(size >> 20):
                fh.write(zero)
    return wheel


def test_a_zip_bomb_is_refused_unread_in_little_memory(tmp_path: Path) -> None:
    """A ~1 MiB wheel that unpacks to 1 GiB: check took 2.1 GB of memory reading it whole. The
    ratio cap refuses it before reading; the child's peak memory stays far below the member."""
    wheel = _bomb(tmp_path, 1 << 30)
    assert wheel.stat().st_size < 2 << 20
    code = (
        "import resource, sys\n"
        "from kernelwheel.cli import main\n"
        "rc = main(['check', sys.argv[1]])\n"
        "print(rc, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(wheel)], capture_output=True, text=True, check=False
    )
    rc, peak_kib = proc.stdout.split()[-2:]
    assert int(rc) == AbiError.exit_code, proc.stdout + proc.stderr
    assert "demo/zeros.bin" in proc.stdout and "zip bomb" in proc.stdout
    assert int(peak_kib) < 300 * 1024, f"peak {int(peak_kib) // 1024} MiB"


def test_members_under_the_cap_are_hashed_streamed(tmp_path: Path) -> None:
    """A legitimate large member (under the ratio cap) is hashed in chunks: checking a wheel
    with a 64 MiB incompressible member stays well under 64 MiB above the interpreter."""
    payload = os.urandom(64 << 20)
    wheel = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/blob.bin": payload})
    del payload
    code = (
        "import resource, sys\n"
        "from kernelwheel.abi.checker import check_wheel\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "ok = check_wheel(sys.argv[1]).ok\n"
        "print(ok, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(wheel)], capture_output=True, text=True, check=False
    )
    ok, grown_kib = proc.stdout.split()[-2:]
    assert ok == "True", proc.stdout + proc.stderr
    assert int(grown_kib) < 32 * 1024, f"grew {int(grown_kib) // 1024} MiB"


def test_the_summary_names_the_integrity_rules_a_wheel_breaks_not_the_abi(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A RECORD that lies is no ABI problem: the last line said "1 ABI violation(s)"."""
    wheel = _wheel(tmp_path)
    _rewrite(wheel, add=(("demo/extra.py", b""),))
    capsys.readouterr()
    assert main(["check", str(wheel)]) == AbiError.exit_code
    err = capsys.readouterr().err
    assert "1 violation(s) of the record rule(s) in 1 of 1 file(s)" in err
    assert "ABI violation" not in err
    elf = _wheel(tmp_path / "elf", {"demo/__init__.py": b"", "demo/_d.abi3.so": b"MZ" + bytes(80)})
    assert main(["check", str(elf)]) == AbiError.exit_code
    assert "1 ABI violation(s) in 1 of 1 file(s)" in capsys.readouterr().err  # as before
