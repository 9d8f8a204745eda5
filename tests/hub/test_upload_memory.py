"""`kernelwheel upload --dry-run` of a layout holding a 512 MiB extension, in a process whose
address space is capped at 256 MiB (issue 38, family 12; the file is twice the cap, and the
process needs under 64 MiB of it, measured): the layout is checked and every file
hashed in chunks, never read whole. The same cap makes a whole read of that file fail, so the
test would catch a return to reading files whole."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.gitrepo import namespace_for, variant_files
from support.hubserver import HubState, serve_as_hub
from support.sofiles import build_extension

from kernelwheel.hub.metadata import Digest

REPO = "acme/big"
CPU = "torch214-cxx11-cpu-x86_64-linux"
MIB = 1 << 20
LIMIT = 256 * MIB  # the address-space cap of the upload process (it needs under 64 MiB here)
SIZE = 2 * LIMIT  # the extension: larger than all the memory the process may have


def _capped(limit: int) -> Callable[[], None]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def _sha256_b64(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return base64.b64encode(digest.digest()).decode()


def _big_layout(root: Path, so_cache: Path) -> Path:
    """A CPU variant whose extension is a real ELF object grown (sparse) to SIZE, with a
    digest of every file."""
    ns = namespace_for("big", CPU)
    meta: dict[str, object] = {
        "name": "big",
        "version": 1,
        "python-depends": [],
        "backend": {"type": "cpu"},
    }
    files = variant_files(
        CPU,
        layout="flat",
        package="big",
        so_cache=so_cache,
        metadata=meta,
        binary=(ns, build_extension(so_cache, ns)),
    ).files
    variant = root / "build" / CPU
    for inner, data in files.items():
        (variant / inner).parent.mkdir(parents=True, exist_ok=True)
        (variant / inner).write_bytes(data)
    so = variant / f"{ns}.abi3.so"
    os.truncate(so, SIZE)  # a hole after the object's own bytes: no disk, no RAM
    hashes = dict(Digest.of({k: v for k, v in files.items() if k != f"{ns}.abi3.so"}).files)
    hashes[so.name] = _sha256_b64(so)
    meta["digest"] = Digest("sha256", tuple(sorted(hashes.items()))).to_dict()
    (variant / "metadata.json").write_text(json.dumps(meta))
    return root


@pytest.mark.slow
def test_upload_dry_run_of_a_file_twice_the_memory_limit(
    tmp_path: Path, so_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = _big_layout(tmp_path / "layout", so_cache)
    so = next((layout / "build" / CPU).glob("*.so"))
    assert so.stat().st_size == SIZE
    env_extra = {"KERNELWHEEL_CACHE_DIR": str(tmp_path / "cache"), "MALLOC_ARENA_MAX": "2"}

    # The cap bites: reading the file whole is refused under it.
    whole = subprocess.run(
        [sys.executable, "-c", f"open({str(so)!r}, 'rb').read()"],
        preexec_fn=_capped(LIMIT),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert whole.returncode != 0 and "MemoryError" in whole.stderr

    state = HubState(write_token="hf_w", root=tmp_path / "hub-repos")
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        env = {**os.environ, **env_extra}
        proc = subprocess.run(
            [sys.executable, "-m", "kernelwheel", "upload", str(layout), "--repo", REPO]
            + ["--dry-run", "--json"],
            preexec_fn=_capped(LIMIT),
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads(proc.stdout)
    sizes = {f["path"]: (f["size"], f["change"]) for f in plan["files"]}
    assert sizes[so.relative_to(layout).as_posix()] == (SIZE, "add")
    assert plan["dry_run"] and plan["create_repo"] and state.commits == []
