"""``kernelwheel index WHEELHOUSE --output DIR``: a static PEP 503 index per backend flavour."""

from __future__ import annotations

import argparse
from pathlib import Path

from packaging.utils import InvalidWheelFilename

from ..errors import KernelwheelError
from ..model.variant import variant_of_wheel
from ..wheels.index import ALL, IndexResult, build_index
from ._args import add_json_argument, path_arg
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "index",
        help="write static PEP 503 indexes of a wheelhouse: per flavour and per torch+flavour",
        description=(
            "Write a static PEP 503 ('simple') package index of the wheels in WHEELHOUSE: one "
            "index per backend flavour (cu130/, cu128/, cpu/, rocm63/, …, like PyTorch's "
            "per-CUDA index URLs) plus all/, and one per torch series and flavour "
            "(torch2.14/cu130/, …) holding only the builds for that torch and flavour, so plain "
            "'pip install --index-url DIR/torch2.14/cu130/ PKG' gets the right build. "
            "Serve DIR with any static web server (or use it as file://). Links carry #sha256= "
            "hashes and PEP 658 metadata. DIR may hold files of yours (CNAME...): the index "
            "replaces only what it wrote there (listed in DIR/.kernelwheel-index.json), each "
            "entry by rename, and refuses a WHEELHOUSE inside DIR. Every wheel must pass the "
            "record rule (RECORD matches, no '../', absolute or duplicate members, no zip bomb)."
        ),
        epilog=(
            "example:\n"
            "  kernelwheel index wheelhouse --output site/simple\n"
            "  python -m http.server -d site/simple 8000\n"
            "  pip install --index-url http://127.0.0.1:8000/torch2.14/cu130/ img2gray\n"
            "  kernelwheel install img2gray --index-url http://127.0.0.1:8000/all/\n"
            "  kernelwheel index wheelhouse -o site/simple --wheel-variants\n"
            "  uv pip install --preview-features wheel-variants \\\n"
            "      --index-url http://127.0.0.1:8000/torch2.14/variants/ img2gray"
        ),
    )
    p.add_argument("wheelhouse", type=path_arg, metavar="WHEELHOUSE", help="folder holding *.whl")
    p.add_argument(
        "--output", "-o", type=path_arg, required=True, metavar="DIR", help="where the index goes"
    )
    p.add_argument(
        "--wheel-variants",
        action="store_true",
        help="also write torch<X.Y>/variants/: the CUDA builds of each torch series as PEP 825 "
        "wheel variants (label = flavour, e.g. cu126; NVIDIA provider properties), which "
        "'uv pip install --preview-features wheel-variants' chooses by the machine's driver and "
        "GPU; installers without variant support see no wheel there",
    )
    add_json_argument(p, "the index folder and each wheel's path, variant, sha256 and flavours")


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    result = build_index(args.wheelhouse, args.output, wheel_variants=args.wheel_variants)
    if args.json:
        ui.print_json(to_json(result, args.wheelhouse))
        return 0
    ui.print(f"indexed {len(result.flavours.get(ALL, ()))} wheel(s) into {result.output}")
    for flavour, wheels in result.flavours.items():
        ui.print(f"  {flavour}/: {len(wheels)} wheel(s)")
    for wheel, why in result.unflavoured:
        ui.warn(f"{wheel} is only in {ALL}/: {why}")
    return 0


def to_json(result: IndexResult, wheelhouse: Path) -> dict[str, object]:
    only_all = dict(result.unflavoured)
    wheels = [
        {
            "variant": variant_of(name),
            "status": "indexed",
            "path": str(wheelhouse / name),
            "sha256": result.sha256[name],  # what the pages list (not the file read again)
            "log": None,  # indexing runs no tool: nothing to log
            "flavours": sorted(f for f, ws in result.flavours.items() if name in ws),
            "note": only_all.get(name),
        }
        for name in result.flavours.get(ALL, ())
    ]
    return {
        "command": "index",
        "ok": True,
        "output": str(result.output),
        "flavours": {f: len(ws) for f, ws in result.flavours.items()},
        "wheels": wheels,
    }


def variant_of(filename: str) -> str | None:
    """The Hub variant name of a kernel wheel (model.variant.variant_of_wheel), or None."""
    try:
        variant = variant_of_wheel(filename)
    except (InvalidWheelFilename, KernelwheelError):
        return None
    return variant.name if variant is not None else None
