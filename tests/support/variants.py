"""The Hub variant names the tests share, written once.

Named by torch release, flavour and arch, so a test says which build it means without a
literal. The recipes in recipes/ build the x86_64 ones on this machine; the torch 2.7 names
stand for older Hub builds in the fake Hub repos.
"""

from __future__ import annotations

TORCH214_CU130 = "torch214-cxx11-cu130-x86_64-linux"  # the default CUDA build (CUDA 13.0)
TORCH214_CU128 = "torch214-cxx11-cu128-x86_64-linux"
TORCH214_CPU = "torch214-cxx11-cpu-x86_64-linux"
TORCH213_CPU = "torch213-cxx11-cpu-x86_64-linux"
TORCH27_CU128 = "torch27-cxx11-cu128-x86_64-linux"
TORCH27_CPU = "torch27-cxx11-cpu-x86_64-linux"
TORCH214_CU130_AARCH64 = "torch214-cxx11-cu130-aarch64-linux"
TORCH29_CPU_AARCH64 = "torch29-cxx11-cpu-aarch64-linux"
TORCH_CUDA = "torch-cuda"  # a noarch (universal) CUDA build

# A legacy Hub repo in the nested layout: an old and a current CUDA build and a noarch one.
HUB_NESTED = (TORCH27_CU128, TORCH214_CU130, TORCH_CUDA)
