"""What ``kernelwheel install`` compares before and reads back after pip: the installed
distribution's RECORD against the wheel's (pure), the target interpreter's report of it (a real
interpreter, no pip), and the service's decisions with every process scripted (no pip run)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.version import Version
from support.installkit import NAMESPACE, isolate, kernel_wheel
from support.runners import Reply, ScriptedRunner, is_torch_probe, torch_probe_reply
from support.venvs import QuickVenv

from kernelwheel.cli import main
from kernelwheel.install.installed import (
    Installed,
    decide,
    differences,
    files_digest,
    own_files,
    read_environment,
)
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.reader import read_record
from kernelwheel.wheels.record import Row, format_record, record_hash

LABEL = "torch2.14.cpu.cxx11"
VERSION = f"0.1.0+{LABEL}"
DIST = f"img2gray-{VERSION}.dist-info"
SO = f"img2gray/{NAMESPACE}.abi3.so"
PY = f"img2gray/{NAMESPACE}.py"  # the stand-in for the extension in kernel_wheel's builds


def row(path: str, data: bytes) -> Row:
    return (path, record_hash(data), str(len(data)))


# -- the comparison (pure) ------------------------------------------------------------------


def test_installer_written_files_are_not_the_builds() -> None:
    """A wheel's RECORD and pip's or uv's RECORD of its installed copy give the same files:
    bookkeeping, byte-compiled files and files outside site-packages are left out, a .data
    purelib/platlib file counts where it lands."""
    wheel = [
        row("img2gray/__init__.py", b"x"),
        row(SO, b"elf"),
        row("img2gray-0.1.0.data/platlib/img2gray_extra.py", b"y"),
        row("img2gray-0.1.0.data/scripts/img2gray-cli", b"#!python"),
        row(f"{DIST}/METADATA", b"meta"),
        (f"{DIST}/RECORD", "", ""),
    ]
    installed = [
        row("img2gray/__init__.py", b"x"),
        row(SO, b"elf"),
        row("img2gray_extra.py", b"y"),
        row("../../../bin/img2gray-cli", b"#!/venv/bin/python"),
        row("img2gray/__pycache__/__init__.cpython-311.pyc", b"pyc"),
        row(f"{DIST}/METADATA", b"meta"),
        *(row(f"{DIST}/{name}", b"b") for name in ("INSTALLER", "REQUESTED", "direct_url.json")),
        row(f"{DIST}/uv_cache.json", b"{}"),
        (f"{DIST}/RECORD", "", ""),
    ]
    assert own_files(wheel) == own_files(installed)
    assert set(own_files(wheel)) == {
        "img2gray/__init__.py",
        SO,
        "img2gray_extra.py",
        f"{DIST}/METADATA",
    }
    assert files_digest(own_files(wheel)) == files_digest(own_files(installed))
    rebuilt = own_files([row(SO, b"elf, rebuilt"), row("img2gray/new.py", b"")])
    assert differences(own_files(installed), rebuilt) == (
        f"{DIST}/METADATA",
        "img2gray/__init__.py",
        SO,
        "img2gray/new.py",
        "img2gray_extra.py",
    )
    assert files_digest(rebuilt) != files_digest(own_files(wheel))


FILES = {SO: record_hash(b"elf")}
OTHER = {SO: record_hash(b"elf, rebuilt")}


@pytest.mark.parametrize(
    ("before", "reinstall", "action"),
    [
        (None, False, "install"),
        (None, True, "install"),
        (Installed("0.0.9+" + LABEL, "/site", FILES), False, "replace"),
        (Installed(VERSION, "/site", FILES), False, "keep"),
        (Installed(VERSION, "/site", FILES), True, "reinstall"),
        (Installed(VERSION, "/site", OTHER), False, "reinstall"),
        (Installed(VERSION, "/site", FILES, altered=(SO,)), False, "reinstall"),
        (Installed("not a version", "/site", FILES), False, "replace"),
    ],
)
def test_what_is_done_with_what_is_installed(
    before: Installed | None, reinstall: bool, action: str
) -> None:
    assert decide(before, Version(VERSION), FILES, reinstall=reinstall) == action


# -- the target interpreter's report (a real interpreter, files written by hand) ---------------


def test_the_environment_report_checks_the_files_on_disk(tmp_path: Path) -> None:
    venv = QuickVenv(tmp_path / "venv")
    site = venv.purelib
    files = {"img2gray/__init__.py": b"x = 1\n", SO: b"elf", f"{DIST}/METADATA": b""}
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
    (site / DIST / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: img2gray\nVersion: {VERSION}\n"
    )
    rows = [row(p, (site / p).read_bytes()) for p in files]
    (site / DIST / "RECORD").write_bytes(format_record([*rows, (f"{DIST}/RECORD", "", "")]))
    (site / "relu-1.0.dist-info").mkdir()
    (site / "relu-1.0.dist-info" / "METADATA").write_text("Name: relu\nVersion: 1.0\n")
    (site / "relu-1.0.dist-info" / "RECORD").write_text('"unclosed\n')

    env = read_environment(venv.python, ["img2gray", "relu", "absent"])
    assert env.torch is None and env.builds["absent"] is None
    found = env.builds["img2gray"]
    assert found is not None and found.version == VERSION and Path(found.location) == site
    assert found.files == own_files(rows) and found.altered == ()
    relu = env.builds["relu"]
    assert relu is not None and relu.altered and "RECORD" in relu.altered[0]

    (site / SO).write_bytes(b"edited after the install")
    (site / "img2gray" / "__init__.py").unlink()
    found = read_environment(venv.python, ["img2gray"]).builds["img2gray"]
    assert found is not None and found.altered == ("img2gray/__init__.py", SO)
    assert not found.is_build(Version(VERSION), own_files(rows))


# -- the service, every process scripted: which pip runs, and the read-back ------------------


class Target:
    """A scripted target interpreter: torch 2.14.1+cpu, and ``builds`` (project -> RECORD rows
    and version) as the environment report gives them, before and after pip."""

    def __init__(self, tmp_path: Path, before: dict[str, tuple[str, list[Row]]]) -> None:
        self.python = str(tmp_path / "py")
        self.site = tmp_path / "site"
        self.reports = [before]  # the last one answers every later report
        self.after: dict[str, tuple[str, list[Row]]] | None = None
        self.runner = ScriptedRunner(self.answer)

    def answer(self, cmd: list[str], cwd: Path | None) -> Reply:
        if is_torch_probe(cmd):
            tags = ("cp311-cp311-linux_x86_64", "cp310-abi3-linux_x86_64")
            return torch_probe_reply(self.python, self.site, tags=tags)
        if len(cmd) > 2 and "KERNELWHEEL-INSTALLED" in cmd[2]:
            state = self.reports.pop(0) if len(self.reports) > 1 else self.reports[0]
            builds = {
                name: (
                    {
                        "version": state[name][0],
                        "location": str(self.site),
                        "altered": [],
                        "record": format_record(state[name][1]).decode(),
                    }
                    if name in state
                    else None
                )
                for name in json.loads(cmd[3])
            }
            out = {"torch": "2.14.1+cpu", "builds": builds}
            return Reply(stdout="KERNELWHEEL-INSTALLED " + json.dumps(out) + "\n")
        if cmd[1:4] == ["-m", "pip", "install"]:
            if self.after is not None:
                self.reports = [self.after]
            return Reply(stdout="Successfully installed\n")
        raise AssertionError(f"unexpected command {cmd}")

    @property
    def pip_runs(self) -> list[list[str]]:
        return [c for c in self.runner.commands if c[1:4] == ["-m", "pip", "install"]]

    def install(self, *args: str) -> int:
        return main(["install", "--python", self.python, "--no-index", *args], self.runner)


@pytest.fixture
def house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    kernel_wheel(tmp_path / "wh", LABEL)
    kernel_wheel(tmp_path / "wh", LABEL, name="relu")
    return tmp_path / "wh"


def records(house: Path) -> dict[str, list[Row]]:
    return {w.name.split("-")[0]: read_record(w) for w in house.glob("*.whl")}


def rebuilt(rows: list[Row]) -> list[Row]:
    """The RECORD of a build of the same version whose extension has other bytes."""
    return [row(PY, b"another build") if path == PY else (path, h, n) for path, h, n in rows]


def test_the_same_build_installed_runs_no_pip(
    tmp_path: Path, house: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = records(house)["img2gray"]
    target = Target(tmp_path, {"img2gray": (VERSION, [*wheel, row(f"{DIST}/INSTALLER", b"pip")])})
    assert target.install("img2gray", "-f", str(house)) == 0
    out = capsys.readouterr().out
    digest = files_digest(own_files(wheel))
    assert f"already installed: {VERSION} in {target.site}, the same files " in out
    assert f"(files sha256 {digest})" in out and "nothing to install: pip not run" in out
    assert target.pip_runs == []


def test_dry_run_shows_the_forced_command_first_then_the_pinned_one(
    tmp_path: Path, house: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """img2gray's installed build of the same version has other files (forced in, no torch
    pin, no dependencies); relu is not installed (the usual pinned command)."""
    target = Target(tmp_path, {"img2gray": (VERSION, rebuilt(records(house)["img2gray"]))})
    assert target.install("img2gray", "relu", "-f", str(house), "--dry-run", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    forced, pinned = report["commands"]
    img2gray, relu = report["packages"]
    assert "--force-reinstall" in forced and "--no-deps" in forced
    assert forced[-1] == img2gray["pin"] and not any(a.startswith("torch") for a in forced)
    assert pinned[-2:] == [relu["pin"], "torch==2.14.1+cpu"] and "--force-reinstall" not in pinned
    assert img2gray["action"] == "reinstall" and relu["action"] == "install"
    assert img2gray["previous"]["changed"] == [PY]
    assert img2gray["previous"]["files_sha256"] != img2gray["files_sha256"]
    assert relu["previous"] is None and target.pip_runs == []

    assert target.install("img2gray", "-f", str(house), "--dry-run") == 0
    out = capsys.readouterr().out
    assert "would be replaced " + VERSION in out and "  before: files sha256 " in out
    (command,) = [line for line in out.splitlines() if "pip" in line and "install" in line]
    assert "--force-reinstall" in shlex.split(command) and target.pip_runs == []


def test_a_tvm_ffi_build_alone_is_installed_without_pinning_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tvm-ffi build into a venv holding torch: pip's line carried ``torch==2.14.1+cpu``, a
    requirement on torch the kernel does not have; beside a torch build, torch stays pinned."""
    isolate(monkeypatch)
    house = tmp_path / "wh"
    files = {"img2gray/__init__.py": b""}
    tag = Tag("cp310", "abi3", "linux_x86_64")
    deps = ("apache-tvm-ffi<0.2,>=0.1",)
    write_wheel(WheelSpec("img2gray", "0.1.0+tvmffi0.1.cpu", tag, files, requires_dist=deps), house)
    kernel_wheel(house, LABEL, name="relu")
    target = Target(tmp_path, {})
    assert target.install("img2gray", "-f", str(house), "--dry-run", "--json") == 0
    (command,) = json.loads(capsys.readouterr().out)["commands"]
    assert command[-1].startswith("img2gray @ file://") and "tvmffi0.1.cpu-" in command[-1]
    assert not any(a.startswith("torch") for a in command), command
    assert target.install("img2gray", "relu", "-f", str(house), "--dry-run", "--json") == 0
    (command,) = json.loads(capsys.readouterr().out)["commands"]
    assert command[-1] == "torch==2.14.1+cpu"


def test_a_build_pip_did_not_install_is_an_error_not_a_success(
    tmp_path: Path, house: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip exits 0 but the environment still holds the old build (what a pip that skips the
    same version leaves): exit 10, named, never "installed"."""
    stale = rebuilt(records(house)["img2gray"])
    target = Target(tmp_path, {"img2gray": (VERSION, stale)})
    target.after = {"img2gray": (VERSION, stale)}
    assert target.install("img2gray", "-f", str(house)) == 10
    captured = capsys.readouterr()
    assert len(target.pip_runs) == 1 and "installed with" not in captured.out
    assert f"pip ran, but {target.python} does not hold img2gray-{VERSION}-" in captured.err
    assert f"files differ from the wheel's: {PY}\n" in captured.err

    target = Target(tmp_path, {})
    target.after = {"img2gray": ("0.0.9", stale)}
    assert target.install("img2gray", "-f", str(house)) == 10
    assert f"it finds version 0.0.9 in {target.site}" in capsys.readouterr().err


def test_another_version_is_replaced_by_the_pinned_run_and_read_back(
    tmp_path: Path, house: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = records(house)["img2gray"]
    target = Target(tmp_path, {"img2gray": ("0.0.9", [row(PY, b"0.0.9")])})
    target.after = {"img2gray": (VERSION, [*wheel, row(f"{DIST}/INSTALLER", b"pip")])}
    assert target.install("img2gray", "-f", str(house)) == 0
    out = capsys.readouterr().out
    old, new = files_digest({PY: record_hash(b"0.0.9")}), files_digest(own_files(wheel))
    assert f"  replaced 0.0.9 in {target.site} with {VERSION}\n" in out
    assert f"    before: files sha256 {old}\n    after:  files sha256 {new}\n" in out
    (pip,) = target.pip_runs
    assert pip[-1] == "torch==2.14.1+cpu" and "--force-reinstall" not in pip
    assert f"installed with: {shlex.join(pip)}" in out
