"""metadata.json in kernel-builder's current form, read by to-wheel: integer version, licence,
URLs, kernel-depends, digest (checked against every packaged file) and provenance; the signature
beside it is kept with it in the wheel's .dist-info/hub/, not packaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, VariantFiles, variant_files
from support.variants import TORCH214_CU130 as CU130
from support.wheelread import read_wheel

from kernelwheel.errors import HubError
from kernelwheel.hub.metadata import (
    Digest,
    KernelMetadata,
    KernelsVersion,
    Provenance,
)
from kernelwheel.hub.towheel import ToWheelRequest, to_wheels
from kernelwheel.model.gitstate import GitState
from kernelwheel.model.sections import KernelDependency

SHA_A, SHA_B = "a" * 40, "B" * 40
CURRENT = {
    "name": "img2gray",
    "id": "_img2gray_cuda_0123abc",
    "version": 1,
    "license": "apache-2.0",
    "upstream": "https://example.org/team/img2gray.git",
    "source": "git@example.org:team/img2gray-kernel",
    "python-depends": ["einops"],
    "kernel-depends": [
        {"repo-id": "kernels-community/relu", "version": 1},
        {"repo-id": "org/helper", "revision": "v0.3"},
    ],
    "backend": {"type": "cuda", "archs": ["8.0", "9.0"]},
    "digest": {"algorithm": "sha256", "files": {"_ops.py": "xx"}},
    "provenance": {
        "kernel-builder": {"version": "0.17.0", "sha": SHA_A, "dirty": False},
        "kernel": {"commit": SHA_B, "dirty": True},
    },
    "kernels-minver": "0.17.0",
    "signed-by": "someone",  # a key this reader does not know: ignored, as kernels does
}


def _parse(data: dict[str, object]) -> KernelMetadata:
    return KernelMetadata.parse(json.dumps(data).encode(), where="m.json")


def test_the_current_form_is_read_field_by_field() -> None:
    meta = _parse(CURRENT)
    assert (meta.name, meta.version, meta.license) == ("img2gray", "1", "apache-2.0")
    assert meta.upstream == "https://example.org/team/img2gray.git"
    assert meta.source == "git@example.org:team/img2gray-kernel"
    assert meta.kernel_depends == (
        KernelDependency("kernels-community/relu", 1),
        KernelDependency("org/helper", revision="v0.3"),
    )
    assert meta.digest == Digest("sha256", (("_ops.py", "xx"),))
    assert meta.provenance == Provenance(
        "0.17.0", GitState(SHA_A, False), GitState(SHA_B.lower(), True)
    )
    assert (meta.backend, meta.archs) == ("cuda", ("8.0", "9.0"))
    assert meta.kernels_minver == KernelsVersion((0, 17, 0))
    assert json.loads(meta.to_json())["kernels-minver"] == "0.17.0"
    # written back in the current spelling (commit, not the older sha), read back the same
    again = KernelMetadata.parse(meta.to_json().encode(), where="m.json")
    assert again == meta and '"sha"' not in meta.to_json()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"digest": {"algorithm": "sha3-512", "files": {}}}, "algorithm 'sha3-512'"),
        ({"digest": {"algorithm": "sha256", "files": ["a"]}}, "path -> base64"),
        ({"kernel-depends": [{"repo-id": "a/b"}]}, "either an integer version or a revision"),
        ({"kernel-depends": [{"repo-id": "a/b", "version": 1, "revision": "x"}]}, "either"),
        ({"kernel-depends": [{"repo-id": "a/b", "version": True}]}, "either"),
        ({"kernel-depends": {"repo-id": "a/b"}}, "must be a list"),
        ({"provenance": 42}, "kernel-builder"),
        ({"provenance": {"kernel": {"commit": SHA_A, "dirty": False}}}, "kernel-builder"),
        (
            {"provenance": {"kernel-builder": {"version": "1"}, "kernel": "nonsense"}},
            "not an object",
        ),
        (
            {"provenance": {"kernel-builder": {"version": "1"}, "kernel": {}}},
            "a full commit id",
        ),
        (
            {"provenance": {"kernel-builder": {"version": "1", "commit": "d0610aa", "dirty": 0}}},
            "a full commit id",
        ),
        ({"license": ["MIT"]}, "'license' must be a string"),
        ({"kernels-minver": 17}, "'kernels-minver' must be a string"),
        ({"kernels-minver": ">=0.17"}, "'kernels-minver' has '>=0.17' is not a dotted version"),
        ({"kernels-minver": "0.17.0rc1"}, "'kernels-minver'"),
    ],
)
def test_unreadable_current_fields_are_refused_with_the_field(
    change: dict[str, object], match: str
) -> None:
    with pytest.raises(HubError, match=match):
        _parse({**CURRENT, **change})


@pytest.mark.parametrize(
    ("text", "release", "shown"),
    [
        ("0.17.0", (0, 17, 0), "0.17.0"),
        ("0.17", (0, 17, 0), "0.17.0"),
        ("1", (1, 0, 0), "1.0.0"),
        ("0.17.2.0", (0, 17, 2), "0.17.2"),
        ("0.17.2.1", (0, 17, 2, 1), "0.17.2.1"),
        (" 0.9.10 ", (0, 9, 10), "0.9.10"),
    ],
)
def test_kernels_versions_compare_as_kernels_does(
    text: str, release: tuple[int, ...], shown: str
) -> None:
    version = KernelsVersion.parse(text)
    assert (version.release, str(version)) == (release, shown)
    assert KernelsVersion.parse(shown) == version  # the formatter's text parses back


def test_kernels_versions_order_numerically() -> None:
    texts = ["0.17.2", "0.9.1", "0.17", "0.17.10", "0.14.0", "1.0"]
    ordered = sorted(KernelsVersion.parse(t) for t in texts)
    assert [str(v) for v in ordered] == ["0.9.1", "0.14.0", "0.17.0", "0.17.2", "0.17.10", "1.0.0"]


def test_a_converted_wheel_carries_kernels_minver(so_cache: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "img2gray", so_cache)
    (converted,) = to_wheels(ToWheelRequest(str(repo.root), "1", output_dir=tmp_path)).converted
    assert converted.kernels_minver == "0.17.0"
    dist_info = converted.wheel.name.split("-cp")[0] + ".dist-info"
    kept = json.loads(read_wheel(converted.wheel).files[f"{dist_info}/hub/metadata.json"])
    assert kept["kernels-minver"] == "0.17.0"
    without = {k: v for k, v in CURRENT.items() if k != "kernels-minver"}
    assert _parse(without).kernels_minver is None


def test_a_licence_that_is_no_spdx_expression_is_noted_and_kept(
    so_cache: Path, tmp_path: Path
) -> None:
    """metadata.json's ``"license": "Apache 2"`` became free text in the wheel, unsaid."""
    repo = _repo(tmp_path / "img2gray", so_cache, license="Apache 2")
    (converted,) = to_wheels(
        ToWheelRequest(str(repo.root), "1", output_dir=tmp_path / "o")
    ).converted
    assert read_wheel(converted.wheel).metadata["License"] == "Apache 2"
    (note,) = [n for n in converted.notes if "SPDX" in n]
    assert note.startswith("warning: metadata.json license 'Apache 2' is no SPDX")
    assert "did you mean Apache-2.0" in note


def test_the_digest_is_the_one_kernels_computes() -> None:
    files = {
        "_ext.so": b"hello world",
        "metadata.json": b"{}",
        "metadata.json.sigstore": b"sig",
        "pkg/__pycache__/m.cpython-311.pyc": b"bytecode",
        "payload.pyc": b"bytecode",
        "sub/metadata.json": b"{}",  # only the top-level one is left out
    }
    digest = Digest.of(files)
    assert dict(digest.files) == {
        "_ext.so": "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=",  # sha256, standard base64
        "sub/metadata.json": Digest.of({"x": b"{}"}).files[0][1],
    }
    assert digest.problem("_ext.so", b"hello world") is None
    assert "does not match" in (digest.problem("_ext.so", b"hello") or "")
    assert "not in metadata.json's digest" in (digest.problem("extra.py", b"") or "")
    assert Digest.of(files, "sha512").problem("_ext.so", b"hello world") is None


def _repo(
    root: Path, so_cache: Path, *, tamper: bool = False, license: str | None = None
) -> HubRepo:
    """A flat current-form variant with a digest of its real files and a signature."""
    files = variant_files(CU130, layout="flat", so_cache=so_cache).files
    meta = {**CURRENT, "digest": Digest.of(files).to_dict()}
    if license is not None:
        meta["license"] = license
    files["metadata.json"] = json.dumps(meta, indent=2).encode()
    files["metadata.json.sigstore"] = b'{"mediaType": "application/vnd.dev.sigstore.bundle"}'
    if tamper:
        files["_ops.py"] += b"# changed after the build\n"
    repo = HubRepo(root)
    repo.set_variants([VariantFiles(CU130, files)])
    repo.commit("build")
    repo.branch("v1")
    return repo


def test_a_current_variant_converts_with_licence_urls_and_its_signed_metadata(
    so_cache: Path, tmp_path: Path
) -> None:
    repo = _repo(tmp_path / "img2gray", so_cache)
    result = to_wheels(ToWheelRequest(str(repo.root), "1", output_dir=tmp_path / "out"))
    assert result.rejected == ()
    (converted,) = result.converted
    contents = read_wheel(converted.wheel)
    md = contents.metadata
    assert md["Metadata-Version"] == "2.4"
    assert md["License-Expression"] == "Apache-2.0"
    # Project-URLs are http(s) only (issue 30): the scp-style git address is left out, noted.
    assert md.get_all("Project-URL") == ["Upstream, https://example.org/team/img2gray.git"]
    assert any("not an http(s) URL" in note for note in converted.notes)
    dist_info = converted.wheel.name.split("-cp")[0] + ".dist-info"
    kept = repo.root / "build" / CU130
    assert contents.files[f"{dist_info}/hub/metadata.json"] == (kept / "metadata.json").read_bytes()
    assert (
        contents.files[f"{dist_info}/hub/metadata.json.sigstore"]
        == (kept / "metadata.json.sigstore").read_bytes()
    )
    assert not [n for n in contents.files if n.startswith("img2gray/metadata.json")]
    assert dict(converted.left_out)["metadata.json.sigstore"].startswith("signature of")
    assert any("kernels-community/relu (version 1)" in n for n in converted.notes)


def test_a_file_that_does_not_match_the_digest_is_refused(so_cache: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "img2gray", so_cache, tamper=True)
    result = to_wheels(ToWheelRequest(str(repo.root), "1", output_dir=tmp_path / "out"))
    assert result.converted == ()
    (rejected,) = result.rejected
    assert "_ops.py does not match its sha256 in metadata.json's digest" in rejected.reason


def test_to_wheel_requires_the_pypi_names_of_kernel_builders_names() -> None:
    from kernelwheel.hub.convert import _pypi_requirements
    from kernelwheel.model.variant import Variant

    xpu = Variant.parse("torch213-cxx11-xpu20260-x86_64-linux")
    cpu = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    names = ("tvm-ffi", "onednn", "einops>=0.8")
    assert _pypi_requirements(names, xpu) == ("apache-tvm-ffi", "onednn-devel", "einops>=0.8")
    # onednn is an xpu name: elsewhere it is read as the requirement it spells.
    assert _pypi_requirements(names, cpu) == ("apache-tvm-ffi", "onednn", "einops>=0.8")
