"""The wheel version: every source (the option as flag or key, VERSION, a git tag, major.0.0, the
older string general.version), their order, and every refusal naming its source and the fix."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.tinykernel import write_tiny_kernel

from kernelwheel.errors import KernelwheelError, ProjectError, UsageError
from kernelwheel.model.project import load_project
from kernelwheel.plan.options import resolve_options
from kernelwheel.plan.planning import plan_project, wheel_version
from kernelwheel.plan.versioning import (
    GitState,
    VersionInputs,
    WheelVersion,
    read_git_state,
    resolve_version,
    version_inputs,
)

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
TOML = Path("/k/build.toml")
VERSION = Path("/k/VERSION")
KEY = "[tool.kernelwheel] version"
GENERAL = "build.toml general.version"


def _inputs(**kw: object) -> VersionInputs:
    base: dict[str, object] = {"build_toml": TOML, "api_version": 1, "legacy": None}
    base.update(kw)
    return VersionInputs(**base)  # type: ignore[arg-type]


# --- every source, and which one wins --------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"option": "1.4.2"}, WheelVersion("1.4.2", "--version")),
        ({"option": "1.4.2", "option_source": KEY}, WheelVersion("1.4.2", KEY)),
        ({"option": "v1.4"}, WheelVersion("1.4", "--version")),  # normalised
        ({"version_file": VERSION, "version_text": "1.3.0\n"}, WheelVersion("1.3.0", "/k/VERSION")),
        ({"tags": ("v1.2.0",)}, WheelVersion("1.2.0", "git tag v1.2.0")),
        ({}, WheelVersion("1.0.0", f"{GENERAL} = 1, no minor given")),
        ({"api_version": 0}, WheelVersion("0.0.0", f"{GENERAL} = 0, no minor given")),
        # the older string general.version
        ({"api_version": None, "legacy": "0.1.0"}, WheelVersion("0.1.0", GENERAL)),
        (
            {"api_version": None, "version_file": VERSION, "version_text": "3.0.1"},
            WheelVersion("3.0.1", "/k/VERSION"),
        ),
    ],
)
def test_each_source(kw: dict[str, object], expected: WheelVersion) -> None:
    assert resolve_version(_inputs(**kw)) == expected


def test_the_first_source_wins() -> None:
    every = {"version_file": VERSION, "version_text": "1.3.0", "tags": ("v1.2.0",)}
    assert resolve_version(_inputs(option="1.9.0", **every)).source == "--version"
    assert resolve_version(_inputs(**every)).source == "/k/VERSION"
    assert resolve_version(_inputs(version_file=VERSION, version_text=" \n", tags=("v1.2.0",))) == (
        WheelVersion("1.2.0", "git tag v1.2.0")  # an empty VERSION file gives nothing
    )
    legacy = _inputs(api_version=None, legacy="0.1.0", version_file=VERSION, version_text="9.0")
    assert resolve_version(legacy).version == "0.1.0"
    assert resolve_version(_inputs(api_version=None, legacy="0.1.0", option="0.2.0")).version == (
        "0.2.0"
    )


def test_tags_newest_of_the_major_and_only_full_versions() -> None:
    tags = ("v1.2.0", "v1.10.0", "v1.9.3", "v2.0.0", "v1", "release-1.11.0", "vnext")
    assert resolve_version(_inputs(tags=tags)) == WheelVersion("1.10.0", "git tag v1.10.0")
    # tags that name no full version are no source, and no reason to refuse
    assert resolve_version(_inputs(tags=("v1", "v2", "nightly"))).version == "1.0.0"
    # the older forms have no API major: tags are not read
    assert resolve_version(_inputs(api_version=None, legacy="0.1.0", tags=("v5.0.0",))).version == (
        "0.1.0"
    )


# --- refusals: the source named, and the fix ------------------------------------------------


def _refused(kw: dict[str, object], kind: type[KernelwheelError]) -> KernelwheelError:
    with pytest.raises(kind) as info:
        resolve_version(_inputs(**kw))
    return info.value


def test_a_flag_of_another_major_is_refused() -> None:
    err = _refused({"option": "2.0.0"}, UsageError)
    assert str(err).startswith("--version: version 2.0.0 has major 2")
    assert "general.version = 1" in err.message
    assert err.hint is not None and "use a 1.x.y version" in err.hint
    assert "general.version = 2" in err.hint


def test_a_key_of_another_major_is_refused_in_pyproject() -> None:
    err = _refused({"option": "0.3.0", "option_source": KEY}, ProjectError)
    assert isinstance(err, ProjectError)
    assert err.file == Path("/k/pyproject.toml") and err.key == "tool.kernelwheel.version"
    assert "major 0" in err.message


@pytest.mark.parametrize(
    ("text", "match"),
    [("2.1.0", "has major 2"), ("one point two", "not a PEP 440 version"), ("1.2+cu1", "local")],
)
def test_a_version_file_that_cannot_be_used_is_refused(text: str, match: str) -> None:
    err = _refused({"version_file": VERSION, "version_text": text}, ProjectError)
    assert isinstance(err, ProjectError) and err.file == VERSION
    assert match in err.message


def test_a_tag_of_another_major_alone_is_refused() -> None:
    err = _refused({"tags": ("v2.1.0", "v1")}, ProjectError)
    assert isinstance(err, ProjectError) and err.key == "general.version"
    assert "HEAD of the git repository at /k is tagged v2.1.0" in err.message
    assert err.hint is not None and "--version" in err.hint and "v1.x.y" in err.hint


@pytest.mark.parametrize("option", ["1.0+local", "not a version"])
def test_a_bad_flag_is_refused(option: str) -> None:
    _refused({"option": option}, UsageError)


def test_no_version_at_all_is_refused() -> None:
    err = _refused({"api_version": None}, ProjectError)
    assert "no version for the wheel" in err.message
    assert err.hint is not None and "VERSION" in err.hint and "--version" in err.hint


# --- the option's layers, the inputs read from disk and git ---------------------------------


def test_the_option_comes_from_the_flag_or_pyproject(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", version=1)
    (root / "pyproject.toml").write_text('[tool.kernelwheel]\nversion = "1.5.0"\n')
    planned = plan_project(root, {}, env={})
    assert wheel_version(planned, None) == WheelVersion("1.5.0", KEY)
    planned = plan_project(root, {"version": "1.6.0"}, env={})
    assert wheel_version(planned, None) == WheelVersion("1.6.0", "--version")
    (root / "pyproject.toml").write_text('[tool.kernelwheel]\nversion = "1.5+x"\n')
    with pytest.raises(ProjectError, match="tool.kernelwheel.version: '1.5\\+x' has a local"):
        plan_project(root, {}, env={})
    with pytest.raises(UsageError, match="--version: 'x.y' is not a PEP 440 version"):
        resolve_options(None, env={}, cli={"version": "x.y"})


def test_inputs_read_the_version_file_and_the_tags(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", version=1)
    project = load_project(root)
    options = resolve_options(root, env={})
    inputs = version_inputs(project, options, GitState("a" * 40, False, ("v1.1.0",)))
    assert inputs.version_file is None and inputs.tags == ("v1.1.0",)
    assert resolve_version(inputs) == WheelVersion("1.1.0", "git tag v1.1.0")
    (root / "VERSION").write_text("1.2.3\n")
    assert resolve_version(version_inputs(project, options, None)).version == "1.2.3"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_git_state_commit_dirty_and_tags_of_the_projects_own_repo(tmp_path: Path) -> None:
    root = write_tiny_kernel(tmp_path / "k", version=1)
    assert read_git_state(root) is None  # not a repository
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "one")
    _git(root, "tag", "v1.2.0")
    _git(root, "tag", "-a", "v1.2.1", "-m", "annotated")
    _git(root, "tag", "other")
    state = read_git_state(root)
    assert state == GitState(_git(root, "rev-parse", "HEAD"), False, ("v1.2.0", "v1.2.1"))
    (root / "untracked.txt").write_text("x")
    assert read_git_state(root) == state  # untracked files do not make it dirty
    (root / "CARD.md").write_text("changed\n")
    dirty = read_git_state(root)
    assert dirty is not None and dirty.dirty
    planned = plan_project(root, {}, env={})
    # the tag names other code than the wheels': said, with the fix
    assert wheel_version(planned, state) == WheelVersion("1.2.1", "git tag v1.2.1")
    assert wheel_version(planned, dirty) == WheelVersion("1.2.1", "git tag v1.2.1", EDITED)


EDITED = (
    "the project's tracked files have uncommitted changes since v1.2.1: these wheels are "
    "versioned 1.2.1 but are not the tagged code (two builds of 1.2.1 may differ); commit and "
    "tag a new version, or pass --version"
)


def test_a_tag_on_edited_code_is_warned_of_other_sources_not() -> None:
    # `git tag v1.2.1`, then an edit: every build said "1.2.1 (version from git tag v1.2.1)",
    # two wheels of one version with other code, and nothing said so
    assert resolve_version(_inputs(tags=("v1.2.1",), dirty=True)).warning == EDITED
    assert resolve_version(_inputs(tags=("v1.2.1",))).warning is None
    for kw in ({"option": "1.4.2"}, {"version_file": VERSION, "version_text": "1.3.0"}):
        assert resolve_version(_inputs(tags=("v1.2.1",), dirty=True, **kw)).warning is None


def test_in_a_repository_of_many_kernels_tags_are_not_read_nor_other_kernels_edits(
    tmp_path: Path,
) -> None:
    mono = tmp_path / "mono"
    root = write_tiny_kernel(mono / "tiny-add", version=1)
    _git(mono, "init", "-q")
    _git(mono, "add", "-A")
    _git(mono, "commit", "-q", "-m", "one")
    _git(mono, "tag", "v7.0.0")  # another kernel's, or the repository's own release
    state = read_git_state(root)
    assert state is not None and state.tags == () and not state.dirty
    assert wheel_version(plan_project(root, {}, env={}), state).version == "1.0.0"
    # another kernel's uncommitted edit is not this one's; an edit of this one is
    other = write_tiny_kernel(mono / "other", version=1)
    _git(mono, "add", "-A")
    _git(mono, "commit", "-q", "-m", "two")
    (other / "CARD.md").write_text("edited\n")
    assert read_git_state(root) == GitState(_git(mono, "rev-parse", "HEAD"), False, ())
    (root / "CARD.md").write_text("edited\n")
    dirty = read_git_state(root)
    assert dirty is not None and dirty.dirty


def test_the_older_string_version_keeps_working(tmp_path: Path) -> None:
    root = tmp_path / "img2gray"
    shutil.copytree(IMG2GRAY, root, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (root / "VERSION").unlink()
    toml = root / "build.toml"  # the older form: a string version, no edition or backends
    legacy = '[general]\nname = "img2gray"\nversion = "0.1.0"\n\n[torch]\n'
    toml.write_text(legacy + toml.read_text().split("[torch]\n", 1)[1])
    assert wheel_version(plan_project(root, {}, env={}), None) == WheelVersion("0.1.0", GENERAL)
    toml.write_text(toml.read_text().replace('version = "0.1.0"\n', ""))
    (root / "VERSION").write_text("2.0.1\n")
    assert wheel_version(plan_project(root, {}, env={}), None).version == "2.0.1"
    (root / "VERSION").unlink()
    with pytest.raises(ProjectError, match="no version for the wheel"):
        wheel_version(plan_project(root, {}, env={}), None)


def test_the_tag_warning_is_a_builds_not_the_dev_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the dev loop runs on uncommitted edits by nature: only a build's wheels carry the version
    from kernelwheel.builder import service
    from kernelwheel.log import SilentReporter

    planned = plan_project(write_tiny_kernel(tmp_path / "k", version=1), {}, env={})
    edited = WheelVersion("1.2.1", "git tag v1.2.1", EDITED)
    monkeypatch.setattr(service, "wheel_version", lambda planned, git: edited)
    monkeypatch.setattr(service, "plan_requests", lambda *args, **kw: ())
    monkeypatch.setattr(service, "require_buildable", lambda *args, **kw: None)
    for release in (True, False):
        reporter = SilentReporter()
        service._requests(planned, [], reporter, (), service.RUNNER, release=release)
        shown = [message for _, message in reporter.messages if "uncommitted" in message]
        assert shown == ([f"warning: {EDITED}"] if release else [])
