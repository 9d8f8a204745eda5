"""Builds of a project holding a 512 MiB data file, in a process whose address space is capped at
256 MiB (issue 38, family 12, the build half; the file is twice the cap, and the process needs
under 64 MiB of it, measured): `kernelwheel build --hub-layout` of a pure-Python
project, and a torch CPU build through the one entry with the scripted host of
tests/builder/test_one_entry.py (a shared object compiled once, no torch, every packaging step
real: wheel, repair's rewrite, check). The file is hashed for the build id, written into the
wheel with its RECORD hash, exported to the Hub layout with its digest, each in 1 MiB chunks,
never read whole. The same cap makes a whole read of that file fail, so the tests catch a return
to reading files whole."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.kinds import write_noarch_project
from support.tinykernel import PACKAGE, write_tiny_kernel

from kernelwheel.plan.options import ENV_VARS

MIB = 1 << 20
LIMIT = 256 * MIB  # the address-space cap of the build process (it needs under 64 MiB here)
SIZE = 2 * LIMIT  # the data file: larger than all the memory the process may have
DATA = "scale_noarch/weights.json"  # a pyext suffix of the project: the wheel carries it


def _capped(limit: int) -> Callable[[], None]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def _digest(stream: Callable[[int], bytes]) -> tuple[bytes, int]:
    digest, size = hashlib.sha256(), 0
    while chunk := stream(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    return digest.digest(), size


def _record_hash(raw: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        preexec_fn=_capped(LIMIT),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def _whole_read_fails(path: Path) -> bool:
    """Whether reading ``path`` whole fails under the cap (so the cap bites)."""
    proc = _run(["-c", f"open({str(path)!r}, 'rb').read()"], dict(os.environ))
    return proc.returncode != 0 and "MemoryError" in proc.stderr


@pytest.fixture
def roomy(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, emptied after the test: the wheels and copies of the file take gigabytes."""
    yield tmp_path
    for child in tmp_path.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink()


@pytest.mark.slow
def test_build_of_a_data_file_twice_the_memory_limit(roomy: Path) -> None:
    tmp_path = roomy
    root = write_noarch_project(tmp_path / "p")
    data = root / "torch-ext" / DATA
    data.write_bytes(b'{"weights": [1, 2, 3]}\n')
    os.truncate(data, SIZE)  # a hole after its own bytes: no disk, no RAM
    with data.open("rb") as fh:
        source_hash, _ = _digest(fh.read)
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env |= {"KERNELWHEEL_CACHE_DIR": str(tmp_path / "cache"), "MALLOC_ARENA_MAX": "2"}

    assert _whole_read_fails(data)  # the cap bites

    out, hub = tmp_path / "out", tmp_path / "hub"
    args = ["-m", "kernelwheel", "build", str(root), "--output-dir", str(out), "--version", "1.0"]
    proc = _run([*args, "--hub-layout", str(hub)], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # The wheel's member is the file, and RECORD names its hash and size.
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        record_name = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        record = zf.read(record_name).decode().split()
        rows = {row.split(",")[0]: row.split(",")[1:] for row in record}
        info = zf.getinfo(DATA)
        with zf.open(info) as member:
            member_hash, size = _digest(member.read)
    assert (member_hash, size) == (source_hash, SIZE)
    assert rows[DATA] == [_record_hash(source_hash), str(SIZE)]

    # The Hub layout holds the file, its digest in every variant's metadata.json.
    for variant in ("torch-cpu", "torch-cuda"):
        folder = hub / "build" / variant
        exported = folder / "weights.json"
        assert exported.stat().st_size == SIZE
        with exported.open("rb") as fh:
            assert _digest(fh.read)[0] == source_hash
        digest = json.loads((folder / "metadata.json").read_text())["digest"]["files"]
        assert digest["weights.json"] == base64.b64encode(source_hash).decode()


# The child: the torch CPU build of test_one_entry (scripted host: the compile worker writes a
# prebuilt shared object, auditwheel is a retag), in a process of its own under the cap.
_ONE_ENTRY = """\
import sys
from pathlib import Path
tests, tmp, root = map(Path, sys.argv[1:4])
sys.path[:0] = [str(tests), str(tests / "builder")]
from test_one_entry import TORCH, _build, _requests
(req,) = _requests(root, tmp, (TORCH,))
print(_build(req, tmp)[0])
"""


@pytest.mark.slow
def test_a_torch_cpu_build_packages_a_data_file_twice_the_memory_limit(roomy: Path) -> None:
    root = write_tiny_kernel(roomy / "tiny")
    toml = root / "build.toml"
    binding = 'src = ["torch-ext/torch_binding.cpp"]\n'
    toml.write_text(toml.read_text().replace(binding, binding + 'pyext = ["py", "bin"]\n'))
    # Incompressible (a 64 KiB random period, longer than deflate's window), so the wheel is
    # stored and no record rule takes it for a zip bomb: SIZE on disk, written in a second.
    data, pattern = root / "torch-ext" / PACKAGE / "weights.bin", os.urandom(1 << 16)
    with data.open("wb") as fh:
        for _ in range(SIZE // len(pattern)):
            fh.write(pattern)
    with data.open("rb") as fh:
        source_hash, _ = _digest(fh.read)
    assert _whole_read_fails(data)

    tests = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS} | {"MALLOC_ARENA_MAX": "2"}
    proc = _run(["-c", _ONE_ENTRY, str(tests), str(roomy), str(root)], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = Path(proc.stdout.strip().splitlines()[-1])
    assert wheel.name.endswith("manylinux_2_28_x86_64.whl")  # repaired, then checked
    member = f"{PACKAGE}/weights.bin"
    with zipfile.ZipFile(wheel) as zf:
        record_name = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = {r.split(",")[0]: r.split(",")[1:] for r in zf.read(record_name).decode().split()}
        assert zf.getinfo(member).compress_type == zipfile.ZIP_STORED
        with zf.open(member) as fh:
            assert _digest(fh.read) == (source_hash, SIZE)
    assert rows[member] == [_record_hash(source_hash), str(SIZE)]
