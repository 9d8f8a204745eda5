"""Smoke tests of the installed img2gray package: run them where an img2gray wheel is installed,
outside this folder (``python -m pytest kernels/img2gray/tests``). A CPU build runs the op on
CPU tensors, a CUDA build on a GPU (skipped without one). kernelwheel's own exhaustive suite
(every colour, strides, torch.compile, CUDA graphs) is tests/kernel_suites/img2gray."""

from __future__ import annotations

import pytest
import torch

import img2gray

# Each build has one backend's kernel: the device this build serves.
(DEVICE,) = img2gray.supported_devices()
needs_device = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA device"
)


def reference(image: torch.Tensor) -> torch.Tensor:
    """(21 R + 72 G + 7 B) // 100, in int64 on the CPU."""
    rgb = image.cpu().long()
    return ((21 * rgb[..., 0] + 72 * rgb[..., 1] + 7 * rgb[..., 2]) // 100).to(torch.uint8)


@needs_device
@pytest.mark.parametrize("shape", [(1, 1, 3), (37, 41, 3), (2, 64, 65, 3), (0, 5, 3)], ids=str)
def test_matches_the_formula(shape: tuple[int, ...]) -> None:
    image = torch.randint(0, 256, shape, dtype=torch.uint8, device=DEVICE)
    gray = img2gray.img2gray(image)
    assert gray.device == image.device and gray.shape == shape[:-1]
    assert torch.equal(gray.cpu(), reference(image))


@needs_device
def test_non_contiguous_input() -> None:
    image = torch.randint(0, 256, (3, 40, 50), dtype=torch.uint8, device=DEVICE)
    view = image.permute(1, 2, 0)  # a CHW tensor seen as HWC
    assert torch.equal(img2gray.img2gray(view).cpu(), reference(view))


def test_meta_gives_shape_only() -> None:
    out = img2gray.img2gray(torch.empty(2, 4, 5, 3, dtype=torch.uint8, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 4, 5)


def test_rejects_other_dtypes() -> None:
    with pytest.raises(TypeError, match="expected a uint8 image"):
        img2gray.img2gray(torch.zeros(4, 4, 3, dtype=torch.float32, device="meta"))
