"""``kernelwheel install`` of a rebuilt wheel of the installed version (issue 37, item 3).

Evidence first, with real pip: a rebuild of the installed version is "already satisfied", the
old build stays. Then ``kernelwheel install`` replaces it (the op's result changes), says
"already installed" without running pip when the files are the same, and reinstalls with
``--reinstall``. The builds are real compiled extensions that differ in one line (gcc, under a
second); torch is a fake distribution (tests/support/installkit.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.installkit import (
    NAMESPACE,
    add_one_extension,
    installed,
    isolate,
    isolated_env,
    kernel_wheel,
    torch_wheel,
    venv_with_torch,
)
from support.runners import RecordingRunner
from support.venvs import pip_command, run_pip

from kernelwheel.cli import main
from kernelwheel.install.installed import files_digest, own_files
from kernelwheel.wheels.reader import read_record

pytestmark = pytest.mark.integration

LABEL = "torch2.14.cpu.cxx11"
VERSION = f"0.1.0+{LABEL}"
ADD_ONE = f"from img2gray import {NAMESPACE} as ext; print(ext.add_one(41))"
SO = f"img2gray/{NAMESPACE}.abi3.so"


def test_a_rebuild_of_the_installed_version_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    isolate(monkeypatch)
    # The first build has a bug (adds 2), the rebuild fixes it: same name, version and tags.
    first = kernel_wheel(tmp_path / "first", LABEL, extension=add_one_extension(tmp_path, 2))
    fixed = kernel_wheel(tmp_path / "fixed", LABEL, extension=add_one_extension(tmp_path, 1))
    assert first.name == fixed.name and first.read_bytes() != fixed.read_bytes()
    venv = venv_with_torch(tmp_path / "venv", torch_wheel(tmp_path / "torch", "2.14.1+cpu", None))

    def kw(folder: Path, *args: str, runner: RecordingRunner | None = None) -> int:
        argv = ["install", "img2gray", "-f", str(folder), "--no-index", "--python"]
        return main([*argv, str(venv.python), *args], runner)

    assert kw(first.parent) == 0
    assert f"  installed {VERSION}: files sha256 " in capsys.readouterr().out
    assert venv.run("-c", ADD_ONE).stdout.strip() == "43"

    # Evidence: plain pip skips the rebuild and keeps the buggy build.
    plain = pip_command(venv.python, "--no-index", f"img2gray @ {fixed.as_uri()}")
    assert "already satisfied" in run_pip(plain, env=isolated_env()).stdout
    assert venv.run("-c", ADD_ONE).stdout.strip() == "43"

    old, new = (files_digest(own_files(read_record(w))) for w in (first, fixed))
    assert kw(fixed.parent) == 0
    out = capsys.readouterr().out
    assert f"  replaced {VERSION} in {venv.purelib}: same version, other files: {SO}\n" in out
    assert f"    before: files sha256 {old}\n    after:  files sha256 {new}\n" in out
    assert "--force-reinstall --no-deps" in out and "torch==" not in out.split("installed with")[1]
    assert venv.run("-c", ADD_ONE).stdout.strip() == "42"  # the fixed op runs
    assert installed(venv) == {"torch": "2.14.1+cpu", "img2gray": VERSION}

    # The same files again: nothing to do, and pip does not run.
    runner = RecordingRunner()
    assert kw(fixed.parent, "--json", runner=runner) == 0
    report = json.loads(capsys.readouterr().out)
    (pkg,) = report["packages"]
    assert report["status"] == "already-installed" and report["commands"] == []
    assert pkg["action"] == "keep" and pkg["previous"]["files_sha256"] == new == pkg["files_sha256"]
    assert not [cmd for cmd in runner.commands if "pip" in cmd]

    # --reinstall forces it in: pip writes the extension again (a new file, a new inode).
    so = Path(pkg["previous"]["location"]) / SO
    inode = so.stat().st_ino
    assert kw(fixed.parent, "--reinstall") == 0
    out = capsys.readouterr().out
    assert f"reinstalled (--reinstall): {VERSION} in {venv.purelib}, the same files" in out
    assert so.stat().st_ino != inode
    assert venv.run("-c", ADD_ONE).stdout.strip() == "42"
    assert installed(venv) == {"torch": "2.14.1+cpu", "img2gray": VERSION}
