"""Opt-in matrix run (issue 3): build img2gray for several variants across torch minors with
`kernelwheel build`, pip-install each wheel into a fresh venv on its build environment's torch,
run the CPU op against a NumPy reference, and write the results to docs/matrix-run.md.

    .venv/bin/python scripts/matrix_run.py            # the default six x86_64 variants
    .venv/bin/python scripts/matrix_run.py --variant torch212-cxx11-cu130-x86_64-linux ...

Downloads each variant's torch (GBs for CUDA builds) the first time; later runs reuse the cached
build environments and the compiler cache.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.conftest import build_env  # noqa: E402
from integration.venvs import LayeredVenv  # noqa: E402

from kernelwheel.cli import main as kernelwheel  # noqa: E402

DEFAULT = [
    "torch211-cxx11-cu130-x86_64-linux",
    "torch212-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
]

# PyTorch's own index (torch==2.14.1+cpu) is not reachable from this project's machines: this CPU
# variant compiles in the torch 2.14.1 CUDA environment instead (CPU kernels only; the wheel
# requires torch==2.14.*, which both builds satisfy).
BUILD_IN = {"torch214-cxx11-cpu-x86_64-linux": "torch214-cxx11-cu130-x86_64-linux"}

CHECK = r"""
import numpy as np, torch, img2gray
rng = np.random.default_rng()
for shape in [(1, 1, 3), (17, 29, 3), (3, 64, 65, 3)]:
    img = rng.integers(0, 256, size=shape, dtype=np.uint8)
    rgb = img.astype(np.int64)
    ref = (21 * rgb[..., 0] + 72 * rgb[..., 1] + 7 * rgb[..., 2]) // 100
    assert np.array_equal(img2gray.img2gray(torch.from_numpy(img)).numpy(), ref), shape
print(torch.__version__, img2gray.supported_devices())
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "matrix-run.md")
    args = ap.parse_args()
    variants = args.variant or DEFAULT
    work = Path(tempfile.mkdtemp(prefix="kw-matrix-"))
    rows = []
    for name in variants:
        out = work / name
        start = time.monotonic()
        log = io.StringIO()
        env_of = BUILD_IN.get(name, name)
        extra = ["--python", str(build_env(env_of).python)] if env_of != name else []
        with redirect_stdout(log):
            code = kernelwheel(["build", str(REPO / "kernels" / "img2gray"), "-o", str(out),
                                "--variant", name, *extra])
        seconds = time.monotonic() - start
        print(log.getvalue(), flush=True)
        wheels = sorted(out.glob("*.whl"))
        if code != 0 or not wheels:
            rows.append((name, f"build failed ({code})", "", "", f"{seconds:.0f}", "-"))
            continue
        wheel = wheels[0]
        venv = LayeredVenv(work / f"venv-{name}", build_env(env_of).purelib)
        venv.pip(str(wheel))
        proc = venv.run("-c", CHECK, check=False)
        ran = proc.stdout.strip() if proc.returncode == 0 else "FAILED: " + proc.stderr[-300:]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        size = f"{wheel.stat().st_size / 1024:.0f} KiB"
        rows.append((name, wheel.name, size, digest[:16], f"{seconds:.0f}", ran))
        print(name, "->", ran, flush=True)
    lines = [
        "# Matrix run: img2gray built for several variants and run",
        "",
        "Produced by `.venv/bin/python scripts/matrix_run.py` on this project's CPU machine "
        "(x86_64, 2 cores). Each wheel was pip-installed into a fresh venv on its variant's "
        "torch and its CPU op compared with a NumPy reference on random images (1×1, odd "
        "sizes, a batch). Build seconds include creating the build environment on first use. "
        "torch214-cpu was compiled in the torch 2.14.1 CUDA environment (PyTorch's CPU index "
        "is unreachable here).",
        "",
        "| variant | wheel | size | sha256 (16) | build s | installed, op checked on |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(f"`{c}`" if i == 1 else c for i, c in enumerate(r)) + " |"
              for r in rows]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    ok = all(not r[5].startswith(("FAILED", "-")) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
