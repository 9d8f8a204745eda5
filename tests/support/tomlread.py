"""TOML parsing for the tests: tomllib, or tomli before Python 3.11 (as kernelwheel._toml)."""

import sys

if sys.version_info >= (3, 11):
    from tomllib import loads
else:  # pragma: no cover - Python 3.10
    from tomli import loads  # type: ignore[import-not-found, unused-ignore]

__all__ = ["loads"]
