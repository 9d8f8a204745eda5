"""``kernelwheel index``: per-flavour PEP 503 indexes, and real pip against ``python -m
http.server`` on loopback picking the wheel built for the installed torch."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.gitrepo import make_repo
from support.http import http_server
from support.venvs import QuickVenv, fake_torch

from kernelwheel.cli import main
from kernelwheel.errors import UsageError, WheelError
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.index import ALL, build_index, flavours_of

VARIANTS = (
    "torch213-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch215-cxx11-cu130-x86_64-linux",  # a torch that is not installed
    "torch214-cxx11-cu130-aarch64-linux",
    "torch214-cxx11-cu128-x86_64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
    "torch28-metal-aarch64-darwin",
    "torch-cuda",
    "torch-universal",
)


@pytest.mark.parametrize(
    ("name", "flavour", "kind"),
    [
        ("img2gray-1.1.2+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl", "cu130", None),
        (
            "img2gray-1.1.2+torch2.10.cu130.cxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
            "cu130",
            None,
        ),
        (
            "img2gray-1.1.2+torch2.7.rocm63.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
            "rocm63",
            None,
        ),
        ("img2gray-1.1.2+torch2.14.cpu.cxx11-cp310-abi3-linux_x86_64.whl", "cpu", None),
        ("img2gray-1.1.2+torch2.8.metal-cp39-abi3-macosx_11_0_arm64.whl", "metal", None),
        ("img2gray-1.1.2+torch2.11.cu128-cp39-abi3-win_amd64.whl", "cu128", None),
        ("img2gray-1.1.2+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl", "cu128", None),
        ("img2gray-1.1.2+cuda-py3-none-any.whl", None, "cuda"),
        ("img2gray-1.1.2+universal-py3-none-any.whl", "*", None),
        ("einops-0.8.0-py3-none-any.whl", "*", None),
        ("flash_attn-2.8.0+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl", None, None),
    ],
)
def test_flavour_from_the_local_version(name: str, flavour: str | None, kind: str | None) -> None:
    got, got_kind, why = flavours_of(name)
    assert (got, got_kind) == (flavour, kind), why


def _plain_wheel(out: Path, name: str, version: str) -> Path:
    spec = WheelSpec(name, version, Tag("py3", "none", "any"), {"x/__init__.py": b""})
    return write_wheel(spec, out)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> Path:
    root = tmp_path_factory.mktemp("index")
    repo = make_repo(root / "img2gray", VARIANTS, so_cache=so_cache)
    out = root / "wheelhouse"
    assert to_wheels(ToWheelRequest(str(repo.root), "1.1.2", output_dir=out)).rejected == ()
    _plain_wheel(out, "einops", "0.8.0")
    _plain_wheel(out, "My_Kernel.Helpers", "1.0")
    _plain_wheel(out, "act", "1.0+cuda")  # a noarch-only kernel (torch-cuda)
    _plain_wheel(out, "layers", "2.0+universal")  # a universal-only kernel
    return out


@pytest.fixture(scope="module")
def index(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "simple"
    assert main(["index", str(wheelhouse), "--output", str(out)]) == 0
    return out


def _links(page: Path) -> dict[str, str]:
    text = page.read_text()
    return {m[1]: m[0] for m in re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', text)}


def test_one_index_per_flavour_plus_all(index: Path, wheelhouse: Path) -> None:
    flavours = sorted(
        p.name
        for p in index.iterdir()
        if p.is_dir() and p.name != "files" and not p.name.startswith("torch")
    )
    assert flavours == ["all", "cpu", "cu128", "cu130", "metal"]
    per_torch = sorted(f"{p.parent.name}/{p.name}" for p in index.glob("torch*/*/"))
    assert per_torch == [
        "torch2.13/cu130",
        "torch2.14/cpu",
        "torch2.14/cu128",
        "torch2.14/cu130",
        "torch2.15/cu130",
        "torch2.8/metal",
    ]
    listed = set(_links(index / "index.html").values())
    assert listed == {f"{f}/" for f in flavours + per_torch}
    projects = {"img2gray", "einops", "my-kernel-helpers", "act", "layers"}
    assert set(_links(index / ALL / "index.html")) == projects
    total = len(list(wheelhouse.glob("*.whl")))
    assert len(_links(index / ALL / "img2gray" / "index.html")) + 4 == total


def test_each_torch_series_page_lists_its_cuda_flavours_by_the_driver_they_need(
    index: Path,
) -> None:
    page = (index / "torch2.14" / "index.html").read_text()
    assert list(_links(index / "torch2.14" / "index.html").values()) == ["cu130/", "cu128/", "cpu/"]
    assert (
        '<a href="cu130/">cu130/</a> needs a CUDA driver that supports CUDA 13.0 or newer, and '
        "a CUDA 13 torch<br>" in page
    )
    assert "CUDA 12.8 or newer, and a CUDA 12 torch" in page
    assert "take the newest CUDA one your driver supports" in page
    assert list(_links(index / "torch2.8" / "index.html").values()) == ["metal/"]


def test_flavour_pages_hold_their_builds_and_the_shared_wheels(index: Path) -> None:
    cu130 = set(_links(index / "cu130" / "img2gray" / "index.html"))
    assert cu130 == {
        "img2gray-1.1.2+torch2.13.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "img2gray-1.1.2+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "img2gray-1.1.2+torch2.15.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "img2gray-1.1.2+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
    }  # the noarch +cuda/+universal wheels of 1.1.2 give way to the binary builds of 1.1.2
    cpu = set(_links(index / "cpu" / "img2gray" / "index.html"))
    assert cpu == {"img2gray-1.1.2+torch2.14.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"}
    for flavour in ("cu130", "cpu", "cu128", "metal"):  # dependencies resolve from any flavour
        assert set(_links(index / flavour / "index.html")) >= {"einops", "my-kernel-helpers"}
        assert "layers" in _links(index / flavour / "index.html")  # universal: everywhere
    # A noarch CUDA kernel: in every CUDA flavour, nowhere else.
    assert "act" in _links(index / "cu130" / "index.html")
    assert "act" in _links(index / "cu128" / "index.html")
    assert "act" not in _links(index / "cpu" / "index.html")


def test_links_carry_sha256_and_metadata(index: Path) -> None:
    page = index / "cu130" / "img2gray" / "index.html"
    text = page.read_text()
    assert 'data-requires-python="&gt;=3.9"' in text
    for name, href in _links(page).items():
        assert href.startswith("../../files/") and "%2B" in href
        path, _, fragment = href.partition("#")
        target = (page.parent / path.replace("%2B", "+")).resolve()
        assert target.name == name
        assert fragment == "sha256=" + hashlib.sha256(target.read_bytes()).hexdigest()
        metadata = Path(f"{target}.metadata").read_bytes()
        with zipfile.ZipFile(target) as zf:
            (meta_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            assert zf.read(meta_name) == metadata
        meta_hash = hashlib.sha256(metadata).hexdigest()
        assert f'data-core-metadata="sha256={meta_hash}"' in text


def test_rerun_replaces_what_it_wrote_and_keeps_the_rest(wheelhouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "simple"
    first = build_index(wheelhouse, out)
    (out / "stale.html").write_text("mine")
    second = build_index(wheelhouse, out)
    assert first.flavours == second.flavours and (out / "stale.html").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["simple"]  # no staging left beside it
    staged = [p for p in out.iterdir() if p.name.startswith(".kernelwheel-") and p.is_dir()]
    assert not staged  # nor inside


def test_wheels_pip_would_reject_are_refused(tmp_path: Path) -> None:
    """kernels 0.11.3 wrote METADATA Version without the local part: pip says 'inconsistent
    version'; the index names the wheel instead of serving it."""
    bad = tmp_path / "img2gray-1.1.2+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr(
            "img2gray-1.1.2+torch27cu128cxx11.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: img2gray\nVersion: 1.1.2\n",
        )
    with pytest.raises(WheelError, match=r"METADATA Version: is '1.1.2', the file name says"):
        build_index(tmp_path, tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="holds no"):
        build_index(empty, tmp_path / "o2")


@pytest.mark.parametrize(
    ("torch", "cuda", "flavour", "expected"),
    [
        ("2.14.1+cu130", "13.0", "cu130", "1.1.2+torch2.14.cu130.cxx11"),
        ("2.13.0+cu130", "13.0", "cu130", "1.1.2+torch2.13.cu130.cxx11"),
        ("2.14.1+cpu", None, "cpu", "1.1.2+torch2.14.cpu.cxx11"),
    ],
)
def test_pip_picks_the_wheel_for_the_installed_torch(
    index: Path,
    tmp_path: Path,
    torch: str,
    cuda: str | None,
    flavour: str,
    expected: str,
) -> None:
    venv = QuickVenv(tmp_path / "venv", [fake_torch(tmp_path, torch, cuda)])
    with http_server(index) as url:
        venv.pip_install("img2gray", index_url=f"{url}/{flavour}/")
    assert venv.installed_version("img2gray") == expected


@pytest.mark.integration
def test_pip_picks_the_wheel_for_a_real_torch(index: Path, tmp_path: Path) -> None:
    """The same with the real torch 2.14.1+cu130 of kernelwheel's build environment; the
    installed package then imports (guard passes) and loads its extension under real torch."""
    from support.builds import build_env

    env = build_env("torch214-cxx11-cu130-x86_64-linux")
    venv = QuickVenv(tmp_path / "venv", [env.purelib])
    with http_server(index) as url:
        venv.pip_install("img2gray", index_url=f"{url}/cu130/")
    assert venv.installed_version("img2gray") == "1.1.2+torch2.14.cu130.cxx11"
    out = venv.run("-c", "import img2gray, torch; print(img2gray.ops, torch.__version__)")
    assert "2.14.1" in out.stdout


def test_per_torch_index_holds_only_that_torch_and_flavour(index: Path) -> None:
    page = index / "torch2.14" / "cu130" / "img2gray" / "index.html"
    assert set(_links(page)) == {
        "img2gray-1.1.2+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "img2gray-1.1.2+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
    }  # no other torch, no other flavour, and the noarch 1.1.2 builds give way
    for href in _links(page).values():  # three levels below the root
        target = (page.parent / href.split("#")[0].replace("%2B", "+")).resolve()
        assert target.is_file() and target.parent == (index / "files").resolve()
    cpu = index / "torch2.14" / "cpu"
    assert set(_links(cpu / "img2gray" / "index.html")) == {
        "img2gray-1.1.2+torch2.14.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    }
    projects = set(_links(index / "torch2.14" / "cu130" / "index.html"))
    assert projects == {"img2gray", "einops", "my-kernel-helpers", "act", "layers"}
    assert "act" not in _links(cpu / "index.html")  # a noarch CUDA kernel: CUDA indexes only


@pytest.mark.parametrize(
    ("torch", "cuda", "index_path", "expected"),
    [
        ("2.14.1+cu130", "13.0", "torch2.14/cu130", "1.1.2+torch2.14.cu130.cxx11"),
        ("2.13.0+cu130", "13.0", "torch2.13/cu130", "1.1.2+torch2.13.cu130.cxx11"),
        ("2.14.1+cpu", None, "torch2.14/cpu", "1.1.2+torch2.14.cpu.cxx11"),
    ],
)
def test_plain_pip_from_the_per_torch_index_gets_the_right_build(
    index: Path, tmp_path: Path, torch: str, cuda: str | None, index_path: str, expected: str
) -> None:
    """Over loopback HTTP, as --extra-index-url beside a stand-in for PyPI (which holds no kernel
    builds, local versions cannot be uploaded, but a newer torch), plain pip installs that
    torch's build of that flavour and leaves torch alone."""
    pypi_wheels = tmp_path / "pypi-wheels"
    _plain_wheel(pypi_wheels, "torch", "2.15.0")
    build_index(pypi_wheels, index.parent / "pypi")
    venv = QuickVenv(tmp_path / "venv", [fake_torch(tmp_path, torch, cuda)])
    with http_server(index.parent) as url:
        venv.pip_install(
            "img2gray",
            "--extra-index-url",
            f"{url}/{index.name}/{index_path}/",
            index_url=f"{url}/pypi/{ALL}/",
        )
    assert venv.installed_version("img2gray") == expected
    assert venv.installed_version("torch") == torch


def test_a_wheel_rewritten_while_indexed_is_refused_and_json_shows_the_listed_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wheel was hashed (and checked) when read, then copied: a build still writing into the
    wheelhouse gave pages listing a sha256 the served file did not have (pip: "THESE PACKAGES
    DO NOT MATCH THE HASHES"), and --json read the wheelhouse's file once more for its hash."""
    from kernelwheel.wheels import index as index_module

    house = tmp_path / "house"
    spec = WheelSpec("demo", "1.0", Tag("py3", "none", "any"), {"demo/__init__.py": b""})
    wheel = write_wheel(spec, house)
    listed = hashlib.sha256(wheel.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(["index", str(house), "-o", str(tmp_path / "site"), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["wheels"]
    assert entry["sha256"] == listed
    copy = index_module.shutil.copyfile

    def copy_then_rewrite(src: Path, dst: Path) -> Path:
        copy(src, dst)
        with open(dst, "ab") as fh:  # what the copy read: the writer's next bytes
            fh.write(b"\0")
        return dst

    monkeypatch.setattr(index_module.shutil, "copyfile", copy_then_rewrite)
    out = tmp_path / "site2"
    with pytest.raises(WheelError, match="changed while it was indexed") as err:
        build_index(house, out)
    assert listed in err.value.message
    assert not out.exists()  # nothing half-written


def test_two_files_that_are_one_wheel_to_pip_are_refused(tmp_path: Path) -> None:
    """``img2gray-0.1.0-…`` beside ``IMG2GRAY-0.1-…`` (another tool's spelling): before, both
    were listed on one page, and pip took either."""
    house = tmp_path / "house"
    spec = WheelSpec("img2gray", "0.1.0", Tag("py3", "none", "any"), {"img2gray/__init__.py": b""})
    wheel = write_wheel(spec, house)
    (house / "IMG2GRAY-0.1-py3-none-any.whl").write_bytes(wheel.read_bytes())
    with pytest.raises(WheelError) as refused:
        build_index(house, tmp_path / "site")
    assert refused.value.message.startswith(
        "IMG2GRAY-0.1-py3-none-any.whl and img2gray-0.1.0-py3-none-any.whl are one wheel to pip"
    )
    assert not (tmp_path / "site").exists()
