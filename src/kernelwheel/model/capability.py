"""A CUDA compute capability, ``major.minor[a|f][+PTX]``: the one parser and formatter for
build.toml, the recipes and ``--cuda-capabilities``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import VariantError

PTX = "+PTX"
# A major of one or two digits (no leading zero), a one-digit minor: nvcc's sm_XY / sm_XXY.
_FORM = re.compile(r"([1-9][0-9]?)\.([0-9])([af]?)(\+PTX)?")
# What people write instead: sm_90, compute_90a, 90.
_DIGITS = re.compile(r"(?:sm_|compute_)?([1-9][0-9]?)([0-9])([af]?)")
_HINT = (
    'write "X.Y", optionally "X.Ya" (arch-specific), "X.Yf" (family) or "X.Y+PTX", e.g. "8.0", '
    '"9.0a", "12.0+PTX"'
)


def _rewrite(text: object) -> str:
    """The hint for a capability that is none: its likely meaning where plain (``sm_90``)."""
    if not isinstance(text, str):
        return _HINT
    if digits := _DIGITS.fullmatch(text):
        return f'write it as "{digits[1]}.{digits[2]}{digits[3]}"'
    guess = text.strip().replace(",", ".").replace("O", "0")
    if guess.upper().endswith(PTX):
        guess = guess[: -len(PTX)] + PTX
    return f'write it as "{guess}"' if guess != text and _FORM.fullmatch(guess) else _HINT


@dataclass(frozen=True)
class CudaCapability:
    major: int
    minor: int
    suffix: str = ""  # "a" (arch-specific) or "f" (family)
    ptx: bool = False

    @classmethod
    def parse(cls, text: str) -> CudaCapability:
        """``"9.0a+PTX"`` → (9, 0, "a", PTX); else a VariantError."""
        match = _FORM.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise VariantError(f"invalid CUDA capability {text!r}", hint=_rewrite(text))
        return cls(int(match[1]), int(match[2]), match[3], match[4] is not None)

    def __str__(self) -> str:
        return self.target + (PTX if self.ptx else "")

    @property
    def target(self) -> str:
        """The GPU it compiles SASS for: ``9.0a`` of ``9.0a+PTX``."""
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def base(self) -> str:
        """``major.minor``: what nvcc --list-gpu-arch names (``9.0`` of ``9.0a+PTX``)."""
        return f"{self.major}.{self.minor}"

    @property
    def digits(self) -> str:
        return f"{self.major}{self.minor}{self.suffix}"

    @property
    def sort_key(self) -> tuple[int, int, str]:
        """Ascending: ``9.0`` < ``9.0a`` < ``9.0f`` < ``10.0`` (``+PTX`` does not order)."""
        return self.major, self.minor, self.suffix


def parse_all(texts: Iterable[str]) -> tuple[CudaCapability, ...]:
    return tuple(CudaCapability.parse(text) for text in texts)


def joined(capabilities: Iterable[CudaCapability]) -> str:
    """``8.0, 9.0a, 12.0+PTX``: a list of them as messages show it."""
    return ", ".join(str(c) for c in capabilities)
