"""Issue 38 family 10: a run refused for its arguments (a bad flag value, a bad VERSION, a
variant pattern that matches nothing) creates no folder: no ``logs/``, no output folder, no
cache folder. The commands run for real on folders the tests make; the tree is compared before
and after."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitrepo import HubRepo, variant_files
from support.variants import TORCH27_CPU as CPU

from kernelwheel.cli import main
from kernelwheel.errors import UsageError


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _project(root: Path) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "k.cpp").write_text("")
    (root / "torch-ext" / "nk_kernel").mkdir(parents=True)
    (root / "torch-ext" / "nk_kernel" / "__init__.py").write_text("")
    (root / "build.toml").write_text(
        '[general]\nname = "nk-kernel"\nbackends = ["cpu"]\n[torch]\nsrc = ["csrc/k.cpp"]\n'
        '[kernel.k]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["csrc/k.cpp"]\n'
    )
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["to-wheel", "{p}", "1.0", "--jobs", "0", "-o", "{t}/out"],
        ["to-wheel", "{p}", "not-a-version", "-o", "{t}/out"],
        ["lock", "{p}", "--jobs", "0"],
        ["download", "{p}", "--wheelhouse", "{t}/wh", "--jobs", "0"],
        ["build", "{p}", "--variant", "no-such-variant", "-o", "{t}/out"],
        ["build", "{p}", "--jobs", "abc", "-o", "{t}/out"],
    ],
)
def test_a_usage_error_creates_no_folder(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    project = _project(tmp_path / "p")
    before = _tree(tmp_path)
    code = main([a.format(p=project, t=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code, err
    assert "Traceback" not in err and "log:" not in err, err
    assert _tree(tmp_path) == before


def test_to_wheel_with_a_variant_that_matches_nothing_leaves_nothing(
    so_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The refusal comes after the repo is resolved (its steps ran): the log they began is
    # removed with the folders made for it.
    monkeypatch.setenv("KERNELWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    repo = HubRepo(tmp_path / "img2gray")
    repo.set_variants([variant_files(CPU, so_cache=so_cache)])
    repo.commit("build")
    out = tmp_path / "out"
    argv = ["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)]
    code = main([*argv, "--variant", "torch99-*"])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code and "torch99-*" in err, err
    assert not out.exists()
    # the same run with a good selection keeps its log
    assert main(argv) == 0
    assert (out / "logs" / "to-wheel-img2gray.log").is_file()
