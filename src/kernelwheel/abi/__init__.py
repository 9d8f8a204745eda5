"""ABI checks for kernel shared objects and wheels (``kernelwheel check``); the rules are
:class:`~kernelwheel.abi.report.Rule`'s, each described there and in ``check --help``."""

from .checker import FROM_TAG, check_shared_object, check_wheel, read_wheel_tags
from .policy import (
    DEFAULT_POLICY,
    load_kernel_libraries,
    load_policy,
    normalize_policy,
    parse_platform_tag,
)
from .report import Rule, SoReport, Violation, WheelReport
from .stable_abi import load_stable_abi

__all__ = [
    "DEFAULT_POLICY",
    "FROM_TAG",
    "Rule",
    "SoReport",
    "Violation",
    "WheelReport",
    "check_shared_object",
    "check_wheel",
    "load_kernel_libraries",
    "load_policy",
    "load_stable_abi",
    "normalize_policy",
    "parse_platform_tag",
    "read_wheel_tags",
]
