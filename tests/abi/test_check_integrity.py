"""``kernelwheel check`` beyond the ABI (issue 13): a ``.so`` that is not ELF or is a symlink
entry fails; the integrity pip relies on (RECORD present and matching, no duplicate, escaping or
symlink entries) is checked and each problem named; unreadable inputs are errors, not
tracebacks."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag

from kernelwheel.abi import Rule, check_wheel
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
