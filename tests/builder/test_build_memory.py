"""`kernelwheel build --hub-layout` of a pure-Python project holding a 2 GiB data file, in a
process whose address space is capped at 1 GiB (issue 38, family 12, the build half): the file
is hashed for the build id, written into the wheel with its RECORD hash, exported to the Hub
layout with its digest, each in 1 MiB chunks, never read whole. The same cap makes a whole read
of that file fail, so the test catches a return to reading files whole."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import resource
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from support.kinds import write_noarch_project

from kernelwheel.plan.options import ENV_VARS

GIB = 1 << 30
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
        [sys.executable, "-m", "kernelwheel", *args],
        preexec_fn=_capped(GIB),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_build_of_a_2_gib_data_file_under_a_1_gib_limit(tmp_path: Path) -> None:
    root = write_noarch_project(tmp_path / "p")
    data = root / "torch-ext" / DATA
    data.write_bytes(b'{"weights": [1, 2, 3]}\n')
    os.truncate(data, 2 * GIB)  # a hole after its own bytes: no disk, no RAM
    with data.open("rb") as fh:
        source_hash, _ = _digest(fh.read)
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env |= {"KERNELWHEEL_CACHE_DIR": str(tmp_path / "cache"), "MALLOC_ARENA_MAX": "2"}

    # The cap bites: reading the file whole is refused under it.
    whole = subprocess.run(
        [sys.executable, "-c", f"open({str(data)!r}, 'rb').read()"],
        preexec_fn=_capped(GIB),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert whole.returncode != 0 and "MemoryError" in whole.stderr

    out, hub = tmp_path / "out", tmp_path / "hub"
    args = ["build", str(root), "--output-dir", str(out), "--version", "1.0.0"]
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
    assert (member_hash, size) == (source_hash, 2 * GIB)
    assert rows[DATA] == [_record_hash(source_hash), str(2 * GIB)]

    # The Hub layout holds the file, its digest in every variant's metadata.json.
    for variant in ("torch-cpu", "torch-cuda"):
        folder = hub / "build" / variant
        exported = folder / "weights.json"
        assert exported.stat().st_size == 2 * GIB
        with exported.open("rb") as fh:
            assert _digest(fh.read)[0] == source_hash
        digest = json.loads((folder / "metadata.json").read_text())["digest"]["files"]
        assert digest["weights.json"] == base64.b64encode(source_hash).decode()
