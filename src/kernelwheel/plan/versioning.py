"""The wheel's version: kernel-builder's API major plus a minor and patch, from the option, the
VERSION file, the project's own git tag or ``<major>.0.0`` (docs/versions.md). It is pure, its
inputs read by :func:`version_inputs` and :func:`read_git_state`, so every case has a unit test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .._util import RUNNER, Runner
from ..errors import KernelwheelError, ProjectError, UsageError
from ..model.gitstate import OBJECT_ID
from ..model.gitstate import GitState as GitState  # re-exported: the build reads it here
from ..model.project import KernelProject
from .options import PYPROJECT, TOOL_TABLE, Options, checked_version

VERSION_FILE = "VERSION"


@dataclass(frozen=True)
class VersionInputs:
    """Everything :func:`resolve_version` decides from."""

    build_toml: Path
    api_version: int | None  # the integer general.version
    legacy: str | None  # the older forms' string general.version
    option: str | None = None  # --version or [tool.kernelwheel] version
    option_source: str = "--version"  # the flag, or '[tool.kernelwheel] version'
    version_file: Path | None = None  # the VERSION file, when there is one
    version_text: str = ""  # its contents
    tags: tuple[str, ...] = ()  # v* tags on HEAD of the project's own repository
    dirty: bool = False  # tracked files of the project differ from HEAD


@dataclass(frozen=True)
class WheelVersion:
    version: str  # normalised, without a local part
    source: str  # where it came from, for messages: '--version', 'git tag v1.2.0', ...
    warning: str | None = None  # what the author should hear of it (a tag on edited code)


def resolve_version(inputs: VersionInputs) -> WheelVersion:
    """The wheel version from ``inputs``; the error of the source that is wrong names it."""
    major = inputs.api_version
    if inputs.option is not None:
        return _checked(inputs.option, *_option_source(inputs), major, inputs)
    if major is None and inputs.legacy:
        return WheelVersion(inputs.legacy, f"{inputs.build_toml.name} general.version")
    if inputs.version_file is not None and inputs.version_text.strip():
        path = inputs.version_file

        def error(message: str, hint: str) -> KernelwheelError:
            return ProjectError(message, file=path, hint=hint)

        return _checked(inputs.version_text.strip(), str(path), error, major, inputs)
    if major is None:
        raise ProjectError(
            "no version for the wheel",
            file=inputs.build_toml,
            key="general.version",
            hint="set general.version (the integer API major, e.g. version = 1), pass "
            "--version X.Y.Z, or write a VERSION file beside build.toml",
        )
    tagged = _from_tags(inputs.tags, major, inputs)
    if tagged is not None:
        return tagged
    return WheelVersion(
        f"{major}.0.0", f"{inputs.build_toml.name} general.version = {major}, no minor given"
    )


# (message, hint) -> the error that points where a full version came from
_Error = Callable[[str, str], KernelwheelError]


def _option_source(inputs: VersionInputs) -> tuple[str, _Error]:
    label, pyproject = inputs.option_source, inputs.build_toml.parent / PYPROJECT
    if label == "--version":
        return label, lambda message, hint: UsageError(f"--version: {message}", hint=hint)
    key = f"{TOOL_TABLE}.version"
    return label, lambda message, hint: ProjectError(message, file=pyproject, key=key, hint=hint)


def _checked(
    text: str, label: str, error: _Error, major: int | None, inputs: VersionInputs
) -> WheelVersion:
    version = checked_version(text, error, "write a version such as 1.2.0 or 1.2.0rc1")
    if major is not None and version.major != major:
        raise error(
            f"version {version} has major {version.major}, but the kernel's API major is "
            f"{major} ({inputs.build_toml.name} general.version = {major})",
            f"use a {major}.x.y version (e.g. {major}.{version.minor}.{version.micro}), or set "
            f"general.version = {version.major} in {inputs.build_toml.name} if the API changed "
            f"(the Hub publishes each major as branch v<major>)",
        )
    return WheelVersion(str(version), label)


def _tag_version(tag: str) -> Version | None:
    """The full version a ``v<version>`` tag names (two parts or more), else None."""
    if not tag.startswith("v"):
        return None
    try:
        version = Version(tag[1:])
    except InvalidVersion:
        return None
    return version if len(version.release) >= 2 and version.local is None else None


def _from_tags(tags: tuple[str, ...], major: int, inputs: VersionInputs) -> WheelVersion | None:
    """The newest ``v<major>.*`` tag; a full-version tag of another major with none of this one
    is refused (HEAD says one API, build.toml another)."""
    versions = [(v, tag) for tag in tags if (v := _tag_version(tag)) is not None]
    mine = [(v, tag) for v, tag in versions if v.major == major]
    if mine:
        version, tag = max(mine)
        edited = (
            f"the project's tracked files have uncommitted changes since {tag}: these wheels "
            f"are versioned {version} but are not the tagged code (two builds of {version} "
            "may differ); commit and tag a new version, or pass --version"
        )
        return WheelVersion(str(version), f"git tag {tag}", edited if inputs.dirty else None)
    if versions:
        version, tag = max(versions)
        raise ProjectError(
            f"HEAD of the git repository at {inputs.build_toml.parent} is tagged {tag}: a version "
            f"of API major {version.major}, but {inputs.build_toml.name} says general.version = "
            f"{major}",
            file=inputs.build_toml,
            key="general.version",
            hint=f"tag HEAD v{major}.x.y, set general.version = {version.major} if the API "
            "changed, or pass --version X.Y.Z",
        )
    return None


def version_inputs(project: KernelProject, options: Options, git: GitState | None) -> VersionInputs:
    """Read what :func:`resolve_version` needs: the VERSION file, the option, the tags."""
    version_file = project.root / VERSION_FILE
    text = ""
    if version_file.is_file():
        try:
            text = version_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ProjectError(
                f"cannot read it ({exc})", file=version_file, hint="write the version as text"
            ) from None
    return VersionInputs(
        build_toml=project.build_toml,
        api_version=project.api_version,
        legacy=project.version,
        option=options.version,
        option_source=options.source("version"),
        version_file=version_file if version_file.is_file() else None,
        version_text=text,
        tags=git.tags if git is not None else (),
        dirty=git is not None and git.dirty,
    )


def read_git_state(root: Path, runner: Runner = RUNNER) -> GitState | None:
    """The git state of the repository holding ``root``; None outside one (or without git).
    Dirty: a tracked file under ``root`` differs (another kernel's edit is not this one's)."""
    commit = runner.output(["git", "rev-parse", "--verify", "HEAD"], cwd=root)
    if commit is None or not OBJECT_ID.fullmatch(commit.lower()):
        return None
    status = runner.output(
        ["git", "status", "--porcelain", "--untracked-files=no", "--ignore-submodules", "--", "."],
        cwd=root,
    )
    top = runner.output(["git", "rev-parse", "--show-toplevel"], cwd=root)
    tags: tuple[str, ...] = ()
    if top is not None and Path(top).resolve() == root.resolve():
        listed = runner.output(["git", "tag", "--points-at", "HEAD", "--list", "v*"], cwd=root)
        tags = tuple(sorted((listed or "").split()))
    return GitState(commit=commit.lower(), dirty=status is None or bool(status), tags=tags)
