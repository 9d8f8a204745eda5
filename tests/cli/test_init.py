"""`kernelwheel init`: what it writes, what it refuses (fast: nothing is compiled here; the
build of a generated project is tests/builder/test_init_build.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.hostile import MARK, hostile_checkout

from kernelwheel.cli import main
from kernelwheel.errors import UsageError
from kernelwheel.model.card import card_fields, project_card
from kernelwheel.model.project import load_project
from kernelwheel.model.sections import Framework
from kernelwheel.scaffold.project import InitRequest, init_project, parse_backends, render_files


def test_writes_an_edition_5_project_the_reader_accepts(tmp_path: Path) -> None:
    result = init_project(InitRequest("my-op", tmp_path, ("cpu", "cuda")))
    project = load_project(result.root)
    assert (project.name, project.package, project.edition, project.api_version) == (
        "my-op",
        "my_op",
        5,
        0,
    )
    assert project.backends == ("cpu", "cuda")
    assert sorted(k.backend for k in project.kernels) == ["cpu", "cuda"]
    assert {p.as_posix() for p in result.files} == {
        "build.toml",
        "csrc/my_op.h",
        "csrc/my_op_cpu.cpp",
        "csrc/my_op_cuda.cu",
        "torch-ext/torch_binding.h",
        "torch-ext/torch_binding.cpp",
        "torch-ext/my_op/__init__.py",
        "tests/test_my_op.py",
        "pytest.ini",
        ".gitignore",
        "README.md",
        "CARD.md",
    }
    binding = (result.root / "torch-ext/torch_binding.cpp").read_text()
    for macro in ("TORCH_LIBRARY_EXPAND", "TORCH_LIBRARY_IMPL_EXPAND", "CPU_KERNEL", "CUDA_KERNEL"):
        assert macro in binding
    # the project's README gives the author's loop, not only the release path
    assert "kernelwheel test " in (result.root / "README.md").read_text()
    assert not list(tmp_path.glob(".kernelwheel-*"))  # the staging folder is gone


def test_one_backend_writes_only_its_kernel(tmp_path: Path) -> None:
    result = init_project(InitRequest("solo", tmp_path, ("cpu",)))
    assert not (result.root / "csrc/solo_cuda.cu").exists()
    assert load_project(result.root).backends == ("cpu",)
    assert 'BACKENDS = ("cpu",)' in (result.root / "tests/test_solo.py").read_text()


def test_refuses_an_existing_folder_and_leaves_it_alone(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    with pytest.raises(UsageError, match="already exists"):
        init_project(InitRequest("taken", tmp_path))
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["mine.txt"]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("My-Op", "uppercase"),
        ("my_op", "has '_'"),
        ("9op", "start with a letter"),
        ("op-", "end with a letter or digit"),
        ("is", "Python keyword"),
        ("a/b", "not a path"),
        ("..", "not a path"),
    ],
)
def test_refuses_names_outside_build_tomls_rule(tmp_path: Path, name: str, why: str) -> None:
    with pytest.raises(UsageError, match=why) as refused:
        init_project(InitRequest(name, tmp_path))
    assert list(tmp_path.iterdir()) == []  # nothing left behind
    # the fix is a command that works, not an edit of a build.toml that does not exist
    assert "name =" not in str(refused.value.hint)
    if name in ("My-Op", "my_op", "is"):
        fixed = "is-kernel" if name == "is" else "my-op"
        assert str(refused.value.hint).startswith(f"kernelwheel init {fixed};")


def test_parse_backends() -> None:
    assert parse_backends("cuda,cpu") == ("cpu", "cuda")
    assert parse_backends(" cpu ") == ("cpu",)
    for bad, why in (
        ("rocm", "'rocm' is not a backend"),
        ("", "names no backend"),
        ("rocm,xpu", "'rocm', 'xpu' are not backends"),
        ("cpu,cpu", "twice"),
    ):
        with pytest.raises(UsageError, match=why):
            parse_backends(bad)


def test_cli_writes_and_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["init", "relu-ish", "--backends", "cpu", "--directory", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"next: cd {tmp_path / 'relu-ish'} && kernelwheel test" in out
    assert "then: kernelwheel build -o wheelhouse" in out
    assert main(args) == UsageError.exit_code
    assert "already exists" in capsys.readouterr().err


def test_the_project_s_tests_stand_alone_inside_a_hostile_checkout(tmp_path: Path) -> None:
    """The init project's pytest.ini makes it pytest's rootdir: run from inside the project or
    pointed at from the outer checkout, pytest reads the project's configuration, not the
    outer one (collection only: the test imports the built package, which is not installed
    here, and torch; tests/builder/test_init_build.py runs the tests for real)."""
    outer = hostile_checkout(tmp_path / "outer")
    (outer / "src").mkdir()
    project = init_project(InitRequest("my-op", outer / "src", ("cpu",))).root
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    for cwd, target in ((project, "tests"), (outer, str(project / "tests"))):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", target],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        out = proc.stdout + proc.stderr
        assert f"rootdir: {project}" in out and "configfile: pytest.ini" in out, out
        assert not (outer / MARK).exists(), out
        assert "no_such_plugin" not in out and "RuntimeError" not in out, out
        # what is left is the test module's own import of what is not installed here
        collected = [line for line in out.splitlines() if line.startswith("E   ")]
        assert collected and all("No module named" in line for line in collected), out


def test_writes_a_card_template_that_renders_with_the_projects_fields(tmp_path: Path) -> None:
    from kernelwheel.model.card import card_fields, default_template, project_card

    result = init_project(InitRequest("my-op", tmp_path, ("cpu",)))
    template = (result.root / "CARD.md").read_text()
    assert template == default_template() and "{{ name }}" in template
    project = load_project(result.root)
    card = project_card(project, card_fields(project))
    assert "# my-op" in card and "my_op.add_one(...)" in card
    assert "- `add_one(Tensor x) -> Tensor`" in card and "{{" not in card


def test_the_projects_tests_say_why_a_test_was_skipped(tmp_path: Path) -> None:
    # a CUDA build tested where there is no GPU printed "ss" and "2 skipped", never the reason
    # the test gives ("needs a CUDA device"): pytest shows it only with -rs
    project = init_project(InitRequest("my-op", tmp_path, ("cpu", "cuda"))).root
    (project / "tests" / "test_my_op.py").write_text(
        "import pytest\n\n\n@pytest.mark.skipif(True, reason='needs a CUDA device')\n"
        "def test_on_the_gpu():\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SKIPPED [1] tests/test_my_op.py:4: needs a CUDA device" in proc.stdout


@pytest.mark.parametrize(
    ("kind", "framework", "files"),
    [
        ("noarch", Framework.TORCH_NOARCH, {"torch-ext/my_op/__init__.py"}),
        (
            "tvm-ffi",
            Framework.TVM_FFI,
            {
                "csrc/my_op.h",
                "csrc/my_op_cpu.cpp",
                "csrc/my_op_cuda.cu",
                "tvm-ffi-ext/tvm_ffi_binding.cpp",
                "tvm-ffi-ext/my_op/__init__.py",
            },
        ),
    ],
)
def test_other_kinds_write_projects_of_their_kind(
    tmp_path: Path, kind: str, framework: Framework, files: set[str]
) -> None:
    result = init_project(InitRequest("my-op", tmp_path, ("cpu", "cuda"), kind))
    project = load_project(result.root)
    assert (project.framework, project.package, project.edition) == (framework, "my_op", 5)
    assert project.backends == ("cpu", "cuda")
    # noarch: nothing compiled; tvm-ffi: a kernel per backend, with no torch dependency
    assert {(k.backend, k.depends) for k in project.kernels} == (
        {("cpu", ()), ("cuda", ())} if kind == "tvm-ffi" else set()
    )
    common = {
        "build.toml",
        "tests/test_my_op.py",
        "pytest.ini",
        ".gitignore",
        "README.md",
        "CARD.md",
    }
    assert {p.as_posix() for p in result.files} == files | common
    readme = (result.root / "README.md").read_text()
    assert f"--kind {kind}" in readme and "kernelwheel test" in readme
    # the card names the package's function, as the torch kind's does
    card = project_card(project, card_fields(project))
    assert "my_op.add_one(...)" in card and "{{" not in card


def test_a_tvm_ffi_project_of_one_backend_has_its_kernel_alone(tmp_path: Path) -> None:
    result = init_project(InitRequest("solo", tmp_path, ("cpu",), "tvm-ffi"))
    assert not (result.root / "csrc/solo_cuda.cu").exists()
    assert [k.backend for k in load_project(result.root).kernels] == ["cpu"]
    assert 'BACKENDS = ("cpu",)' in (result.root / "tests/test_solo.py").read_text()


def test_backends_are_those_of_the_kind() -> None:
    # noarch lists any backend kernel-builder knows (one wheel extra each); tvm-ffi compiles
    # the backends its recipe has a flavour for, as torch does
    assert parse_backends("xpu,cpu,rocm", "noarch") == ("cpu", "rocm", "xpu")
    with pytest.raises(UsageError, match="'rocm' is not a backend .* --kind tvm-ffi") as refused:
        parse_backends("rocm", "tvm-ffi")
    assert refused.value.hint == "give one or more of cpu,cuda, comma-separated"
    with pytest.raises(UsageError, match="kind 'jax'"):
        init_project(InitRequest("my-op", Path("."), ("cpu",), "jax"))


def test_cli_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as shown:
        main(["init", "--help"])
    assert shown.value.code == 0
    assert "--kind {torch,noarch,tvm-ffi}" in capsys.readouterr().out
    args = ["init", "tiny-py", "--kind", "noarch", "--backends", "cpu,xpu"]
    assert main([*args, "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "(noarch project, package tiny_py, backends cpu, xpu)" in out
    assert (
        "kernelwheel test  (run tests/ against your files, in the active venv: it must hold torch)"
        in out
    )
    assert load_project(tmp_path / "tiny-py").backends == ("cpu", "xpu")
    assert main(["init", "other", "--kind", "tvm-ffi", "--backends", "xpu"]) == 2
    assert "--kind tvm-ffi" in capsys.readouterr().err
    assert not (Path.cwd() / "other").exists()


@pytest.mark.parametrize("kind", ["torch", "noarch", "tvm-ffi"])
@pytest.mark.parametrize("backends", [("cpu", "cuda"), ("cpu",)], ids=",".join)
def test_the_python_written_is_as_ruff_formats_it(
    tmp_path: Path, kind: str, backends: tuple[str, ...]
) -> None:
    # `BACKENDS = ("cpu", "cuda",)`: the author's formatter (ruff, black) rewrote the line the
    # day they copied it, its trailing comma splitting the tuple over four lines
    files = render_files("my-kernel", backends, kind)
    for rel, text in files.items():
        if rel.endswith(".py"):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    ruff = [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", "100"]
    checked = subprocess.run([*ruff, "--diff", "."], cwd=tmp_path, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    test_py = next(text for rel, text in files.items() if rel.startswith("tests/"))
    if kind != "noarch":  # the backends a compiled project's tests look for, a valid tuple
        line = next(line for line in test_py.splitlines() if line.startswith("BACKENDS = "))
        assert eval(line.removeprefix("BACKENDS = ")) == backends


@pytest.mark.parametrize("kind", ["torch", "noarch", "tvm-ffi"])
def test_the_hub_repo_line_build_toml_offers_puts_get_kernel_on_the_card(
    tmp_path: Path, kind: str
) -> None:
    """The commented `[general.hub]` lines, uncommented as they stand, give the card the
    `get_kernel` lines of the repo an author uploads to (without them the card has none)."""
    result = init_project(InitRequest("my-op", tmp_path, ("cpu",), kind))
    project = load_project(result.root)
    assert "get_kernel" not in project_card(project, card_fields(project))
    build_toml = result.root / "build.toml"
    text = build_toml.read_text()
    assert '# [general.hub]\n# repo-id = "my-org/my-op"\n' in text
    build_toml.write_text(text.replace("# [general.hub]\n# repo-id", "[general.hub]\nrepo-id"))
    project = load_project(result.root)
    card = project_card(project, card_fields(project))
    assert 'my_op = get_kernel("my-org/my-op", version=0)' in card


def test_the_builds_outputs_stay_out_of_git_and_never_make_the_next_build_dirty(
    tmp_path: Path,
) -> None:
    """The project committed as `git add -A` commits it, after a build: the wheels, their logs
    and the Hub layout were committed too, and the next build's new logs made the one after it
    "built from a working tree with uncommitted changes" (the card's banner)."""
    from kernelwheel.plan.versioning import read_git_state

    root = init_project(InitRequest("my-op", tmp_path, ("cpu",))).root
    outputs = ["wheelhouse/my_op-0.1.0-cp310-abi3-linux_x86_64.whl", "wheelhouse/logs/v.log"]
    outputs += ["hub/README.md", "hub/build/v/metadata.json", "tests/__pycache__/t.pyc"]
    outputs += [".pytest_cache/v/cache/lastfailed"]
    for rel in outputs:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("built\n")

    def git(*args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b"}
        env |= {"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
        return subprocess.run(
            ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
        ).stdout

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "first")
    tracked = set(git("ls-files").split())
    assert tracked >= {"build.toml", "CARD.md", ".gitignore", "csrc/my_op_cpu.cpp"}
    assert not tracked & set(outputs)
    (root / "wheelhouse/logs/v.log").write_text("built again\n")
    state = read_git_state(root)
    assert state is not None and not state.dirty


def test_the_counts_init_md_gives_are_those_the_build_tests_see() -> None:
    # docs/init.md said "8 passed" for the torch project (its test has 9 since test_opcheck)
    # and "7 passed, the 5 CUDA ones skipped" for noarch: the integration tests assert 9 and
    # "8 passed, 6 skipped", from real runs
    import re

    repo = Path(__file__).parents[2]
    doc = (repo / "docs" / "init.md").read_text()
    built = (repo / "tests" / "builder" / "test_init_build.py").read_text()
    (torch_count,) = set(re.findall(r'"(\d+) passed" in proc.stdout and "skipped" not in', built))
    assert set(re.findall(r"(\d+) passed, none skipped", doc)) == {torch_count}
    (noarch,) = re.findall(r'"(\d+) passed, (\d+) skipped"', built)
    assert "noarch: {} passed, the {} CUDA ones skipped".format(*noarch) in doc
