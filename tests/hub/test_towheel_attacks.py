"""to-wheel on tampered repos (issue 30): names that would replace a core package, metadata.json
whose python-depends or URLs would reach pip or an index page unscreened, file names and numbers
that broke the run. The bad variant is reported and left out, the others are written, no
traceback."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, VariantFiles, variant_files
from support.shared import leftovers, wheels_in
from support.variants import TORCH27_CPU as CPU
from support.variants import TORCH27_CU128 as CU128

from kernelwheel.cli import main


def _convert(repo: HubRepo, out: Path, *extra: str) -> int:
    return main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out), *extra])


def _convert_beside_a_good_variant(
    repo: HubRepo, bad: VariantFiles, so_cache: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """Convert ``repo`` holding a good CPU variant and ``bad``: the run fails for ``bad`` only,
    with a message and no traceback, the good variant's wheel written. Its stderr."""
    repo.set_variants([variant_files(CPU, so_cache=so_cache), bad])
    repo.commit("build")
    code = _convert(repo, out)
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err, err
    assert f"{CU128}: not converted" in err
    assert len(wheels_in(out)) == 1  # the other variant is written
    return err


def _metadata_of(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(name).decode()


@pytest.mark.parametrize(
    "dep",
    ["evil @ file:///etc/passwd", "evil @ https://example.invalid/evil-1.0-py3-none-any.whl"],
)
def test_a_direct_reference_in_python_depends_refuses_that_variant(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], dep: str
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    bad = variant_files(CU128, so_cache=so_cache, metadata={"python-depends": [dep]})
    out = tmp_path / "out"
    err = _convert_beside_a_good_variant(repo, bad, so_cache, out, capsys)
    assert "direct reference" in err and leftovers(out) == []
    assert "file:///" not in _metadata_of(out / wheels_in(out)[0])


def test_a_url_that_is_not_http_is_left_out_of_project_urls(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    metadata = {
        "python-depends": [],
        "upstream": "javascript:alert(document.cookie)",
        "source": "https://github.com/example/img2gray",
    }
    repo.set_variants([variant_files(CPU, so_cache=so_cache, metadata=metadata)])
    repo.commit("build")
    out = tmp_path / "out"
    assert _convert(repo, out) == 0
    captured = capsys.readouterr()
    text = _metadata_of(out / wheels_in(out)[0])
    assert "javascript:" not in text
    assert "Project-URL: Source, https://github.com/example/img2gray" in text
    assert "not an http(s) URL" in captured.out + captured.err


@pytest.mark.parametrize(
    ("package", "metadata_name"),
    [("torch", None), ("img2gray", "numpy"), ("json", None), ("img2gray", "setuptools")],
)
def test_a_hub_kernel_named_like_a_core_package_is_refused(
    so_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    package: str,
    metadata_name: str | None,
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    metadata = {"python-depends": [], "name": metadata_name} if metadata_name else None
    bad = variant_files(CU128, so_cache=so_cache, package=package, metadata=metadata)
    out = tmp_path / "out"
    err = _convert_beside_a_good_variant(repo, bad, so_cache, out, capsys)
    assert "would shadow" in err


@pytest.mark.parametrize("name", ["torch", "numpy", "Triton", "pip", "kernelwheel", "os"])
def test_to_wheel_name_refuses_core_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code = main(["to-wheel", str(tmp_path), "1.0", "--name", name, "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "would shadow" in err and "Traceback" not in err, err


def test_a_kernel_named_like_a_pypi_package_is_warned_and_not_renamed_over_it(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "einops")
    repo.set_variants([variant_files("torch-universal", so_cache=so_cache, package="einops")])
    repo.commit("build")
    out = tmp_path / "out"
    assert _convert(repo, out) == 0
    text = "".join(capsys.readouterr())
    assert "well-known PyPI distribution" in text and "package renamed" in text
    # Another distribution name cannot help: the package einops/ would still write over einops'
    # files (its top_level.txt would claim einops): refused, saying so (issue 38 family 9).
    assert _convert(repo, tmp_path / "renamed", "--name", "einops-kernel") != 0
    text = "".join(capsys.readouterr())
    assert "would write over that distribution's files" in text and "Traceback" not in text
    assert wheels_in(tmp_path / "renamed") == []


def test_a_huge_integer_in_metadata_json_refuses_that_variant_only(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    bad = variant_files(CU128, so_cache=so_cache)
    bad.files["metadata.json"] = b'{"python-depends": [], "version": ' + b"9" * 5000 + b"}"
    out = tmp_path / "out"
    err = _convert_beside_a_good_variant(repo, bad, so_cache, out, capsys)
    assert "metadata.json" in err and leftovers(out) == []


def test_a_non_utf8_file_name_refuses_that_variant_only(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    bad = variant_files(CU128, so_cache=so_cache)
    repo.set_variants([variant_files(CPU, so_cache=so_cache), bad])
    folder = repo.root / "build" / CU128 / "img2gray"
    folder.mkdir(parents=True, exist_ok=True)
    with open(bytes(folder) + b"/bad-\xff\xfe.py", "wb") as fh:
        fh.write(b"x = 1\n")
    repo.commit("build")
    out = tmp_path / "out"
    code = _convert(repo, out)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert code != 0 and CU128 in err
    assert len(wheels_in(out)) == 1 and leftovers(out) == []
