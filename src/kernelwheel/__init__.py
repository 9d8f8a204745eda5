"""kernelwheel: build PyTorch custom kernels into installable abi3 wheels."""

__version__ = "0.1.0"

__all__ = ["__version__"]
