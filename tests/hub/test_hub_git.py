"""to-wheel on local git clones: Hub-layout repos with real ELF objects, every variant form,
both layouts, tags and branches; names, tags, METADATA, RECORD, reproducibility, safety."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from support.gitrepo import (
    DEFECT_CASES,
    OTHER_FORMS,
    SEED_13,
    HubRepo,
    git,
    make_repo,
    variant_files,
)
from support.shared import leftovers, wheels_in
from support.wheelread import read_wheel

from kernelwheel.cli import main
from kernelwheel.errors import HubError, UsageError
from kernelwheel.hub.guard import GUARD_MODULE
from kernelwheel.hub.layout import Layout
from kernelwheel.hub.towheel import ToWheelRequest, ToWheelResult, to_wheels

ALL_FORMS = SEED_13 + DEFECT_CASES + OTHER_FORMS

# Expected names written out by hand (not computed with the code under test).
EXPECTED = {
    "torch27-cxx11-cu128-x86_64-linux": (
        "img2gray-1.1.2+torch2.7.cu128.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.7.*",
    ),
    "torch26-cxx98-cu126-aarch64-linux": (
        "img2gray-1.1.2+torch2.6.cu126.cxx98-cp39-abi3-manylinux_2_28_aarch64.whl",
        "torch==2.6.*",
    ),
    "torch26-cxx11-cu118-x86_64-linux": (
        "img2gray-1.1.2+torch2.6.cu118.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.6.*",
    ),
    "torch210-cxx11-cu130-x86_64-linux": (
        "img2gray-1.1.2+torch2.10.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.10.*",
    ),
    "torch27-cxx11-cpu-x86_64-linux": (
        "img2gray-1.1.2+torch2.7.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.7.*",
    ),
    "torch27-cxx11-rocm63-x86_64-linux": (
        "img2gray-1.1.2+torch2.7.rocm63.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.7.*",
    ),
    "torch-cuda": ("img2gray-1.1.2+cuda-py3-none-any.whl", "torch"),
    "torch-universal": ("img2gray-1.1.2+universal-py3-none-any.whl", "torch"),
    "torch28-metal-aarch64-darwin": (
        "img2gray-1.1.2+torch2.8.metal-cp39-abi3-macosx_11_0_arm64.whl",
        "torch==2.8.*",
    ),
    "torch211-cu128-x86_64-windows": (
        "img2gray-1.1.2+torch2.11.cu128-cp39-abi3-win_amd64.whl",
        "torch==2.11.*",
    ),
    "torch213-cxx11-cpu-aarch64-linux": (
        "img2gray-1.1.2+torch2.13.cpu.cxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
        "torch==2.13.*",
    ),
    "torch29-cxx11-xpu20251-x86_64-linux": (
        "img2gray-1.1.2+torch2.9.xpu20251.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.9.*",
    ),
    "torch-stable-abi29-cxx11-cu129-x86_64-linux": (
        "img2gray-1.1.2+torch2.9.stable.cu129.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch>=2.9",
    ),
    "torch214-cu130-x86_64-linux": (
        "img2gray-1.1.2+torch2.14.cu130-cp39-abi3-manylinux_2_28_x86_64.whl",
        "torch==2.14.*",
    ),
}


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> HubRepo:
    """Every Hub variant form (docs/to-wheel.md), nested layout, tag v1.1.2."""
    return make_repo(tmp_path_factory.mktemp("nested") / "img2gray", ALL_FORMS, so_cache=so_cache)


@pytest.fixture(scope="module")
def converted(
    nested: HubRepo, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ToWheelResult, Path]:
    out = tmp_path_factory.mktemp("wheelhouse")
    return to_wheels(ToWheelRequest(str(nested.root), "1.1.2", output_dir=out)), out


def _wheel(result: ToWheelResult, variant: str) -> Path:
    return next(c.wheel for c in result.converted if c.variant == variant)


def test_every_variant_form_converts(converted: tuple[ToWheelResult, Path]) -> None:
    result, out = converted
    assert result.rejected == () and result.exit_code == 0
    assert sorted(c.variant for c in result.converted) == sorted(ALL_FORMS)
    assert len(wheels_in(out)) == len(ALL_FORMS)
    assert leftovers(out) == []  # the staging folder is gone
    assert result.resolution.ref == "v1.1.2"


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_names_tags_and_metadata(converted: tuple[ToWheelResult, Path], variant: str) -> None:
    result, _ = converted
    name, torch_req = EXPECTED[variant]
    wheel = _wheel(result, variant)
    assert wheel.name == name
    contents = read_wheel(wheel)  # verifies every RECORD hash and that RECORD lists every file
    md = contents.metadata
    assert md["Name"] == "img2gray"
    assert md["Version"] == name.split("-")[1]  # the local part is in METADATA too
    assert md.get_all("Requires-Dist") == [torch_req]
    assert md["Requires-Python"] == ">=3.9"
    assert variant in md["Summary"] and "img2gray" in md["Summary"]
    wheel_file = contents.files[f"img2gray-{md['Version']}.dist-info/WHEEL"].decode()
    assert f"Tag: {'-'.join(name[:-4].split('-')[2:])}\n" in wheel_file


def test_binary_wheels_carry_the_extension_unchanged_and_a_guard(
    converted: tuple[ToWheelResult, Path], nested: HubRepo, so_cache: Path
) -> None:
    result, _ = converted
    variant = "torch27-cxx11-cu128-x86_64-linux"
    original = variant_files(variant, so_cache=so_cache).files
    files = read_wheel(_wheel(result, variant)).files
    so = [n for n in files if n.endswith(".abi3.so")]
    assert len(so) == 1 and files[so[0]] == original[so[0]]
    assert files[so[0]][:4] == b"\x7fELF"
    assert files["img2gray/_ops.py"] == original["img2gray/_ops.py"]
    init = files["img2gray/__init__.py"].decode()
    lines = init.splitlines()
    # After the docstring and the __future__ import, before anything loads the extension.
    guard_line = lines.index(
        f"from . import {GUARD_MODULE}  # noqa: F401,E402  (added by kernelwheel)"
    )
    assert guard_line > lines.index("from __future__ import annotations")
    assert guard_line < lines.index("from ._ops import add_op_namespace_prefix, ops")
    assert (
        "torch 2.7" in files[f"img2gray/{GUARD_MODULE}.py"].decode()
        or "(2, 7)" in files[f"img2gray/{GUARD_MODULE}.py"].decode()
    )
    compile(init, "__init__.py", "exec")


def test_noarch_wheels_have_no_binary_and_no_guard(converted: tuple[ToWheelResult, Path]) -> None:
    result, _ = converted
    for variant in ("torch-cuda", "torch-universal"):
        files = read_wheel(_wheel(result, variant)).files
        assert not any(n.endswith((".so", ".pyd")) for n in files)
        assert f"img2gray/{GUARD_MODULE}.py" not in files
        converted_ = next(c for c in result.converted if c.variant == variant)
        assert converted_.abi == "not checked (noarch)"


def test_abi_checked_where_elf(converted: tuple[ToWheelResult, Path]) -> None:
    result, _ = converted
    by = {c.variant: c for c in result.converted}
    assert by["torch27-cxx11-cu128-aarch64-linux"].abi == "ok"
    assert by["torch210-cxx11-cu130-x86_64-linux"].abi == "ok"
    assert by["torch28-metal-aarch64-darwin"].abi.startswith("not checked")
    assert by["torch211-cu128-x86_64-windows"].abi.startswith("not checked")


def test_byte_reproducible(
    converted: tuple[ToWheelResult, Path], nested: HubRepo, tmp_path: Path
) -> None:
    result, out = converted
    again = to_wheels(
        ToWheelRequest(
            str(nested.root), "1.1.2", output_dir=tmp_path, variants=("torch2{7,10}-*",)
        ),
        abi_check=None,
    )
    assert len(again.converted) == len(
        [v for v in ALL_FORMS if v.startswith(("torch27-", "torch210-"))]
    )
    for c in again.converted:
        assert c.wheel.read_bytes() == (out / c.wheel.name).read_bytes(), c.wheel.name


def test_flat_layout_with_metadata_on_a_major_branch(so_cache: Path, tmp_path: Path) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    meta = {
        "name": "img2gray",
        "version": "1.3.0",
        "license": "apache-2.0",
        "python-depends": ["einops>=0.8"],
    }
    names = ["torch214-cxx11-cu130-x86_64-linux", "torch-cuda"]
    repo.set_variants(
        variant_files(n, layout="flat", so_cache=so_cache, metadata=meta) for n in names
    )
    repo.commit("flat build")
    repo.branch("v1")
    result = to_wheels(ToWheelRequest(str(repo.root), "1", output_dir=tmp_path / "out"))
    assert result.resolution.ref == "v1" and result.rejected == ()
    by = {c.variant: c for c in result.converted}
    binary = by["torch214-cxx11-cu130-x86_64-linux"]
    assert binary.wheel.name == (
        "img2gray-1.3.0+torch2.14.cu130.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    )
    assert binary.layout is Layout.FLAT and binary.package == "img2gray"
    assert any("version 1.3.0 from metadata.json" in n for n in binary.notes)
    contents = read_wheel(binary.wheel)
    md = contents.metadata
    assert md.get_all("Requires-Dist") == ["torch==2.14.*", "einops>=0.8"]
    assert md["License-Expression"] == "Apache-2.0"  # canonical SPDX spelling
    assert "img2gray/img2gray/__init__.py" not in contents.files  # the shim is left out
    assert "img2gray/metadata.json" not in contents.files
    assert {"img2gray/__init__.py", "img2gray/_ops.py"} <= set(contents.files)
    assert dict(binary.left_out)["img2gray/__init__.py"].startswith("compatibility shim")
    noarch = by["torch-cuda"]
    assert noarch.wheel.name == "img2gray-1.3.0+cuda-py3-none-any.whl"
    assert read_wheel(noarch.wheel).metadata.get_all("Requires-Dist") == ["torch", "einops>=0.8"]


@pytest.fixture(scope="module")
def history(
    tmp_path_factory: pytest.TempPathFactory, so_cache: Path
) -> tuple[HubRepo, dict[str, str]]:
    """v1.1.0 (lightweight tag), v1.1.2 (annotated), branch v1 ahead of it, v2.0.0."""
    repo = HubRepo(tmp_path_factory.mktemp("history") / "img2gray")
    commits = {}
    for salt, tag in (("a", "v1.1.0"), ("b", "v1.1.2"), ("c", None), ("d", "v2.0.0")):
        repo.set_variants(
            [variant_files("torch27-cxx11-cu128-x86_64-linux", so_cache=so_cache, salt=salt)]
        )
        commits[salt] = repo.commit(f"build {salt}")
        if tag:
            repo.tag(tag, annotated=tag == "v1.1.2")
        if salt == "c":
            repo.branch("v1")
    return repo, commits


@pytest.mark.parametrize(
    ("version", "revision", "ref", "commit", "wheel_version"),
    [
        ("1.1.2", None, "v1.1.2", "b", "1.1.2"),
        ("1.1.0", None, "v1.1.0", "a", "1.1.0"),
        (">=1.1,<2", None, "v1.1.2", "b", "1.1.2"),
        (">=1.1", None, "v2.0.0", "d", "2.0.0"),
        ("1", None, "v1", "c", "1"),
        ("1.1.5", "v1", "v1", "c", "1.1.5"),
        ("1.0.9", "<a>", "<a>", "a", "1.0.9"),
    ],
)
def test_versions_resolve_to_tags_branches_commits(
    history: tuple[HubRepo, dict[str, str]],
    tmp_path: Path,
    version: str,
    revision: str | None,
    ref: str,
    commit: str,
    wheel_version: str,
) -> None:
    repo, commits = history
    if revision == "<a>":
        revision = ref = commits["a"]
    result = to_wheels(
        ToWheelRequest(str(repo.root), version, revision=revision, output_dir=tmp_path),
        abi_check=None,
    )
    assert result.resolution.ref == ref
    assert result.resolution.commit == commits[commit]
    (wheel,) = [c.wheel for c in result.converted]
    assert wheel.name.startswith(f"img2gray-{wheel_version}+torch2.7.cu128.cxx11-")
    # The extension differs per commit (salted namespace): the right commit's bytes were used.
    ns = (
        "_img2gray_"
        + hashlib.sha256(("torch27-cxx11-cu128-x86_64-linux" + commit).encode()).hexdigest()[:7]
    )
    assert f"img2gray/{ns}.abi3.so" in read_wheel(wheel).files


def test_clone_uses_remote_branches_and_needs_lfs_objects(
    history: tuple[HubRepo, dict[str, str]], tmp_path: Path
) -> None:
    repo, commits = history
    clone = tmp_path / "img2gray"
    subprocess.run(["git", "clone", "-q", str(repo.root), str(clone)], check=True)
    request = ToWheelRequest(str(clone), "1", output_dir=tmp_path / "out")
    with pytest.raises(HubError) as info:
        to_wheels(request, abi_check=None)
    message = str(info.value)
    assert "Git LFS pointer whose object" in message and "lfs pull" in message
    assert leftovers(tmp_path / "out") == [] and wheels_in(tmp_path / "out") == []
    shutil.copytree(repo.lfs_dir, clone / ".git" / "lfs" / "objects")
    result = to_wheels(request, abi_check=None)
    assert (result.resolution.ref, result.resolution.commit) == ("v1", commits["c"])


def test_tampered_lfs_object_stops_everything(so_cache: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "img2gray", SEED_13[:3], so_cache=so_cache)
    victim = sorted(repo.lfs_dir.rglob("*"))[-1]
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    out = tmp_path / "out"
    with pytest.raises(HubError) as info:
        to_wheels(ToWheelRequest(str(repo.root), "1.1.2", output_dir=out))
    assert "does not match what the source announced" in str(info.value)
    assert victim.name in str(info.value)  # the announced sha256
    assert wheels_in(out) == [] and leftovers(out) == []


def test_symlinks_inside_the_repo_are_followed(so_cache: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "img2gray", ["torch-universal"], so_cache=so_cache, tag=None)
    repo.symlink("build/torch-cpu", "torch-universal")  # a variant folder aliasing another
    repo.write_file("docs/helpers.py", b"HELP = 1\n")
    repo.symlink("build/torch-universal/img2gray/helpers.py", "../../../docs/helpers.py")
    repo.commit("links")
    result = to_wheels(ToWheelRequest(str(repo.root), "0.1", revision="main", output_dir=tmp_path))
    names = {c.variant: c.wheel.name for c in result.converted}
    assert names == {
        "torch-cpu": "img2gray-0.1+cpu-py3-none-any.whl",
        "torch-universal": "img2gray-0.1+universal-py3-none-any.whl",
    }
    for wheel in names.values():
        assert read_wheel(tmp_path / wheel).files["img2gray/helpers.py"] == b"HELP = 1\n"


@pytest.mark.parametrize("target", ["../../../../../etc/passwd", "/etc/passwd"])
def test_symlinks_out_of_the_repo_are_refused(so_cache: Path, tmp_path: Path, target: str) -> None:
    repo = make_repo(tmp_path / "img2gray", ["torch-universal"], so_cache=so_cache, tag=None)
    repo.symlink("build/torch-universal/img2gray/passwd.py", target)
    repo.commit("evil link")
    with pytest.raises(HubError) as info:
        to_wheels(ToWheelRequest(str(repo.root), "0.1", revision="main", output_dir=tmp_path / "o"))
    assert "refusing symlink build/torch-universal/img2gray/passwd.py" in str(info.value)
    assert "outside the repository" in str(info.value)
    assert wheels_in(tmp_path / "o") == []


def test_missing_or_empty_build_is_a_clear_error(tmp_path: Path) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    repo.commit("readme only")
    with pytest.raises(HubError, match="has no build/ folder"):
        to_wheels(ToWheelRequest(str(repo.root), "0.1", revision="main", output_dir=tmp_path / "o"))
    repo.write_file("build/README.md", b"builds go here\n")
    repo.commit("build readme")
    with pytest.raises(HubError, match="build/ holds no variant folders"):
        to_wheels(ToWheelRequest(str(repo.root), "0.1", revision="main", output_dir=tmp_path / "o"))


def test_unmappable_and_unconvertible_variants_are_reported_not_dropped(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "img2gray", ["torch27-cxx11-cu128-x86_64-linux"], so_cache=so_cache)
    for odd in ("torch27-cxx11-cu128-riscv64-linux", "torch2-cxx11-cu128-x86_64-linux"):
        repo.write_file(f"build/{odd}/img2gray/__init__.py", b"")
    repo.write_file("build/torch28-cxx11-cu128-x86_64-linux/README.md", b"no package here\n")
    repo.commit("odd variants")
    repo.tag("v1.1.3")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.1.3", "-o", str(out)])
    assert code == 9  # the highest exit code among the rejections (HubError's, here)
    assert wheels_in(out) == [
        "img2gray-1.1.3+torch2.7.cu128.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    ]
    err = capsys.readouterr().err
    assert "torch27-cxx11-cu128-riscv64-linux: not converted: cannot map the variant name" in err
    assert "unknown arch 'riscv64'" in err
    assert "torch2-cxx11-cu128-x86_64-linux: not converted" in err
    assert "torch28-cxx11-cu128-x86_64-linux: not converted" in err and "no Python package" in err
    assert "1 of 4 selected variant(s) written" in err


def test_abi_violations_are_refused_unless_allowed(so_cache: Path, tmp_path: Path) -> None:
    repo = HubRepo(tmp_path / "img2gray")
    repo.set_variants(
        [
            variant_files(
                "torch27-cxx11-cu128-x86_64-linux", so_cache=so_cache, too_new_glibc=True
            ),
            variant_files("torch27-cxx11-cpu-x86_64-linux", so_cache=so_cache),
        ]
    )
    repo.commit("build")
    request = ToWheelRequest(str(repo.root), "1.0", revision="main", output_dir=tmp_path / "a")
    result = to_wheels(request)
    (bad,) = result.rejected
    assert bad.variant == "torch27-cxx11-cu128-x86_64-linux" and result.exit_code == 8
    assert "GLIBC_2.36" in bad.reason and "arc4random" in bad.reason
    assert "--allow-abi-violations" in bad.reason
    assert wheels_in(tmp_path / "a") == [
        "img2gray-1.0+torch2.7.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    ]
    allowed = to_wheels(
        ToWheelRequest(
            str(repo.root),
            "1.0",
            revision="main",
            output_dir=tmp_path / "b",
            allow_abi_violations=True,
        )
    )
    assert allowed.rejected == () and len(wheels_in(tmp_path / "b")) == 2
    by = {c.variant: c.abi for c in allowed.converted}
    assert by["torch27-cxx11-cu128-x86_64-linux"].startswith("violations allowed")


def test_variant_globs_select_and_must_match(nested: HubRepo, tmp_path: Path) -> None:
    result = to_wheels(
        ToWheelRequest(
            str(nested.root),
            "1.1.2",
            output_dir=tmp_path,
            variants=("*-aarch64-linux", "torch-cuda"),
        ),
        abi_check=None,
    )
    assert sorted(c.variant for c in result.converted) == sorted(
        [v for v in ALL_FORMS if v.endswith("-aarch64-linux")] + ["torch-cuda"]
    )
    assert "torch27-cxx11-cu128-x86_64-linux" in result.not_selected
    with pytest.raises(UsageError, match="--variant pattern 'torch99-\\*' matches no variant"):
        to_wheels(
            ToWheelRequest(str(nested.root), "1.1.2", output_dir=tmp_path, variants=("torch99-*",))
        )


def test_cli_says_which_revision_was_resolved(
    nested: HubRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit = git(nested.root, "rev-parse", "v1.1.2")
    code = main(
        ["to-wheel", str(nested.root), ">=1,<2", "-o", str(tmp_path), "--variant", "torch-cuda"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert f"revision: >=1,<2 -> tag v1.1.2 (commit {commit})" in out
    assert "img2gray-1.1.2+cuda-py3-none-any.whl" in out


def test_not_a_clone_and_not_a_repo_id(tmp_path: Path) -> None:
    with pytest.raises(HubError, match="not a git clone"):
        to_wheels(ToWheelRequest(str(tmp_path), "1.1.2", output_dir=tmp_path / "o"))
    with pytest.raises(HubError, match="neither a local folder nor a Hub repo id"):
        to_wheels(ToWheelRequest("not a repo", "1.1.2", output_dir=tmp_path / "o"))
    with pytest.raises(HubError, match="no such folder"):
        to_wheels(ToWheelRequest("./missing/clone/x", "1.1.2", output_dir=tmp_path / "o"))


def test_compact_local_version_style_via_flag_and_environment(
    nested: HubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--local-version-style compact (or KERNELWHEEL_LOCAL_VERSION_STYLE) stamps the design's form
    in the file name and METADATA, with Requires-Dist right for a two-digit minor."""
    picks = ["torch27-cxx11-cu128-x86_64-linux", "torch210-cxx11-cu130-x86_64-linux"]
    args = ["to-wheel", str(nested.root), "1.1.2", "--variant", picks[0], "--variant", picks[1]]
    assert main([*args, "-o", str(tmp_path / "flag"), "--local-version-style", "compact"]) == 0
    monkeypatch.setenv("KERNELWHEEL_LOCAL_VERSION_STYLE", "compact")
    assert main([*args, "-o", str(tmp_path / "env")]) == 0
    for out in (tmp_path / "flag", tmp_path / "env"):
        found = {n.split("-")[1]: read_wheel(out / n).metadata for n in wheels_in(out)}
        assert sorted(found) == ["1.1.2+torch210cu130cxx11", "1.1.2+torch27cu128cxx11"]
        assert found["1.1.2+torch210cu130cxx11"]["Version"] == "1.1.2+torch210cu130cxx11"
        assert found["1.1.2+torch210cu130cxx11"].get_all("Requires-Dist") == ["torch==2.10.*"]
        assert found["1.1.2+torch27cu128cxx11"].get_all("Requires-Dist") == ["torch==2.7.*"]


def test_repo_at_version_as_variants_takes_it_converts_that_version(
    so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``variants CLONE@1.1.3`` then ``to-wheel CLONE@1.1.3``: before, argparse's "the following
    arguments are required: VERSION" (and ``CLONE@1.1.3 1.1.3`` was "neither a local folder nor
    a Hub repo id")."""
    repo = make_repo(tmp_path / "img2gray", ["torch27-cxx11-cu128-x86_64-linux"], so_cache=so_cache)
    repo.tag("v1.1.3")
    out = tmp_path / "out"
    assert main(["to-wheel", f"{repo.root}@1.1.3", "-o", str(out)]) == 0
    assert wheels_in(out) == [
        "img2gray-1.1.3+torch2.7.cu128.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    ]
    capsys.readouterr()
    assert main(["to-wheel", str(repo.root), "-o", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "VERSION is missing" in err and f"{repo.root}@VERSION" in err
    assert not (tmp_path / "none").exists()
