"""The error hierarchy: each class owns an exit code, each message says what is wrong and the fix;
the library raises them, the CLI prints them and exits."""

from __future__ import annotations

from pathlib import Path


class KernelwheelError(Exception):
    """Base class. ``hint`` says how to fix the problem; ``exit_code`` is what the CLI returns."""

    exit_code = 1
    diagnostics: tuple[str, ...] = ()  # lines shown under the message (BuildError's)

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        text = "\n".join((self.message, *self.diagnostics))
        return text if not self.hint else f"{text}\n  fix: {self.hint}"


class UsageError(KernelwheelError):
    """Bad command-line arguments or options."""

    exit_code = 2


class LocatedError(KernelwheelError):
    """A problem in a data file: the message starts with where it is, ``<file>: <key>: ``."""

    bracket_tables = False  # show an undotted key as a TOML table header

    def __init__(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        if file is not None and key is not None:
            shown = f"[{key}]" if self.bracket_tables and "." not in key else key
            message = f"{shown}: {message}"
        if file is not None:
            message = f"{file}: {message}"
        super().__init__(message, hint=hint)
        self.file = Path(file) if file is not None else None
        self.key = key


class ProjectError(LocatedError):
    """A kernel project (build.toml, its sources) is invalid. Names the file and key."""

    exit_code = 3
    bracket_tables = True


class VariantError(KernelwheelError):
    """A variant name or local version cannot be parsed or formatted."""

    exit_code = 4


class ToolchainError(KernelwheelError):
    """The build environment or compiler toolchain is missing or mismatched."""

    exit_code = 5


class BuildError(KernelwheelError):
    """Compilation failed. ``log`` names the full log; ``diagnostics``: the compiler's lines the
    author needs first, under the message, with the project's paths (editors and CI match them)."""

    exit_code = 6

    def __init__(
        self,
        message: str,
        *,
        log: Path | None = None,
        hint: str | None = None,
        diagnostics: tuple[str, ...] = (),
    ) -> None:
        if log is not None:
            message = f"{message} (full log: {log})"
        super().__init__(message, hint=hint)
        self.log = log
        self.diagnostics = diagnostics


class WheelError(KernelwheelError):
    """A wheel cannot be written or read."""

    exit_code = 7


class AbiError(KernelwheelError):
    """A shared object violates the target ABI policy."""

    exit_code = 8


class HubError(KernelwheelError):
    """A Hub kernel repository cannot be resolved, downloaded or converted."""

    exit_code = 9


class HubUnavailable(HubError):
    """A Hub call got no answer or a server error (5xx, 429) on every try: try again later."""


class InstallError(KernelwheelError):
    """``kernelwheel install`` found no fitting build, or could not inspect or install into the
    target (nothing was installed)."""

    exit_code = 10


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised by the CLI's handler: a KeyboardInterrupt, so it unwinds as Ctrl-C does
    (staging removed, half-written files deleted); the CLI exits 143 (128 + SIGTERM)."""

    exit_code = 143


class HungUp(Terminated):
    """SIGHUP (the terminal closed, an ssh session dropped): SIGTERM's path; the CLI exits 129."""

    exit_code = 129
