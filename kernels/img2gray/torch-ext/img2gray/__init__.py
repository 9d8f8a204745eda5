"""RGB to grayscale for uint8 images, on the CPU and on CUDA GPUs.

Formula (exact, identical on every device)::

    gray = (21 * R + 72 * G + 7 * B) // 100

in integer arithmetic. This is exactly ``floor(0.21 R + 0.72 G + 0.07 B)`` evaluated over the
real numbers (the seed's luminosity weights, truncated). A float32 evaluation of
``0.21f*r + 0.72f*g + 0.07f*b`` would differ from it on 4518 of the 2^24 colours (on 4045 as nvcc
contracts it into FMAs, and the two float versions disagree on 5609 colours); the integer form
has no rounding at all, so the CPU and CUDA kernels agree bit for bit.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["img2gray", "supported_devices"]

_OP_NAME = add_op_namespace_prefix("img2gray")


def _find_supported_devices() -> tuple[str, ...]:
    """Device types this build has a kernel for (CUDA variants: cpu and cuda; CPU ones: cpu)."""
    has_kernel = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    if has_kernel is None:  # very old torch: assume both, the op itself will complain
        return ("cpu", "cuda")
    return tuple(
        device for device, key in (("cpu", "CPU"), ("cuda", "CUDA")) if has_kernel(_OP_NAME, key)
    )


# Computed once, at import: a plain tuple keeps img2gray() traceable by torch.compile.
_SUPPORTED_DEVICES = _find_supported_devices()


def supported_devices() -> tuple[str, ...]:
    """The device types ('cpu', 'cuda') that this installed build can run img2gray on."""
    return _SUPPORTED_DEVICES


def img2gray(image: torch.Tensor) -> torch.Tensor:
    """Convert RGB ``uint8`` images to grayscale.

    Args:
        image: a ``uint8`` tensor of shape ``(H, W, 3)`` or ``(N, H, W, 3)`` (channel-last RGB) on
            a device this build supports (see :func:`supported_devices`). Non-contiguous input
            (a crop, a strided view, a permuted CHW tensor) is accepted: it is copied to a
            contiguous tensor first, which costs one extra pass over the image. A meta tensor
            gives a meta result of the right shape (what torch.compile traces with).

    Returns:
        A new ``uint8`` tensor of shape ``(H, W)`` or ``(N, H, W)`` on the same device, where
        ``gray = (21 * R + 72 * G + 7 * B) // 100`` (integer arithmetic; the exact truncation of
        ``0.21 R + 0.72 G + 0.07 B``).

    Raises:
        TypeError: ``image`` is not a tensor, or its dtype is not ``torch.uint8``.
        ValueError: the shape is not ``(H, W, 3)`` / ``(N, H, W, 3)``.
        RuntimeError: this build has no kernel for the image's device.
    """
    # The functional op checks, allocates and converts in C++: one dispatcher call, no Python
    # work on the way (host time of a copy_). Errors are explained in Python, off the fast path.
    try:
        return _img2gray(image)
    except (RuntimeError, TypeError, ValueError):  # NotImplementedError is a RuntimeError
        _explain(image)
        raise


_img2gray = getattr(ops, "img2gray").default  # img2gray(Tensor input) -> Tensor


def _explain(image: object) -> None:
    """Raise the precise error for an argument the op refused (returns if it finds none)."""
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"img2gray: expected a torch.Tensor, got {type(image).__name__}") from None
    if image.dtype != torch.uint8:
        raise TypeError(
            f"img2gray: expected a uint8 image, got dtype {image.dtype}; "
            "convert with image.to(torch.uint8) (values 0..255)"
        ) from None
    if image.dim() not in (3, 4) or image.shape[-1] != 3:
        raise ValueError(
            "img2gray: expected shape (H, W, 3) or (N, H, W, 3) (channel-last RGB), "
            f"got {tuple(image.shape)}; for a (3, H, W) tensor pass image.permute(1, 2, 0)"
        ) from None
    if image.device.type not in (*_SUPPORTED_DEVICES, "meta"):
        raise RuntimeError(
            f"img2gray: no kernel for device '{image.device.type}' in this build; "
            f"supported devices: {', '.join(_SUPPORTED_DEVICES) or 'none'}"
        ) from None


def _register_fake() -> None:
    """Shape-only implementation of the out variant so torch.compile (fullgraph too) can trace
    it; the functional op has its Meta kernel in C++."""
    register = getattr(torch.library, "register_fake", None) or getattr(
        torch.library, "impl_abstract", None
    )
    if register is None:  # torch < 2.2: no torch.compile support for custom ops anyway
        return

    @register(add_op_namespace_prefix("img2gray.out"))
    def _img2gray_out_fake(input: torch.Tensor, output: torch.Tensor) -> None:
        return None


_register_fake()
