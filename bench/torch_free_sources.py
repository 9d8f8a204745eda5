"""Which CUDA sources of a corpus include no torch header (issue 22, goal 2: such a source can be
compiled once per CUDA toolkit and shared across torch versions through the compiler cache).

A static estimate: follows ``#include`` lines from each ``.cu`` (quoted or angled; a header not
found beside the includer is looked up by file name in the project), and counts a source as
torch-dependent when it reaches torch/ATen/c10/pybind11/Python.h or a torch binding header.
Conditional includes count as included. The measured hits are bench/build_corpus.py's.

    python bench/torch_free_sources.py /tmp/kc      # a fetched huggingface/kernels-community
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
TORCH = ("torch/", "ATen/", "c10/", "pybind11", "Python.h", "torch_binding", "registration.h")


def reaches_torch(source: Path, project: Path) -> bool:
    seen: set[Path] = set()
    todo = [source]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            text = path.read_text(errors="ignore")
        except OSError:
            continue
        for header in INCLUDE.findall(text):
            if header.startswith(TORCH):
                return True
            near = path.parent / header
            found = near if near.is_file() else next(project.rglob(Path(header).name), None)
            if found is not None:
                todo.append(found)
    return False


def main(corpus: Path) -> int:
    rows, total, free = [], 0, 0
    for project in sorted(p for p in corpus.iterdir() if (p / "build.toml").is_file()):
        sources = sorted(project.rglob("*.cu"))
        if not sources:
            continue
        n_free = sum(not reaches_torch(s, project) for s in sources)
        rows.append(f"| {project.name} | {len(sources)} | {n_free} |")
        total, free = total + len(sources), free + n_free
    print("| project | .cu files | without torch headers |\n|---|---|---|")
    print("\n".join(rows))
    print(f"| all | {total} | {free} ({100 * free / max(1, total):.0f}%) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kc")))
