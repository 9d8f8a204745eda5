"""Read files inside wheels on PyPI without downloading them: the facts recipes/ pins come from.

    python3 scripts/pypi_wheel_facts.py torch 2.15.0 --wheel 'cp312-cp312-manylinux_2_28_*'
    python3 scripts/pypi_wheel_facts.py torch 2.15.0 --wheel '*x86_64*' --file torch/version.py
    python3 scripts/pypi_wheel_facts.py nvidia-cuda-nvcc 13.2.78 --hashes

PyPI here serves no PEP 658 ``.metadata`` files, and a torch wheel is ~540 MB, so this reads
the zip's central directory and the wanted members with HTTP range requests (a few hundred KB
per wheel). It prints each matching wheel's sha256 (from the index) and its METADATA's
Requires-Python and Requires-Dist lines, or ``--file`` members (``*`` globs allowed), or with
``--hashes`` only ``filename sha256`` per wheel (what ``sha256.<arch>`` in recipes/cuda.toml
holds). Standard library only; pip's config is not read.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import sys
import urllib.request
import zipfile
from email.parser import Parser
from typing import Any

SIMPLE = "https://pypi.org/simple/{name}/"


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over an HTTP URL that honours ``Range``."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            if resp.status != 206:
                raise OSError(f"{self.url}: no range support (HTTP {resp.status})")
            data: bytes = resp.read()
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def wheel_files(name: str, version: str) -> list[dict[str, Any]]:
    req = urllib.request.Request(
        SIMPLE.format(name=name), headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        files = json.load(resp)["files"]
    return [
        f
        for f in files
        if f["filename"].endswith(".whl") and f["filename"].split("-")[1] == version
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name")
    p.add_argument("version")
    p.add_argument("--wheel", default="*", help="glob on the wheel file name")
    p.add_argument("--file", action="append", default=[], help="member to print (glob)")
    p.add_argument("--hashes", action="store_true", help="only 'filename sha256' per wheel")
    args = p.parse_args(argv)
    files = [
        f
        for f in wheel_files(args.name, args.version)
        if fnmatch.fnmatch(f["filename"], args.wheel)
    ]
    if not files:
        print(f"no wheel of {args.name} {args.version} matches {args.wheel!r}", file=sys.stderr)
        return 1
    for f in files:
        if args.hashes:
            print(f["filename"], f["hashes"]["sha256"])
            continue
        print(f"== {f['filename']}  sha256={f['hashes']['sha256']}  size={f['size']}")
        with zipfile.ZipFile(io.BufferedReader(RangeFile(f["url"], f["size"]), 1 << 16)) as zf:
            names = zf.namelist()
            if not args.file:
                meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
                msg = Parser().parsestr(zf.read(meta).decode("utf-8"))
                print(f"Requires-Python: {msg.get('Requires-Python')}")
                for line in msg.get_all("Requires-Dist") or []:
                    print(f"Requires-Dist: {line}")
            for pattern in args.file:
                for member in fnmatch.filter(names, pattern):
                    print(f"-- {member}")
                    print(zf.read(member).decode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
