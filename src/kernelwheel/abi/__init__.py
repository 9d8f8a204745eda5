"""ABI checks for kernel shared objects and wheels (``kernelwheel check``).

Every ELF file is checked against four rules, each with its own report entries:

- ``symbol-versions``: versioned imports (GLIBC_*, GLIBCXX_*, CXXABI_*, GCC_*) within the caps of
  the target manylinux policy, read from auditwheel's installed policy data;
- ``python-abi``: Python C-API imports within CPython's stable ABI as of the wheel's cp3X-abi3 tag
  (data/stable_abi.tsv, generated from CPython's Misc/stable_abi.toml);
- ``needed-libs``: DT_NEEDED libraries are the policy's system libraries, torch/CUDA libraries
  (data/abi_policy.toml), or shipped in the wheel;
- ``cxx-abi``: ``__cxx11`` mangling consistent with the variant's C++ ABI;

plus ``elf``: the architecture matches the wheel's tag and the stack is not executable.
"""

from .checker import FROM_TAG, WheelTags, check_shared_object, check_wheel, read_wheel_tags
from .policy import (
    DEFAULT_POLICY,
    load_kernel_libraries,
    load_policy,
    normalize_policy,
    parse_platform_tag,
    policy_names,
)
from .report import Rule, SoReport, Violation, WheelReport
from .stable_abi import StableAbiItem, load_stable_abi

__all__ = [
    "DEFAULT_POLICY",
    "FROM_TAG",
    "Rule",
    "SoReport",
    "StableAbiItem",
    "Violation",
    "WheelReport",
    "WheelTags",
    "check_shared_object",
    "check_wheel",
    "load_kernel_libraries",
    "load_policy",
    "load_stable_abi",
    "normalize_policy",
    "parse_platform_tag",
    "policy_names",
    "read_wheel_tags",
]
