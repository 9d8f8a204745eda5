"""Build environments: digests and the ready-marker that caches the environment's probe."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.runners import Reply, ScriptedRunner, is_torch_probe, torch_probe_reply

from kernelwheel.model.sources import PipSources
from kernelwheel.toolchain import envs
from kernelwheel.toolchain.envs import EnvInfo, EnvSpec, provision, torch_install_error, unreachable

SPEC = EnvSpec(torch_requirement="torch===2.14.1", packages=("nvidia-cuda-nvcc==13.0.88",))


def test_digest_depends_on_every_input() -> None:
    base = SPEC.digest("3.11")
    assert base == EnvSpec("torch===2.14.1", ("nvidia-cuda-nvcc==13.0.88",)).digest("3.11")
    assert SPEC.digest("3.12") != base
    assert EnvSpec("torch===2.13.0", SPEC.packages).digest("3.11") != base
    links = PipSources(find_links=("/w",))
    assert EnvSpec(SPEC.torch_requirement, (), links).digest("3.11") != base


def _ready_env(tmp_path: Path) -> Path:
    root = tmp_path / "envs" / f"py3.11-{SPEC.digest('3.11')}"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")  # must not be run
    return root


def test_ready_environment_is_reused_from_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _ready_env(tmp_path)
    info = EnvInfo(
        root / "bin" / "python", "3.11", "x86_64", root / "lib", "2.14.1+cu130", "13.0", None, True
    )
    envs._write_marker(root / envs.READY_MARKER, info)
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))

    runner = ScriptedRunner(lambda cmd, cwd: Reply(code=127))
    got = provision(SPEC, tmp_path, runner=runner)
    assert got.reused and got.torch == "2.14.1+cu130" and got.cuda == "13.0"
    assert runner.commands == []  # a ready environment is not probed again


def test_old_marker_is_probed_once_and_upgraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _ready_env(tmp_path)
    (root / envs.READY_MARKER).write_text(json.dumps({"torch": "2.14.1"}))
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))
    runner = ScriptedRunner(
        lambda cmd, cwd: torch_probe_reply(cmd[0], root / "lib", torch="2.14.1")
    )
    assert provision(SPEC, tmp_path, runner=runner).reused
    assert provision(SPEC, tmp_path, runner=runner).torch == "2.14.1"
    assert len(runner.commands) == 1 and is_torch_probe(runner.commands[0])


def test_a_marker_copied_from_another_cache_is_probed_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache copied or moved (a CI cache restored under another path) keeps the probe of
    where it was made; while that place still exists, its interpreter and torch headers would
    be another environment's. The environment is probed again where it is, once."""
    root = _ready_env(tmp_path / "now")
    old = _ready_env(tmp_path / "before")
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))
    python, lib = old / "bin" / "python", old / "lib"
    info = EnvInfo(python, "3.11", "x86_64", lib, "2.14.1", None, None, cxx11_abi=True)
    envs._write_marker(root / envs.READY_MARKER, info)
    runner = ScriptedRunner(
        lambda cmd, cwd: torch_probe_reply(cmd[0], root / "lib", torch="2.14.1")
    )
    got = provision(SPEC, tmp_path / "now", runner=runner)
    assert (got.python, got.purelib) == (root / "bin" / "python", root / "lib")
    assert provision(SPEC, tmp_path / "now", runner=runner).python == root / "bin" / "python"
    assert len(runner.commands) == 1 and runner.commands[0][0] == str(root / "bin" / "python")


def _remake(tmp_path: Path, info: EnvInfo) -> Callable[[list[str], Path | None], Reply]:
    """A host on which `python -m venv` makes the environment with torch (as venv and pip
    would), pip succeeds and the probe reports ``info``'s torch."""

    def answer(cmd: list[str], cwd: Path | None) -> Reply:
        if "venv" in cmd:
            _env_with_torch(tmp_path)
        if is_torch_probe(cmd):
            return torch_probe_reply(cmd[0], info.purelib, torch=info.torch, cuda=info.cuda)
        return Reply()

    return answer


# What pip installs in the fake environment, as the distributions' RECORDs list it.
_INSTALLED = {
    "torch-2.14.1.dist-info": {
        "torch/include/ATen/core/Tensor.h": b"// header\n",
        "torch/include/torch/extension.h": b"// header\n",
        "torch/lib/libtorch.so": b"\x7fELF",
        "torch/__init__.py": b"",  # outside the folders a compile needs: not promised
    },
    "nvidia_cuda_runtime-13.0.96.dist-info": {
        "nvidia/cu13/lib/libcudart.so.13": b"\x7fELF runtime",
    },
}


def _env_with_torch(tmp_path: Path) -> tuple[Path, Path, EnvInfo]:
    root = _ready_env(tmp_path)
    purelib = root / "lib" / "python3.11" / "site-packages"
    for dist, files in _INSTALLED.items():
        rows = []
        for rel, data in files.items():
            (purelib / rel).parent.mkdir(parents=True, exist_ok=True)
            (purelib / rel).write_bytes(data)
            rows.append(f"{rel},sha256=x,{len(data)}\n")
        (purelib / dist).mkdir()
        (purelib / dist / "RECORD").write_text("".join(rows) + f"{dist}/RECORD,,\n")
    info = EnvInfo(root / "bin" / "python", "3.11", "x86_64", purelib, "2.14.1", "13.0", None, True)
    envs._write_marker(root / envs.READY_MARKER, info)
    return root, purelib, info


def test_a_damaged_environment_is_made_again_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: torch's include/ gone from a ready environment: not trusted (its compile
    would fail as the user's error); the marker's manifest tells, the environment is made
    again and the build says why."""
    root, purelib, info = _env_with_torch(tmp_path)
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))
    marker = json.loads((root / envs.READY_MARKER).read_text())
    assert marker["installed"] == {
        "nvidia_cuda_runtime-13.0.96.dist-info": 1,
        "torch-2.14.1.dist-info": 3,
    }
    # and the counts an older kernelwheel sharing the cache checks
    assert marker["manifest"] == {"nvidia": 1, "torch/include": 2, "torch/lib": 1}
    assert provision(SPEC, tmp_path).reused  # whole: reused, not probed

    import shutil

    shutil.rmtree(purelib / "torch" / "include")
    runner = ScriptedRunner(_remake(tmp_path, info))
    got = provision(SPEC, tmp_path, runner=runner)
    commands = runner.commands
    assert any("venv" in c for c in commands) and any("pip" in " ".join(c) for c in commands)
    (note,) = got.notes
    assert "is damaged (torch/include/ATen/core/Tensor.h is missing)" in note
    assert "made again" in note


def _remade(tmp_path: Path, info: EnvInfo) -> str | None:
    """Provision the fake environment once more: the note of its remaking, None when reused."""
    runner = ScriptedRunner(_remake(tmp_path, info))
    got = provision(SPEC, tmp_path, runner=runner)
    assert got.reused == (runner.commands == [])
    return None if got.reused else got.notes[-1]


def test_a_file_a_build_adds_never_remakes_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, 11: a compile adds files under nvidia/ (the unversioned libcudart link, nvcc's
    own); only what the install wrote is promised, so the next build reuses the environment;
    a promised file removed or truncated, or a RECORD gone, still remakes it."""
    _, purelib, info = _env_with_torch(tmp_path)
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))
    (purelib / "nvidia/cu13/lib/libcudart.so").symlink_to("libcudart.so.13")
    (purelib / "nvidia/cu13/bin").mkdir()
    (purelib / "nvidia/cu13/bin/nvcc.profile.cache").write_text("added by a compile\n")
    (purelib / "torch/include/extra.h").write_text("// generated\n")
    assert _remade(tmp_path, info) is None
    assert _remade(tmp_path, info) is None  # and again (the marker was not rewritten)

    (purelib / "nvidia/cu13/lib/libcudart.so.13").write_bytes(b"\x7fEL")  # truncated
    note = _remade(tmp_path, info)
    assert note is not None
    assert "nvidia/cu13/lib/libcudart.so.13 has 3 of the 12 bytes" in note
    assert "nvidia_cuda_runtime-13.0.96.dist-info installed" in note

    assert _remade(tmp_path, info) is None  # the remade environment is whole again
    (purelib / "torch-2.14.1.dist-info" / "RECORD").unlink()
    note = _remade(tmp_path, info)
    assert note is not None and "torch-2.14.1.dist-info/RECORD is gone" in note


def test_a_marker_of_an_older_kernelwheel_gets_the_new_promise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marker with the counting manifest of the previous release (which a compile's file
    broke) is trusted once and rewritten with the RECORD promise, not remade."""
    root, _, info = _env_with_torch(tmp_path)
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))
    marker = json.loads((root / envs.READY_MARKER).read_text())
    del marker["installed"]
    marker["manifest"] = {"nvidia": 0, "torch/include": 2}
    (root / envs.READY_MARKER).write_text(json.dumps(marker))
    assert _remade(tmp_path, info) is None
    assert "installed" in json.loads((root / envs.READY_MARKER).read_text())


def test_a_dead_runs_lock_owner_is_cleared_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A half-made environment whose lock's owner file names a dead run: the next run says so
    and makes the environment again."""
    root = tmp_path / "envs" / f"py3.11-{SPEC.digest('3.11')}"
    (root / "bin").mkdir(parents=True)  # half-made: no ready marker
    owner = root.parent / f"{root.name}.lock.owner"
    owner.write_text(json.dumps({"pid": 999999999, "start": None, "groups": []}))
    monkeypatch.setattr(envs.sys, "version_info", (3, 11, 0))

    _, _, info = _env_with_torch(tmp_path / "model")
    got = provision(SPEC, tmp_path, runner=ScriptedRunner(_remake(tmp_path, info)))
    (note,) = got.notes
    assert "a run that died (pid 999999999) held this lock" in note
    assert not owner.exists()  # released with the lock


# -- a torch pip cannot get: the message names the package and the index ----------------------

# What pip prints (no -v) when PyTorch's index is unreachable: nothing about the index.
PIP_TAIL = """\
Looking in indexes: https://pypi.org/simple, https://download.pytorch.org/whl/cpu
ERROR: Could not find a version that satisfies the requirement torch==2.14.1+cpu (from versions: \
2.13.0)
ERROR: No matching distribution found for torch==2.14.1+cpu
"""
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_a_cpu_torch_pip_cannot_get_names_pytorchs_index() -> None:
    spec = EnvSpec("torch==2.14.1+cpu", sources=PipSources(extra_index_urls=(CPU_INDEX,)))
    down = {CPU_INDEX: "[Errno -2] Name or service not known"}
    error = torch_install_error(spec, "failed to install torch==2.14.1+cpu: exit 1", PIP_TAIL, down)
    message, hint = error.message, error.hint or ""
    assert f"pip found no torch==2.14.1+cpu in https://pypi.org/simple, {CPU_INDEX}" in message
    assert f"{CPU_INDEX} is unreachable: [Errno -2] Name or service not known" in message
    assert "pip: ERROR: No matching distribution found for torch==2.14.1+cpu" in message
    assert f"published on PyTorch's index {CPU_INDEX}, not on PyPI" in hint
    assert f"this machine cannot reach {CPU_INDEX}" in hint and "--find-links DIR" in hint
    assert "check the index/find-links options" not in str(error)


def test_an_unreachable_index_of_ones_own_is_named() -> None:
    mirror = PipSources("https://mirror.example/simple", ("/w",))
    spec = EnvSpec("torch==2.14.1", sources=mirror)
    down = {"https://mirror.example/simple": "timed out"}
    error = torch_install_error(spec, "failed", "", down)
    assert "in https://mirror.example/simple, --find-links /w" in error.message
    assert "let this machine reach https://mirror.example/simple and --find-links /w" in (
        error.hint or ""
    )
    offline_spec = EnvSpec("torch==2.14.1", sources=PipSources(no_index=True))
    offline = torch_install_error(offline_spec, "failed", "", {})
    assert "nothing (--no-index without --find-links)" in offline.message


def test_unreachable_tells_no_answer_from_an_http_error(tmp_path: Path) -> None:
    import http.server
    import socket
    import threading

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert unreachable(f"http://127.0.0.1:{port}/simple/", timeout=5) is not None
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:  # a 404 is an answer: the index is there
        assert unreachable(f"http://127.0.0.1:{server.server_port}/no/such/", timeout=5) is None
    finally:
        server.shutdown()
        server.server_close()
