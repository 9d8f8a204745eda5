"""`kernelwheel upload` of layouts that lie (issue 38, family 2) or are hostile (family 6): each
is refused before the Hub is asked anything, naming what is wrong and how to fix it, against the
loopback Hub (tests/support/hubserver.py), which then holds no commit. The layouts are made here
from real shared objects: a CPU extension, a CUDA one (the real device code of an nvcc object in
``.nv_fatbin``), one linked against a libcudart of another CUDA major."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.gitrepo import namespace_for, variant_files
from support.hubserver import HubState, serve_as_hub
from support.sofiles import build_extension

from kernelwheel.cli import main
from kernelwheel.errors import UsageError
from kernelwheel.hub.metadata import Digest
from kernelwheel.hub.upload import UploadRequest, read_layout, upload

REPO = "acme/img2gray"
TOKEN = "hf_write_token"
CU130 = "torch214-cxx11-cu130-x86_64-linux"
CPU = "torch214-cxx11-cpu-x86_64-linux"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    state = HubState(write_token=TOKEN, root=tmp_path / "hub-repos")
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
        yield state


def _write(
    root: Path,
    folder: str,
    so_cache: Path,
    *,
    built_as: str | None = None,
    backend: str | None = None,
    name: str = "img2gray",
    digest: bool = True,
    fatbin: bool = False,
    needed: tuple[str, ...] = (),
) -> Path:
    """``build/<folder>/`` holding what a build of ``built_as`` (default: ``folder``) writes,
    its metadata.json saying ``backend`` and ``name``, with a digest of its files."""
    ns = namespace_for(name, built_as or folder)
    so = build_extension(so_cache, ns, fatbin=fatbin, needed=needed)
    meta = {"name": name, "version": 1, "python-depends": []}
    if backend is not None:
        meta["backend"] = {"type": backend}
    files = variant_files(
        built_as or folder, layout="flat", so_cache=so_cache, metadata=meta, binary=(ns, so)
    ).files
    if digest:
        meta["digest"] = Digest.of(files).to_dict()
        files["metadata.json"] = json.dumps(meta).encode()
    variant = root / "build" / folder
    for inner, data in files.items():
        (variant / inner).parent.mkdir(parents=True, exist_ok=True)
        (variant / inner).write_bytes(data)
    return variant


def _refused(layout: Path, hub: HubState, match: str) -> UsageError:
    """The upload of ``layout`` refused with ``match``, the Hub never asked."""
    hub.log.clear()
    with pytest.raises(UsageError, match=match) as info:
        upload(UploadRequest(layout, REPO))
    assert hub.requests() == [] and hub.commits == [] and REPO not in hub.repos
    assert info.value.hint
    return info.value


# -- family 2: a layout that is not what it says ------------------------------------------------


def test_a_cpu_build_in_a_cuda_folder_is_refused(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    # The CPU build renamed to ...-cu130-..., its metadata.json edited to say cuda: its
    # extension has no device code and needs no CUDA library.
    layout = tmp_path / "renamed"
    _write(layout, CU130, so_cache, built_as=CPU, backend="cuda")
    err = _refused(layout, hub, "a CUDA variant, but it holds .*built for no GPU runtime")
    assert CU130 in err.message and "a CPU build under a CUDA name" in err.message
    # ... and without the edit, metadata.json's backend gives it away first.
    layout = tmp_path / "renamed-only"
    _write(layout, CU130, so_cache, built_as=CPU, backend="cpu")
    _refused(layout, hub, "backend 'cpu', but the folder .* is a CUDA variant")
    # The real CUDA build of that folder is accepted.
    good = tmp_path / "good"
    _write(good, CU130, so_cache, backend="cuda", fatbin=True)
    assert read_layout(good).variants == (CU130,)


def test_a_cuda_build_in_a_cpu_folder_and_another_cuda_major_are_refused(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    layout = tmp_path / "gpu-as-cpu"
    _write(layout, CPU, so_cache, built_as=CU130, backend="cpu", fatbin=True)
    _refused(layout, hub, "a CPU variant, but its extension .* is built for CUDA .*nv_fatbin")
    layout = tmp_path / "cu12-as-cu13"
    _write(layout, CU130, so_cache, backend="cuda", fatbin=True, needed=("libcudart.so.12",))
    err = _refused(layout, hub, "a CUDA 13.0 variant, but its extension")
    assert "needs libcudart.so.12" in err.message and "a CUDA 12 build" in err.message
    good = tmp_path / "cu13"
    _write(good, CU130, so_cache, backend="cuda", needed=("libcudart.so.13",))
    assert read_layout(good).variants == (CU130,)  # its library alone shows CUDA


def test_junk_in_build_and_a_second_project_are_refused(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    layout = tmp_path / "junk"
    _write(layout, CPU, so_cache, backend="cpu")
    (layout / "build" / "not-a-variant").mkdir()
    (layout / "build" / "not-a-variant" / "x.py").write_text("")
    err = _refused(layout, hub, "not-a-variant: not a variant folder")
    assert "build/ holds only the variant folders" in str(err.hint)
    (layout / "build" / "not-a-variant" / "x.py").unlink()
    (layout / "build" / "not-a-variant").rmdir()  # even empty
    (layout / "build" / "not-a-variant").mkdir()
    _refused(layout, hub, "not-a-variant: not a variant folder")
    (layout / "build" / "not-a-variant").rmdir()
    (layout / "build" / "NOTES.txt").write_text("a file among the variants\n")
    _refused(layout, hub, "NOTES.txt: a file in build/, which holds only variant folders")
    (layout / "build" / "NOTES.txt").unlink()
    # A spelling the Hub does not use (the loader looks the canonical name up).
    other = tmp_path / "spelling"
    _write(other, "torch214-cxx11-rocm6.3-x86_64-linux", so_cache, backend="rocm")
    _refused(other, hub, "spelled 'torch214-cxx11-rocm63-x86_64-linux' on the Hub")

    # Another project's variant beside img2gray's.
    two = tmp_path / "two"
    _write(two, CPU, so_cache, backend="cpu")
    _write(two, CU130, so_cache, backend="cuda", name="relu", fatbin=True)
    err = _refused(two, hub, "name 2 projects \\(img2gray, relu\\)")
    assert f"{CU130}: relu" in err.message
    assert read_layout(layout).name == "img2gray"


def test_a_noarch_folder_with_compiled_code_is_refused(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    layout = tmp_path / "noarch"
    _write(layout, "torch-cuda", so_cache, built_as=CU130, backend="cuda", fatbin=True)
    _refused(layout, hub, "a noarch \\(pure Python\\) variant, but holds compiled code")


def test_only_the_files_a_build_writes_are_pushed(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    # Without a digest, a .env (and anything a build does not write) is refused, not pushed.
    layout = tmp_path / "nodigest"
    variant = _write(layout, CPU, so_cache, backend="cpu", digest=False)
    (variant / ".env").write_text("HF_TOKEN=hf_secret\n")
    err = _refused(layout, hub, "\\.env: a hidden file")
    assert "hf_secret" not in str(err)
    (variant / ".env").unlink()
    (variant / "notes.txt").write_text("notes\n")
    _refused(layout, hub, "notes.txt: not a file a build writes")
    (variant / "notes.txt").unlink()
    # With a digest, a file it does not list is refused; a hidden one even inside the package.
    signed = tmp_path / "digest"
    variant = _write(signed, CPU, so_cache, backend="cpu")
    (variant / "data.json").write_text("{}")
    _refused(signed, hub, "data.json: not in metadata.json's digest")
    (variant / "data.json").unlink()
    (variant / "img2gray" / ".env").write_text("SECRET=1\n")
    _refused(signed, hub, "img2gray/\\.env: a hidden file")
    (variant / "img2gray" / ".env").unlink()
    # Beside build/, only the card is read: a .env at the root is neither read nor pushed.
    (signed / ".env").write_text("HF_TOKEN=hf_secret\n")
    (signed / "README.md").write_text("# img2gray\n")
    result = upload(UploadRequest(signed, REPO))
    pushed = {f.path for f in result.files}
    assert pushed == {"README.md"} | {
        p.relative_to(signed).as_posix() for p in variant.rglob("*") if p.is_file()
    }
    assert ".env" not in pushed and len(hub.commits) == 1


# -- family 6: hostile entries, refused at once --------------------------------------------------


def _quickly(fn: Callable[[], object], limit: float = 20.0) -> BaseException | None:
    """Run ``fn`` in a thread; it must end (with an error, returned) within ``limit`` s."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            caught.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still running after {limit} s: it hangs"
    assert time.monotonic() - started < limit
    return caught[0] if caught else None


def test_a_fifo_socket_or_device_is_refused_without_waiting(
    hub: HubState, tmp_path: Path, so_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = tmp_path / "fifo"
    variant = _write(layout, CPU, so_cache, backend="cpu")
    os.mkfifo(variant / "img2gray" / "pipe.py")  # a name the allow-list takes
    err = _quickly(lambda: upload(UploadRequest(layout, REPO)))
    assert isinstance(err, UsageError), err
    assert "pipe.py: a named pipe (FIFO)" in err.message and hub.commits == []
    (variant / "img2gray" / "pipe.py").unlink()
    os.mkfifo(variant / "metadata.json.sigstore")
    err = _quickly(lambda: read_layout(layout))
    assert isinstance(err, UsageError) and "a named pipe (FIFO)" in err.message
    (variant / "metadata.json.sigstore").unlink()

    sock = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(variant)  # a socket's path is short: bound relative to its folder
    try:
        sock.bind("sock.py")
        err = _quickly(lambda: read_layout(layout))
        assert isinstance(err, UsageError) and "sock.py: a socket" in err.message
    finally:
        sock.close()
        (variant / "sock.py").unlink()
    if os.path.exists("/dev/null"):
        os.symlink("/dev/null", variant / "null.py")
        err = _quickly(lambda: read_layout(layout))
        assert isinstance(err, UsageError)
        assert "null.py: a symlink to '/dev/null', outside the layout" in err.message
        (variant / "null.py").unlink()
    assert read_layout(layout).variants == (CPU,)


def test_symlinks_are_refused(hub: HubState, tmp_path: Path, so_cache: Path) -> None:
    layout = tmp_path / "links"
    variant = _write(layout, CPU, so_cache, backend="cpu")
    secret = tmp_path / "secret.py"
    secret.write_text("TOKEN = 'hf_secret'\n")
    os.symlink(secret, variant / "img2gray" / "leak.py")
    err = _refused(layout, hub, "leak.py: a symlink to .*outside the layout")
    assert "hf_secret" not in str(err)
    (variant / "img2gray" / "leak.py").unlink()
    # A whole variant folder that is a link (to a real build elsewhere) is refused too.
    elsewhere = tmp_path / "elsewhere"
    real = _write(elsewhere, CU130, so_cache, backend="cuda", fatbin=True)
    os.symlink(real, layout / "build" / CU130)
    _refused(layout, hub, f"{CU130}: a symlink to .*outside the layout")


def test_a_non_utf8_name_is_refused_with_a_clear_message(
    hub: HubState, tmp_path: Path, so_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = tmp_path / "names"
    variant = _write(layout, CPU, so_cache, backend="cpu")
    bad = os.fsencode(variant / "img2gray") + b"/caf\xe9.py"
    fd = os.open(bad, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    err = _refused(layout, hub, "the file name 'caf\\\\xe9.py' is not UTF-8")
    assert "rename or remove it" in str(err.hint)
    # The CLI shows it and exits 2, without a traceback.
    code = main(["upload", str(layout), "--repo", REPO])
    out = capsys.readouterr()
    assert code == UsageError.exit_code
    assert "caf\\xe9.py' is not UTF-8" in out.err and "Traceback" not in out.err + out.out


def test_a_file_changed_after_the_check_is_not_pushed(
    hub: HubState, tmp_path: Path, so_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit hands huggingface_hub paths; the sha256 it computes must be the one checked."""
    import kernelwheel.hub.upload as upload_module

    layout = tmp_path / "racing"
    variant = _write(layout, CPU, so_cache, backend="cpu")
    checked = read_layout

    def then_changed(folder: Path, version: int | None = None) -> object:
        found = checked(folder, version)
        with (variant / "_ops.py").open("a") as f:
            f.write("# appended after the check\n")
        return found

    monkeypatch.setattr(upload_module, "read_layout", then_changed)
    with pytest.raises(UsageError, match="_ops.py: changed since the layout was checked"):
        upload(UploadRequest(layout, REPO))
    assert hub.commits == [] and REPO not in hub.repos  # refused before the repo was made


def test_a_card_that_names_another_repo_is_refused(
    hub: HubState, tmp_path: Path, so_cache: Path
) -> None:
    """The card rendered with build.toml's repo-id `me/img2gray` would tell the readers of
    acme/img2gray to load me/img2gray: refused before the Hub is asked; the card of the repo
    uploaded to, or one with no get_kernel line, goes."""
    layout = tmp_path / "layout"
    _write(layout, CPU, so_cache, backend="cpu")
    card = layout / "README.md"
    card.write_text('```python\nimg2gray = get_kernel("me/img2gray", version=1)\n```\n')
    err = _refused(layout, hub, "the kernel card tells readers get_kernel\\('me/img2gray'\\)")
    assert f"but --repo is {REPO}" in err.message
    assert f'set repo-id = "{REPO}" under [general.hub]' in (err.hint or "")
    assert "--repo me/img2gray" in (err.hint or "")
    for text in (f'get_kernel("{REPO}", version=1)', "# img2gray\n"):
        card.write_text(text)
        assert upload(UploadRequest(layout, REPO, dry_run=True)).files
