"""Issue 30's reproductions at the CLI: names that shadow core packages, files and folders
where the other is expected, read-only caches, --json documents for whole-command failures, dry
runs that refuse what the build refuses. Each ends with its documented exit code and message,
no traceback, nothing half-written."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.kinds import NOARCH_BUILD_TOML, write_noarch_project
from support.tinykernel import write_tiny_kernel

from kernelwheel._util import replace_dir
from kernelwheel.cli import main
from kernelwheel.errors import UsageError
from kernelwheel.model.variant import Arch

CPU = f"torch213-cxx11-cpu-{Arch.host().value}-linux"  # buildable offline here


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.out, captured.err


def _project(root: Path, name: str = "nk-kernel", extra: str = "") -> Path:
    package = root / "torch-ext" / name.replace("-", "_")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "k.cpp").write_text("")
    (root / "build.toml").write_text(
        f'[general]\nname = "{name}"\nbackends = ["cpu", "cuda"]\n'
        '[torch]\nsrc = ["csrc/k.cpp"]\n'
        '[kernel.k]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["csrc/k.cpp"]\n' + extra
    )
    return root


# -- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["torch", "triton", "numpy", "pip", "setuptools", "kernels", "kernelwheel", "json"]
)
def test_init_refuses_names_that_shadow(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "init", name, "--directory", str(tmp_path))
    assert code == UsageError.exit_code and "would shadow" in err, err
    assert f"{name}-kernel" in err  # the fix names one that is allowed
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["torch", "numpy", "setuptools", "kernels", "asyncio"])
def test_build_toml_general_name_that_shadows_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "p", name)
    code, _, err = _run(capsys, "build", str(project), "--print-build-identifiers")
    assert code == 3 and "general.name" in err and "would shadow" in err, err


def test_init_blames_the_name_not_the_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ['a"b', "a\\b", "x" * 300, "My_Kernel"]:
        code, _, err = _run(capsys, "init", name, "--directory", str(tmp_path))
        assert code == UsageError.exit_code, err
        assert "invalid TOML" not in err and ".kernelwheel-init" not in err, err
        assert "NAME" in err
    assert list(tmp_path.iterdir()) == []


def test_init_directory_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for directory in (afile, afile / "sub"):
        code, _, err = _run(capsys, "init", "ok-name", "--directory", str(directory))
        assert code == UsageError.exit_code and "--directory" in err, err
    assert afile.read_text() == "mine"


def test_a_noarch_kernel_named_like_a_pypi_package_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_noarch_project(tmp_path / "p", NOARCH_BUILD_TOML.replace("scale-noarch", "timm"))
    (root / "torch-ext" / "scale_noarch").rename(root / "torch-ext" / "timm")
    code, out, err = _run(capsys, "build", str(root), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert "well-known PyPI distribution" in out + err and "timm-kernel" in out + err
    # Another name: no warning.
    other = write_noarch_project(tmp_path / "q")
    code, out, err = _run(capsys, "build", str(other), "-o", str(tmp_path / "out2"))
    assert code == 0 and "well-known" not in out + err


def test_a_licence_that_is_no_spdx_expression_is_warned_and_still_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``license = "Apache 2.0"`` was written into METADATA as free text, unsaid."""
    text = NOARCH_BUILD_TOML.replace('license = "MIT"', 'license = "Apache 2.0"')
    root = write_noarch_project(tmp_path / "p", text)
    code, out, err = _run(capsys, "build", str(root), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert f"{root / 'build.toml'}: general.license 'Apache 2.0' is no SPDX" in out + err
    assert "did you mean Apache-2.0" in out + err
    assert len(list((tmp_path / "out").glob("*.whl"))) == 1


# -- files where folders are expected; read-only ---------------------------------------------------


@pytest.mark.parametrize("flag", ["--cache-dir", "-o", "--hub-layout"])
def test_build_folder_options_that_are_files_are_refused_first(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "p")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for value in (afile, afile / "below"):
        code, _, err = _run(capsys, "build", str(project), "--variant", CPU, flag, str(value))
        assert code == UsageError.exit_code and "not a folder" in err, err
        assert "environment" not in err  # refused before any step ran
    assert afile.read_text() == "mine"


def _read_only(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Make ``root`` behave as a read-only file system (as a CI cache mount): creating, opening
    for writing or renaming anything under it fails with EROFS. (The tests run as root, whom
    permission bits do not stop.)"""
    prefix = str(root)

    def under(path: Any) -> bool:
        try:
            return os.path.abspath(os.fsdecode(path)).startswith(prefix)
        except TypeError:
            return False

    def refuse(path: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))

    def wrap(fn: Callable[..., Any], writes: Callable[..., bool]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if args and under(args[0]) and writes(*args, **kwargs):
                refuse(args[0])
            return fn(*args, **kwargs)

        return guarded

    monkeypatch.setattr(os, "mkdir", wrap(os.mkdir, lambda *a, **k: True))
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT
    monkeypatch.setattr(
        os, "open", wrap(os.open, lambda p, flags, *a, **k: bool(flags & write_flags))
    )
    monkeypatch.setattr(os, "replace", wrap(os.replace, lambda *a, **k: True))
    import builtins
    import io

    def opener_writes(path: Any, mode: str = "r", *a: Any, **k: Any) -> bool:
        return any(c in mode for c in "wax+")

    monkeypatch.setattr(builtins, "open", wrap(builtins.open, opener_writes))
    monkeypatch.setattr(io, "open", wrap(io.open, opener_writes))


def test_read_only_folders_give_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "p")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "cache").mkdir()
    _read_only(monkeypatch, ro)
    runs = [
        ["init", "ok-name", "--directory", str(ro)],
        ["build", str(project), "--variant", CPU, "--version", "1.0.0", "--cache-dir", str(ro)],
        ["build", str(project), "--variant", CPU, "--version", "1.0.0", "-o", str(ro / "out")],
        ["to-wheel", str(project), "1", "-o", str(ro / "out")],
    ]
    for argv in runs:
        code, _, err = _run(capsys, *argv)
        assert code in (1, 2), (argv, err)
        assert "Read-only file system" in err and str(ro) in err, (argv, err)
        assert not list(ro.rglob(".kernelwheel-*")), "nothing half-written"
    # lock writes nothing before it has read the project (its log is made when its first step
    # starts, issue 38 family 10): this project's own problem comes first, and no log is named.
    code, _, err = _run(capsys, "lock", str(project), "--cache-dir", str(ro / "cache"))
    assert code == 3 and "log:" not in err, err
    assert not list(ro.rglob("*.log"))


def test_a_symlinked_variant_folder_is_never_replaced(tmp_path: Path) -> None:
    """--hub-layout's build/<variant>/ (or any folder replace_dir writes) that is a symlink:
    refused, the link and what it points to left as they were."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    final = tmp_path / "build" / "torch214-cxx11-cpu-x86_64-linux"
    final.parent.mkdir()
    final.symlink_to(elsewhere, target_is_directory=True)
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "new.txt").write_text("new")
    with pytest.raises(UsageError, match="is a symlink"):
        replace_dir(staging, final)
    assert final.is_symlink() and (elsewhere / "keep.txt").read_text() == "mine"
    assert not (elsewhere / "new.txt").exists()


# -- --json: one document, the error's when the command fails as a whole -------------------------


def _json_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    doc = json.loads(captured.out)
    assert isinstance(doc, dict)
    return code, doc


def test_json_error_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "build.toml").write_text('[general]\nname = "x y"\n')
    code, doc = _json_run(capsys, "build", str(bad), "--json", "-o", str(tmp_path / "o"))
    assert code == 3 and doc["ok"] is False and doc["command"] == "build"
    assert doc["error"]["kind"] == "ProjectError" and "general.name" in doc["error"]["message"]
    code, doc = _json_run(capsys, "matrix", str(bad), "--json")
    assert code == 3 and doc["exit_code"] == 3
    # An empty selection (the plan's reasons in the hint).
    project = _project(tmp_path / "p")
    code, doc = _json_run(capsys, "build", str(project), "--json", "--build", "torch299-*")
    assert code == 2 and "matches no variant" in doc["error"]["message"]
    # index with an input that is not a folder of wheels.
    afile = tmp_path / "afile"
    afile.write_text("")
    code, doc = _json_run(capsys, "index", str(afile), "-o", str(tmp_path / "site"), "--json")
    assert code != 0 and doc["ok"] is False and doc["command"] == "index"


# -- dry runs refuse what the build refuses ------------------------------------------------------


def test_dry_runs_refuse_an_unknown_dependency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "p")
    toml = project / "build.toml"
    toml.write_text(toml.read_text().replace('depends = ["torch"]', 'depends = ["cutlass_9_9"]'))
    code, _, err = _run(capsys, "matrix", str(project))
    assert code == 3 and "unknown dependency 'cutlass_9_9'" in err and "cutlass_3_9" in err
    code, _, err = _run(capsys, "build", str(project), "--print-build-identifiers")
    assert code == 3 and "unknown dependency" in err


def test_dry_runs_refuse_a_version_the_build_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a VERSION bumped to 1.0.0 while build.toml says API major 0: the build refuses it at
    # once, the dry runs printed the matrix (exit 0) and every job it fanned out failed
    project = write_tiny_kernel(tmp_path / "p", version=0)
    (project / "VERSION").write_text("1.0.0\n")
    for argv in (["matrix", str(project)], ["build", str(project), "--print-build-identifiers"]):
        code, out, err = _run(capsys, *argv)
        assert code == 3 and "has major 1, but the kernel's API major is 0" in err, argv
        assert out == ""
    (project / "VERSION").write_text("0.3.0\n")
    assert _run(capsys, "matrix", str(project))[0] == 0


def test_matrix_leaves_out_the_variants_whose_depends_the_build_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CUDA kernel that depends on sycl_tla (which kernelwheel cannot provide): the CUDA
    variants leave the matrix (rejected, with the build's reason); the CPU ones stay."""
    extra = '[kernel.g]\nbackend = "cuda"\ndepends = ["sycl_tla"]\nsrc = ["csrc/g.cu"]\n'
    project = _project(tmp_path / "p", extra=extra)
    (project / "csrc" / "g.cu").write_text("")
    code, doc = _json_run(capsys, "matrix", str(project), "--json")
    assert code == 0
    included = [e["name"] for e in doc["include"]]
    assert CPU in included and all("-cu" not in n for n in included)
    refused = [r for r in doc["rejected"] if "sycl_tla" in r["reason"]]
    assert refused and all("-cu" in r["name"] for r in refused)
    cuda = refused[0]["name"]
    code, _, err = _run(
        capsys, "build", str(project), "--variant", cuda, "--print-build-identifiers"
    )
    assert code == 5 and "sycl_tla" in err


def test_a_full_disk_names_the_destination_and_says_to_free_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``index`` on a full disk: the error named the wheel it was copying from (the wheelhouse,
    which is fine) and told to check that the path exists; it names where the copy was going
    and says to free space."""
    import shutil

    from support.installkit import kernel_wheel

    kernel_wheel(tmp_path / "wh", "torch2.13.cpu.cxx11")

    def full(src: Any, dst: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src), None, str(dst))

    monkeypatch.setattr(shutil, "copyfile", full)
    code, _, err = _run(capsys, "index", str(tmp_path / "wh"), "-o", str(tmp_path / "site"))
    assert code == 1
    assert "-> " in err and f"{tmp_path / 'site'}/" in err and "No space left on device" in err
    assert "free space on that disk" in err
    assert not (tmp_path / "site").exists()  # nothing half-written, not even the folder


def test_a_file_written_atomically_is_named_not_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only folder refused the temporary file beside ``kernelwheel.lock``, and the error
    named ``.kernelwheel-tmp-<pid>-<random>.lock``, a name the user never saw."""
    import tempfile

    from kernelwheel._util import atomic_write

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / ".kernelwheel-tmp-1"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OSError, match="Read-only file system") as info:
        atomic_write(tmp_path / "kernelwheel.lock", "x")
    assert info.value.filename == str(tmp_path / "kernelwheel.lock")


def test_a_full_disk_while_a_file_is_written_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full cache disk under ``kernelwheel test``: the write of the dev lock's owner file
    failed with "error: No space left on device" alone (a write names no file)."""

    def full(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    code, _, err = _run(capsys, "dev", str(root), "--cache-dir", str(tmp_path / "c"))
    assert code == 1 and "No space left on device" in err
    assert "noarch.lock.owner: No space left on device" in err, err
    assert "free space on that disk" in err and "--cache-dir (KERNELWHEEL_CACHE_DIR)" in err
    assert not [p for p in (tmp_path / "c").rglob("*") if ".kernelwheel-tmp" in p.name]


def test_a_generated_file_on_a_full_disk_is_named_and_left_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_ops.py`` and the generated headers on a full disk: "No space left on device" with no
    file named, and the file left cut short."""
    from kernelwheel._util import write_if_changed

    ops = tmp_path / "_ops.py"
    ops.write_text("old\n")

    def full(self: Path, data: Any, *args: Any, **kwargs: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError, match="No space left") as info:
        write_if_changed(ops, "new\n")
    assert info.value.filename == str(ops)
    monkeypatch.undo()
    assert ops.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["_ops.py"]


def test_a_full_disk_while_the_hub_metadata_is_written_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dev Hub layout's metadata.json on a full disk: "error: No space left on device"."""
    real_text, real_bytes = Path.write_text, Path.write_bytes

    def full(real: Callable[..., int]) -> Callable[..., int]:
        def write(self: Path, data: Any, *args: Any, **kwargs: Any) -> int:
            if "build" in self.parts and self.suffix == ".json":  # hub/build/<staging>/
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(self, data, *args, **kwargs)

        return write

    monkeypatch.setattr(Path, "write_text", full(real_text))
    monkeypatch.setattr(Path, "write_bytes", full(real_bytes))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    code, _, err = _run(capsys, "dev", str(root), "--cache-dir", str(tmp_path / "c"))
    assert code == 1 and "No space left on device" in err
    assert f"{tmp_path / 'c'}/" in err and "metadata.json: No space" in err, err
    assert "/hub/build/torch-cpu/metadata.json" in err, err  # not the staging folder's name
    assert not list((tmp_path / "c").rglob(".kernelwheel-*"))  # no staging folder left


def test_a_full_disk_in_the_hub_layout_names_the_file_and_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build --hub-layout`` on a full disk: "<wheel>: cannot read wheel … fix: rebuild the
    wheel" (a write was taken for a read); it names the layout's file and --hub-layout."""
    from kernelwheel.wheels import reader

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(reader, "hashed_copy", full)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = write_noarch_project(tmp_path / "n")
    argv = ["build", str(root), "-o", str(tmp_path / "wh"), "--cache-dir", str(tmp_path / "c")]
    code, _, err = _run(capsys, *argv, "--hub-layout", str(tmp_path / "hub"))
    assert code == 9 and "cannot read wheel" not in err, err
    assert f"{tmp_path / 'hub' / 'build' / 'torch-cpu'}/__init__.py: No space left" in err, err
    assert "or pass a folder on another one with --hub-layout" in err
    assert not list((tmp_path / "hub").rglob(".kernelwheel-*"))  # no staging folder left


def test_a_build_killed_outright_is_named_by_the_next_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``build`` killed with -9 left its owner file and its commands (a compiler, pip); the
    next build stopped them in silence."""
    import subprocess

    root = write_noarch_project(tmp_path / "n")
    argv = ["build", str(root), "-o", str(tmp_path / "wh"), "--cache-dir", str(tmp_path / "c")]
    assert _run(capsys, *argv)[0] == 0
    (lock,) = (tmp_path / "c" / "work").rglob("*.lock")
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = lock.with_name(f"{lock.name}.owner")
    owner.write_text(json.dumps({"pid": dead.pid, "start": "12345"}))
    env = {**os.environ, "KERNELWHEEL_RUN_ID": f"{dead.pid}:12345"}
    orphan = subprocess.Popen(["sleep", "60"], env=env)
    try:
        code, out, err = _run(capsys, *argv)
        assert code == 0 and orphan.wait(timeout=10) == -9
    finally:
        orphan.kill()
    assert f"a run that died (pid {dead.pid}) held this lock" in out + err, out + err
    assert f"(pids {orphan.pid}) were stopped" in out + err and not owner.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["download", "app", "-o", ""],
        ["to-wheel", "org/name", "1", "-o", ""],
        ["index", "", "-o", "site"],
        ["index", "wheelhouse", "-o", ""],
        ["lock", ""],
        ["upload", "", "--repo", "org/name"],
        ["check", ""],
        ["install", "img2gray", "-f", ""],
        ["variants", ""],
        ["build", ""],
        ["dev", ""],
        ["test", ""],
        ["matrix", ""],
        ["init", "--directory", "", "my-kernel"],
        ["install", "img2gray", "-f", "wheelhouse", "--python", ""],
        ["variants", "wheelhouse", "--python", ""],
    ],
)
def test_an_empty_path_is_refused_not_taken_for_this_folder(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-o "$OUT"`` with OUT unset: download wrote its wheels, requirements.txt and pylock.toml
    into the current folder, to-wheel its wheels and logs/."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and not list(tmp_path.iterdir())


def test_an_empty_path_reads_the_same_for_an_option_flag_and_an_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--cache-dir ""`` said "expected a path, got ''", ``-o ""`` "an empty path (an unset
    variable?)": one wording now, for the build options' flags too."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["download", "app", "-o", ""])
    argument = capsys.readouterr().err
    assert main(["lock", "--cache-dir", "", str(tmp_path)]) == 2
    option = capsys.readouterr().err
    wording = "an empty path (an unset variable?); '.' is this folder"
    assert wording in argument and f"--cache-dir: {wording}" in option
    root = write_noarch_project(tmp_path / "p")
    assert main(["build", str(root), "--python", ""]) == 2  # "expected an interpreter, got ''"
    assert f"--python: {wording}" in capsys.readouterr().err
