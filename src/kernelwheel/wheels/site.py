"""An output folder shared with its owner: ``kernelwheel index`` owns only the top-level entries
its manifest lists, each replaced by rename, so a reader never sees a half-written one and an
interrupted run leaves nothing unowned (docs/hardening.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from .._util import atomic_write, output_dir, staging_dir
from ..errors import UsageError

MANIFEST = ".kernelwheel-index.json"
LEGACY_MARKER = ".kernelwheel-index"  # written by kernelwheel before the manifest existed
_FORMAT = 1


def refuse_input_inside(source: Path, output: Path, *, what: str) -> None:
    """An input folder inside (or equal to) the output would be replaced by the output."""
    src, out = source.resolve(), output.resolve()
    if src == out or src.is_relative_to(out):
        raise UsageError(
            f"the {what} {source} is inside --output {output}",
            hint=f"move the {what} out of {output}, or choose another --output folder",
        )


def owned_entries(output: Path) -> frozenset[str]:
    """The top-level entries of ``output`` that an earlier run wrote (its manifest)."""
    manifest = output / MANIFEST
    if not manifest.exists():
        if (output / LEGACY_MARKER).exists():
            raise UsageError(
                f"{output} holds an index written by an older kernelwheel, which kept no list "
                "of the files it wrote",
                hint="save any file of your own from it, remove the folder, and run again (or "
                "choose a new --output)",
            )
        return frozenset()
    try:
        data = json.loads(manifest.read_text("utf-8"))
        entries = data["entries"]
        if data.get("format") != _FORMAT or not all(isinstance(e, str) for e in entries):
            raise ValueError("unexpected content")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{manifest}: not a manifest kernelwheel can read ({exc})",
            hint="remove the files the index wrote and this manifest, then run again",
        ) from None
    if bad := [e for e in entries if not e or "/" in e or e in (".", "..", MANIFEST)]:
        raise UsageError(
            f"{manifest}: lists {bad[0]!r}, which is no plain entry name",
            hint="the manifest was edited; remove it and the index's files, then run again",
        )
    return frozenset(entries)


def _write_manifest(output: Path, entries: Iterable[str]) -> None:
    data = {
        "format": _FORMAT,
        "written-by": "kernelwheel index",
        "note": "the top-level entries kernelwheel index wrote; it replaces and removes only these",
        "entries": sorted(set(entries)),
    }
    atomic_write(output / MANIFEST, json.dumps(data, indent=2) + "\n")


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def swap_in(staging: Path, output: Path, old: frozenset[str]) -> None:
    """Move every top-level entry of ``staging`` into ``output`` and remove the entries of
    ``old`` (those an earlier run wrote) that the new index no longer has."""
    new = frozenset(p.name for p in staging.iterdir())
    _write_manifest(output, old | new)
    with staging_dir(output, "index-old") as trash:
        for name in sorted(new):
            target = output / name
            if _exists(target) and (staging / name).is_dir():
                os.replace(target, trash / name)
            os.replace(staging / name, target)  # a file replaces a file in one rename
        for name in sorted(old - new):
            if _exists(output / name):
                os.replace(output / name, trash / name)
        _write_manifest(output, new)


def prepare(output: Path) -> frozenset[str]:
    """Check and create ``output``; the entries an earlier run wrote there."""
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {output}: is a file, not a folder", hint="pass a folder")
    old = owned_entries(output) if output.is_dir() else frozenset()
    output_dir(output, "--output")
    return old


def refuse_conflicts(staging: Path, output: Path, old: frozenset[str]) -> None:
    """Refuse the entries the new index would write over that belong to the user."""
    clash = sorted(
        p.name for p in staging.iterdir() if _exists(output / p.name) and p.name not in old
    )
    if clash:
        shown = ", ".join(clash[:5]) + (f" and {len(clash) - 5} more" if len(clash) > 5 else "")
        raise UsageError(
            f"{output} already holds {shown}, which the index would write but did not write "
            "before (no earlier run of kernelwheel index lists it)",
            hint="move those files away, or choose another --output folder; kernelwheel never "
            "replaces files it did not write",
        )
