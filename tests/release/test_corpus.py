"""scripts/corpus.py: one row per kernel project of a corpus (read, plan, build, check).

Two tiny projects written here: ``good`` (CPU and ROCm kernels) and ``broken`` (a build.toml
kernelwheel refuses). Builds go through an injected runner that records the kernelwheel
command lines and answers as the CLI's --json would, so nothing compiles."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

from kernelwheel.plan.options import ENV_VARS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "corpus.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("corpus", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


corpus = _load()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def write_corpus(root: Path) -> Path:
    good = root / "good"
    (good / "torch-ext" / "good").mkdir(parents=True)
    (good / "torch-ext" / "good" / "__init__.py").write_text("")
    for rel in ("torch-ext/torch_binding.cpp", "k_cpu.cpp", "k_rocm.hip"):
        (good / rel).write_text("// x\n")
    (good / "build.toml").write_text(
        '[general]\nname = "good"\nversion = "0.1.0"\nbackends = ["cpu", "rocm"]\n'
        '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
        '[kernel.k_cpu]\nbackend = "cpu"\nsrc = ["k_cpu.cpp"]\n'
        '[kernel.k_rocm]\nbackend = "rocm"\nsrc = ["k_rocm.hip"]\n'
    )
    broken = root / "broken"
    broken.mkdir()
    (broken / "build.toml").write_text('[general]\nname = "broken"\nflavour = 1\n')
    (root / "not-a-project").mkdir()  # no build.toml: not a row
    return root


def rows_of(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    assert lines[0].split() == ["project", "read", "planned", "built", "checked", "reason"]
    return {line.split()[0]: line.split() for line in lines[2:]}


def test_read_and_plan_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_corpus(tmp_path / "corpus")

    def no_build(argv: Sequence[str]) -> tuple[int, str, str]:
        raise AssertionError(f"read + plan must not run kernelwheel: {argv}")

    markdown = tmp_path / "docs" / "corpus.md"
    assert corpus.main([str(root), "--markdown", str(markdown)], run=no_build) == 0
    out = capsys.readouterr().out
    rows = rows_of(out)
    assert sorted(rows) == ["broken", "good"]  # sorted folders; not-a-project is no row
    broken_line = next(line for line in out.splitlines() if line.startswith("broken "))
    # The error's one line, without the path the project column already gives.
    assert "general.flavour: unknown key 'flavour'" in broken_line
    assert str(root) not in broken_line
    # good: every rocm and cpu variant of the bundled recipes is planned; cpu ones are built here.
    good = rows["good"]
    assert good[1] == "ok"
    planned, here = int(good[2]), int(good[3].strip("("))
    assert planned > here > 0 and good[4:6] == ["here)", "-"]
    assert markdown.read_text().splitlines()[:2] == [
        "| project | read | planned | built | checked | reason |",
        "|---|---|---|---|---|---|",
    ]
    assert f"| good | ok | {planned} ({here} here) | - | - |   |" in markdown.read_text()


def test_build_mode_builds_the_selected_variants_kernelwheel_compiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_corpus(tmp_path / "corpus")
    calls: list[list[str]] = []

    def fake(argv: Sequence[str]) -> tuple[int, str, str]:
        calls.append(list(argv))
        if argv[0] == "build":
            names = [argv[i + 1] for i, a in enumerate(argv) if a == "--variant"]
            wheels = [
                {"variant": n, "status": "built", "path": f"/w/{n}.whl", "error": None}
                for n in names
            ]
            return 0, json.dumps({"wheels": wheels}), ""
        reports = [{"ok": not p.endswith("aarch64-linux.whl")} for p in argv[2:]]
        return 8, json.dumps({"ok": False, "reports": reports}), "error: 1 ABI violation(s)"

    out_dir = tmp_path / "out"
    code = corpus.main(
        [
            str(root / "good"),
            str(root / "broken"),
            "--build",
            "torch213-cxx11-*",
            "--cuda-capabilities",
            "9.0",
            "--version",
            "1.2.3",
            "--output-dir",
            str(out_dir),
        ],
        run=fake,
    )
    assert code == 1  # a wheel failed its check
    build_call, check_call = calls
    # Only the selected variants kernelwheel builds here: the ROCm ones are left out.
    assert build_call == [
        "build", str(root / "good"), "--json", "--output-dir", str(out_dir / "good"),
        "--variant", "torch213-cxx11-cpu-x86_64-linux",
        "--variant", "torch213-cxx11-cpu-aarch64-linux",
        "--cuda-capabilities", "9.0", "--version", "1.2.3",
    ]  # fmt: skip
    assert check_call == [
        "check",
        "--json",
        "/w/torch213-cxx11-cpu-x86_64-linux.whl",
        "/w/torch213-cxx11-cpu-aarch64-linux.whl",
    ]
    rows = rows_of(capsys.readouterr().out)
    assert rows["good"][5:8] == ["2/2", "1/2", "check:"]  # after "N (M here)"
    assert rows["broken"][1] != "ok"


def test_a_selection_of_only_other_toolchains_says_why_nothing_was_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_corpus(tmp_path / "corpus")

    def no_build(argv: Sequence[str]) -> tuple[int, str, str]:
        raise AssertionError(argv)

    code = corpus.main([str(root / "good"), "--build", "*-rocm71-*"], run=no_build)
    assert code == 0
    line = capsys.readouterr().out.splitlines()[2]
    assert "0/0" in line and "none built here: no ROCm toolchain" in line


def test_a_folder_without_projects_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="holds no build.toml"):
        corpus.main([str(tmp_path)])


def test_a_missing_folder_or_a_file_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    """Issue 30: scripts/corpus.py on a missing folder raised FileNotFoundError."""
    with pytest.raises(SystemExit, match="does not exist"):
        corpus.main([str(tmp_path / "missing")])
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="is not a folder"):
        corpus.main([str(tmp_path / "file")])
