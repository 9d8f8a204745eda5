#!/usr/bin/env python3
"""Maintainer tool: regenerate src/kernelwheel/data/stable_abi.tsv.

    python scripts/regen_stable_abi.py --abi3info > src/kernelwheel/data/stable_abi.tsv
    python scripts/regen_stable_abi.py path/to/cpython/Misc/stable_abi.toml > ...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kernelwheel.abi.stable_abi import format_tsv, items_from_abi3info, items_from_stable_abi_toml


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate kernelwheel's stable_abi.tsv.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("toml", nargs="?", type=Path, help="CPython's Misc/stable_abi.toml")
    group.add_argument("--abi3info", action="store_true", help="read the abi3info package")
    args = parser.parse_args(argv)
    if args.abi3info:
        items, source = items_from_abi3info()
    else:
        items = items_from_stable_abi_toml(args.toml.read_text(encoding="utf-8"))
        source = f"CPython's Misc/stable_abi.toml ({args.toml.name})"
    sys.stdout.write(format_tsv(items, source=source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
