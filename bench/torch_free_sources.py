"""Which CUDA sources of a corpus reach no torch header (issue 22, goal 2): kernelwheel keys
those on their preprocessed text, so one compile per CUDA toolkit serves every torch version.

Runs kernelwheel's own scan (``kernelwheel.compile.torch_free``: ``#include`` lines followed
through the project, with build.toml's include folders) over every ``.cu`` a project's kernels
list; a static estimate, the measured hits are bench/build_corpus.py's.

    python bench/torch_free_sources.py /tmp/kc      # a fetched huggingface/kernels-community
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernelwheel.compile.torch_free import torch_free_sources
from kernelwheel.errors import KernelwheelError
from kernelwheel.model.project import load_project


def main(corpus: Path) -> int:
    rows, total, free, free_per_torch = [], 0, 0, 0
    for root in sorted(p for p in corpus.iterdir() if (p / "build.toml").is_file()):
        try:
            project = load_project(root)
        except KernelwheelError as exc:
            rows.append(f"| {root.name} | unreadable: {exc} | | |")
            continue
        sources = list(
            dict.fromkeys(str(root / s) for k in project.kernels for s in k.src if s.suffix == ".cu")
        )
        if not sources:
            continue
        includes = [str(root / p) for k in project.kernels for p in k.include]
        if project.torch is not None:
            includes += [str(root / p) for p in project.torch.include]
        n_free = len(torch_free_sources(sources, includes, root))
        # a CUDA stable-ABI build compiles once per CUDA already (goal 3): sharing objects
        # across torch versions (goal 2) saves only in the other projects
        stable = project.stable_abi_for("cuda") is not None
        rows.append(f"| {root.name} | {len(sources)} | {n_free} | {'yes' if stable else 'no'} |")
        total, free = total + len(sources), free + n_free
        free_per_torch += 0 if stable else n_free
    print("| project | .cu files | without torch headers | CUDA stable ABI |\n|---|---|---|---|")
    print("\n".join(rows))
    print(f"| all | {total} | {free} ({100 * free / max(1, total):.0f}%) | |")
    print(f"| without the stable ABI | | {free_per_torch} | no |")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kc")))
