"""--json on every command that writes wheels or indexes (build, to-wheel, index, lock,
download): stdout holds the JSON alone (progress goes to stderr), each wheel with its path,
variant, sha256, status and log; to-wheel, lock and download keep a log, and a failure names it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.gitrepo import HubRepo, make_repo
from support.variants import TORCH27_CU128 as CU128
from support.variants import TORCH214_CPU as CPU
from support.variants import TORCH214_CU130 as CU130

import kernelwheel.builder.service as build_service
from kernelwheel._util import Runner
from kernelwheel.builder import preflight
from kernelwheel.builder.request import BuildRequest, BuiltWheel
from kernelwheel.cli import main
from kernelwheel.errors import HubError, ProjectError
from kernelwheel.log import Reporter, step

IMG2GRAY = Path(__file__).resolve().parents[2] / "kernels" / "img2gray"
VARIANTS = (CU130, CU128, "torch-cuda")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_json(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> Any:
    assert main(list(args)) == code, capsys.readouterr().err
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # the whole of stdout is the JSON
    return data, captured.err


# -- build -----------------------------------------------------------------------------------


def _fake_build(req: BuildRequest, reporter: Reporter, runner: Runner) -> BuiltWheel:
    """Stands in for build_and_export: reports a step, writes the log and a wheel file."""
    req.log.parent.mkdir(parents=True, exist_ok=True)
    req.log.write_text("compiler output\n")
    with step(reporter, req.variant.name, "compile", log=req.log):
        wheel = req.outputs.out_dir / f"img2gray-0.1.0+{req.variant.local_version}-cp310-abi3-x.whl"
        wheel.write_bytes(req.variant.name.encode())
    return BuiltWheel(req.variant, wheel, "ns", req.log)


def test_build_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build_service, "build_and_export", _fake_build)
    # the build is faked: PyTorch's CPU index counts as reachable (builder.preflight asks it)
    monkeypatch.setattr(preflight, "_unreachable", lambda url: None)
    out = tmp_path / "wh"
    args = ["build", str(IMG2GRAY), "--json", "-o", str(out), "--variant", "torch21{3,4}-*cpu-x*"]
    data, err = run_json(capsys, *args)
    assert data["command"] == "build" and data["ok"] is True and data["version"] == "0.1.0"
    assert [w["variant"] for w in data["wheels"]] == ["torch213-cxx11-cpu-x86_64-linux", CPU]
    for entry in data["wheels"]:
        path = Path(entry["path"])
        assert entry["status"] == "built" and path.parent == out
        assert entry["sha256"] == sha256(path) and entry["size"] == path.stat().st_size
        assert entry["log"] == str(out / "logs" / f"{entry['variant']}.log")
        assert entry["error"] is None and entry["exit_code"] == 0
    assert f"{CPU}: compile" in err  # progress went to stderr


def test_build_json_reports_a_failure_with_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "wh"
    args = ["build", str(IMG2GRAY), "--json", "-o", str(out), "--variant", CPU]
    data, err = run_json(capsys, *args, "--python", "/no/python", code=5)
    assert data["ok"] is False
    (entry,) = data["wheels"]
    assert entry["status"] == "failed" and entry["path"] is None and entry["sha256"] is None
    assert entry["log"] == str(out / "logs" / f"{CPU}.log") and Path(entry["log"]).is_file()
    assert "/no/python" in entry["error"] and entry["exit_code"] == 5
    assert f"log: {entry['log']}" in err


# -- to-wheel and index ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> HubRepo:
    return make_repo(tmp_path_factory.mktemp("json") / "img2gray", VARIANTS, so_cache=so_cache)


def test_to_wheel_json_and_its_log(
    repo: HubRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "wh"
    data, err = run_json(
        capsys, "to-wheel", str(repo.root), "1.1.2", "-o", str(out), "--json",
        "--variant", "torch2{14,7}-*",
    )  # fmt: skip
    log = out / "logs" / "to-wheel-img2gray.log"
    assert data["command"] == "to-wheel" and data["ok"] is True and data["log"] == str(log)
    assert data["revision"].startswith("1.1.2 -> tag v1.1.2")
    by = {w["variant"]: w for w in data["wheels"]}
    assert {v: by[v]["status"] for v in VARIANTS} == {
        CU130: "written",
        CU128: "written",
        "torch-cuda": "not-selected",
    }
    for variant in (CU130, CU128):
        path = Path(by[variant]["path"])
        assert path.parent == out and by[variant]["sha256"] == sha256(path)
        assert by[variant]["log"] == str(log) and by[variant]["abi"] == "ok"
    assert f"{CU130}: wheel" in err  # progress on stderr
    text = log.read_text()
    assert text.startswith("kernelwheel ") and f"{CU130}: ABI check" in text
    assert "revision: 1.1.2 -> tag v1.1.2" in text


def test_to_wheel_failure_names_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], so_cache: Path
) -> None:
    empty = make_repo(tmp_path / "img2gray", (), so_cache=so_cache)
    out = tmp_path / "wh"
    assert main(["to-wheel", str(empty.root), "1.1.2", "-o", str(out)]) == HubError.exit_code
    err = capsys.readouterr().err
    log = out / "logs" / "to-wheel-img2gray.log"
    assert "has no build/ folder" in err and f"log: {log}" in err
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "error: " in text  # kept in full


def test_index_json(repo: HubRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    house = tmp_path / "wh"
    assert main(["to-wheel", str(repo.root), "1.1.2", "-o", str(house), "-q"]) == 0
    capsys.readouterr()
    data, _ = run_json(capsys, "index", str(house), "--output", str(tmp_path / "site"), "--json")
    assert data["command"] == "index" and data["output"] == str(tmp_path / "site")
    by = {w["variant"]: w for w in data["wheels"]}
    assert set(by) == set(VARIANTS)
    for entry in by.values():
        assert entry["status"] == "indexed" and entry["sha256"] == sha256(Path(entry["path"]))
        assert "all" in entry["flavours"]
    assert "cu130" in by[CU130]["flavours"] and "cu128" in by[CU128]["flavours"]
    assert data["flavours"]["all"] == 3


# -- lock and download -----------------------------------------------------------------------


@pytest.fixture
def project(repo: HubRepo, tmp_path: Path) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.kernelwheel.dependencies]\n'
        f'"drbh/img2gray" = {{ version = ">=1.1,<2", path = "{repo.root}" }}\n'
    )
    return app


def test_lock_and_download_json_and_logs(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    data, _ = run_json(capsys, "lock", str(project), "--json", "--cache-dir", str(cache))
    (lock_log,) = (cache / "logs").glob("lock-app-*.log")
    assert data["command"] == "lock" and data["written"] is True and data["log"] == str(lock_log)
    locked = {w["variant"]: w for w in data["wheels"]}
    assert set(locked) == set(VARIANTS)
    assert all(w["status"] == "locked" and len(w["sha256"]) == 64 for w in locked.values())
    assert "drbh/img2gray" in lock_log.read_text()

    house = tmp_path / "house"
    data, err = run_json(
        capsys, "download", str(project), "--wheelhouse", str(house), "--json",
        "--cache-dir", str(cache), "--variant", "torch2{14,7}-*", "--variant", "torch-cuda",
    )  # fmt: skip
    (download_log,) = (cache / "logs").glob("download-app-*.log")
    assert data["command"] == "download" and data["log"] == str(download_log)
    assert data["requirements"] == str(house / "requirements.txt")
    by = {w["variant"]: w for w in data["wheels"]}
    assert set(by) == set(VARIANTS)
    for variant, entry in by.items():
        path = Path(entry["path"])
        assert entry["status"] == "verified" and path.parent == house
        assert entry["sha256"] == sha256(path) == locked[variant]["sha256"]
        assert entry["log"] == str(download_log)
    assert not (house / "logs").exists()  # the wheelhouse holds wheels and their lists only


def test_lock_and_download_failures_name_their_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text('[project]\nname = "app"\n')
    cache = tmp_path / "cache"
    house = tmp_path / "house"
    code = main(["download", str(app), "--wheelhouse", str(house), "--cache-dir", str(cache)])
    assert code == ProjectError.exit_code
    (log,) = (cache / "logs").glob("download-app-*.log")
    err = capsys.readouterr().err
    assert "kernelwheel.lock: not found" in err and f"log: {log}" in err
    assert "Traceback" in log.read_text() and not house.exists()
    assert main(["lock", str(app), "--cache-dir", str(cache)]) == ProjectError.exit_code
    (log,) = (cache / "logs").glob("lock-app-*.log")
    assert f"log: {log}" in capsys.readouterr().err
