"""Regenerate src/kernelwheel/data/torch_shim_versions.tsv: the torch release each of libtorch's
stable C shim functions (``aoti_torch_*``, ``torch_*``) first appeared in.

    .venv/bin/python scripts/regen_torch_shim_versions.py \\
        ~/.cache/kernelwheel/envs/py3.11-3dcaaec7a742cdd0/lib/python3.11/site-packages/torch \\
        ~/.cache/kernelwheel/envs/py3.11-0146f59f320ab65d/lib/python3.11/site-packages/torch

Each argument is an installed torch package folder (the one holding ``version.py``). torch ships
no machine-readable table of its shim versions; it states them in its headers instead: every
function added since 2.10 is declared inside ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0``
(torch/csrc/stable/c/shim.h, torch/csrc/inductor/aoti_torch/c/*.h and generated/c_shim_*.h). So:

1. the headers of every torch given are read, tracking the preprocessor nesting: a function
   declared (``AOTI_TORCH_EXPORT ... name(``) under a version guard gets that version (the
   highest guard around it); one declared under none is *unversioned* (it predates the guards);
2. the dynamic symbols each torch's ``lib/libtorch*.so`` define are read (pyelftools, through
   kernelwheel's ELF reader), and a shim function a newer torch exports but an older one given
   here does not is given that newer release when its headers put no version on it;
3. a header version that contradicts the exports (a function guarded as 2.14 that torch 2.13
   exports) is an error: the table is not written.

The limits are written into the file's header: which torch releases were seen, and that
"unversioned" means only "declared without a version guard and present in the oldest torch
seen", not a release.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelwheel.abi._elf import read_elf  # noqa: E402

OUT = ROOT / "src" / "kernelwheel" / "data" / "torch_shim_versions.tsv"
HEADER_DIRS = ("torch/csrc/stable", "torch/csrc/inductor/aoti_torch")
SHIM = re.compile(r"(?:aoti_torch_|torch_)\w+")
GUARD = re.compile(r"TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_\d+")
DECL = re.compile(r"AOTI_TORCH_EXPORT\b[^;{]*?\b((?:aoti_torch_|torch_)\w+)\s*\(", re.S)


@dataclass
class Torch:
    folder: Path
    version: str  # as torch/version.py says: 2.13.0+cpu
    series: tuple[int, int]
    declared: dict[str, tuple[tuple[int, int] | None, str]] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)


def read_torch(folder: Path) -> Torch:
    text = (folder / "version.py").read_text()
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    if match is None:
        raise SystemExit(f"{folder}/version.py: no __version__")
    version = match.group(1)
    major, minor = (int(p) for p in version.split(".")[:2])
    torch = Torch(folder, version, (major, minor))
    include = folder / "include"
    for sub in HEADER_DIRS:
        for header in sorted((include / sub).rglob("*.h")):
            for name, since in declarations(header.read_text(errors="replace")):
                rel = header.relative_to(include).as_posix()
                old = torch.declared.get(name)
                if old is None or (old[0] is not None and (since is None or since < old[0])):
                    torch.declared[name] = (since, rel)
    for lib in sorted((folder / "lib").glob("libtorch*.so")):
        info = read_elf(lib)
        torch.exported |= {s.name for s in info.symbols if s.defined and SHIM.fullmatch(s.name)}
    return torch


def declarations(text: str) -> list[tuple[str, tuple[int, int] | None]]:
    """(function, the version guard around it or None) for each AOTI_TORCH_EXPORT declaration."""
    out: list[tuple[str, tuple[int, int] | None]] = []
    stack: list[tuple[int, int] | None] = []
    pending: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            directive = stripped[1:].strip()
            if directive.startswith("if"):  # #if, #ifdef, #ifndef
                guard = GUARD.search(directive) if directive.startswith("if ") else None
                stack.append((int(guard[1]), int(guard[2])) if guard else None)
            elif directive.startswith(("else", "elif")) and stack:
                stack[-1] = None  # the other branch: not the guarded one
            elif directive.startswith("endif") and stack:
                stack.pop()
            continue
        if "AOTI_TORCH_EXPORT" in line or pending:
            pending.append(line)
            chunk = "\n".join(pending)
            if "(" in chunk or ";" in chunk:
                match = DECL.search(chunk)
                if match:
                    versions = [v for v in stack if v is not None]
                    out.append((match.group(1), max(versions) if versions else None))
                pending = []
    return out


def table(torches: list[Torch]) -> list[tuple[str, str, str, str]]:
    torches = sorted(torches, key=lambda t: t.series)
    oldest = torches[0]
    rows: dict[str, tuple[str, str, str, str]] = {}
    for torch in torches:  # oldest first: the first release that has a function names it
        for name, (since, header) in torch.declared.items():
            if name in rows:
                continue
            if since is not None:
                for other in torches:
                    if other.series < since and name in other.exported:
                        raise SystemExit(
                            f"{header}: {name} is guarded as torch {since[0]}.{since[1]}, but "
                            f"torch {other.version} exports it"
                        )
                rows[name] = (name, f"{since[0]}.{since[1]}", "guard", header)
            elif torch is oldest:
                rows[name] = (name, "-", "guard", header)
            else:
                first = f"{torch.series[0]}.{torch.series[1]}"
                rows[name] = (name, first, "declared", header)
        if torch is not oldest:
            for name in sorted(torch.exported - oldest.exported - set(rows)):
                series = f"{torch.series[0]}.{torch.series[1]}"
                rows[name] = (name, series, "exports", "-")
    for name in sorted(oldest.exported - set(rows)):  # defined, declared nowhere: no floor
        rows[name] = (name, "-", "exports", "-")
    return [rows[n] for n in sorted(rows)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("torch", nargs="+", type=Path, help="installed torch package folders")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    torches = [read_torch(p.expanduser()) for p in args.torch]
    rows = table(torches)
    seen = ", ".join(t.version for t in sorted(torches, key=lambda t: t.series))
    guards = sorted({r[1] for r in rows if r[2] == "guard" and r[1] != "-"})
    lines = [
        "# libtorch's stable C shim: the torch release each function first appeared in.",
        f"# Generated by `python scripts/regen_torch_shim_versions.py` from torch {seen};",
        "# do not edit by hand. Columns (tab-separated): name, since, source, header.",
        "#   since: X.Y, the first torch release with the function; '-' when the headers put no",
        "#     version on it and the oldest torch read has it (it predates the version guards,",
        f"#     which begin at {guards[0] if guards else '?'}): it sets no floor.",
        "#   source: 'guard' = torch's own headers declare it inside",
        "#     #if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_0 (torch ships no other table), or,",
        "#     with since '-', outside any such guard;",
        "#     'declared' = unguarded, and the headers of release X.Y are the first read here",
        "#     that declare it;",
        "#     'exports' = in no header read, and libtorch*.so of release X.Y is the first read",
        "#     here that defines it ('-': the oldest does).",
        "#   header: the header declaring it under torch/include ('-' for none).",
        f"# Limits: only torch {seen} were read. A function torch added after the newest of them",
        "# is not listed (kernelwheel reports it as unknown, never as floor-free); the exports",
        "# of releases before the oldest were not seen; a CPU torch exports no CUDA shim, so",
        "# for those the headers alone speak. Guards are checked against the exports: a",
        "# function guarded as X.Y that an older torch read here exports stops the script.",
    ]
    lines += ["\t".join(r) for r in rows]
    args.output.write_text("\n".join(lines) + "\n")
    print(f"{args.output}: {len(rows)} functions from torch {seen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
