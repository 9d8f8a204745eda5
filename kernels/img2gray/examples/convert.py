"""Convert an RGB image file to grayscale with the installed img2gray wheel.

    python convert.py INPUT.png OUTPUT.png [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
from PIL import Image

import img2gray


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    # A build serves one backend (a CPU wheel CPU tensors, a CUDA wheel CUDA tensors).
    (default,) = img2gray.supported_devices()
    parser.add_argument("--device", default=default, help=f"cpu or cuda (default: {default})")
    args = parser.parse_args(argv)
    rgb = np.asarray(Image.open(args.input).convert("RGB"))
    image = torch.from_numpy(rgb.copy()).to(args.device)
    gray = img2gray.img2gray(image).cpu().numpy()
    Image.fromarray(gray, mode="L").save(args.output)
    print(f"{args.input} ({rgb.shape[1]}x{rgb.shape[0]} RGB) -> {args.output} (gray, {args.device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
