"""torch.library.opcheck's cost, each check timed on its first call in a fresh process.

`python bench/opcheck_cost.py cuda|cpu`: an op defined with torch.library (CPU, CUDA and Meta
impls in Python, so nothing is compiled), then each of opcheck's test_utils, then all again.
"""

import sys
import time

UTILS = (
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
)


def timed(label: str, start: float) -> None:
    print(label, round(time.time() - start, 2), flush=True)


def main(device: str) -> None:
    start = time.time()
    import torch

    print("import torch", round(time.time() - start, 2), torch.__version__, flush=True)
    lib = torch.library.Library("kwt", "DEF")
    lib.define("add_one(Tensor x) -> Tensor")
    for key in ("CPU", "CUDA"):
        lib.impl("add_one", lambda x: x + 1, key)
    lib.impl("add_one", lambda x: torch.empty_like(x), "Meta")
    op = torch.ops.kwt.add_one.default
    start = time.time()
    x = torch.randn(5, 3, device=device)
    timed(f"first tensor {device}", start)
    for util in UTILS:
        start = time.time()
        torch.library.opcheck(op, (x,), test_utils=util)
        timed(util, start)
    start = time.time()
    torch.library.opcheck(op, (x,))
    timed("all, again", start)


if __name__ == "__main__":
    main(sys.argv[1])
