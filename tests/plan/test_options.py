"""Tests for kernelwheel.plan.options: defaults < [tool.kernelwheel] < KERNELWHEEL_* < CLI flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwheel.errors import KernelwheelError, ProjectError, UsageError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.variant import Arch, LocalVersionStyle
from kernelwheel.plan.options import (
    DEFAULT_OPTIONS,
    Options,
    resolve_options,
)

PYPROJECT = """
[project]
name = "demo"

[tool.kernelwheel]
build = ["torch21*", "torch29-*"]
skip = "*-aarch64-*"
archs = ["x86_64"]
output-dir = "dist/wheels"
jobs = 2
"""


def kernel(tmp_path: Path, pyproject: str | None = PYPROJECT) -> Path:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def test_defaults() -> None:
    options = resolve_options(None, env={}, cli={})
    assert options == DEFAULT_OPTIONS
    assert (options.build, options.skip, options.archs) == (("*",), (), ("all",))
    assert options.only is None and options.jobs is None and options.recipes is None
    assert options.output_dir == Path("wheelhouse")
    assert options.source("build") == "default"
    assert options.arch_filter() is None


def test_pyproject_without_tool_table_or_without_pyproject(tmp_path: Path) -> None:
    assert resolve_options(kernel(tmp_path, None), env={}) == DEFAULT_OPTIONS
    assert resolve_options(kernel(tmp_path, "[project]\nname='x'\n"), env={}) == DEFAULT_OPTIONS


def test_pyproject_overrides_defaults(tmp_path: Path) -> None:
    options = resolve_options(kernel(tmp_path), env={})
    assert options.build == ("torch21*", "torch29-*")
    assert options.skip == ("*-aarch64-*",)
    assert options.archs == ("x86_64",)
    assert options.output_dir == tmp_path / "dist/wheels"  # relative to pyproject.toml
    assert options.jobs == 2
    assert options.source("skip") == "[tool.kernelwheel] skip"
    assert options.arch_filter() == (Arch.X86_64,)


def test_env_overrides_pyproject(tmp_path: Path) -> None:
    env = {
        "KERNELWHEEL_BUILD": "torch214-*  torch213-*",
        "KERNELWHEEL_ARCHS": "aarch64,x86_64",
        "KERNELWHEEL_JOBS": "auto",
        "KERNELWHEEL_SKIP": "",  # empty counts as unset
        "KERNELWHEEL_OUTPUT_DIR": "out",
    }
    options = resolve_options(kernel(tmp_path), env=env)
    assert options.build == ("torch214-*", "torch213-*")
    assert options.source("build") == "KERNELWHEEL_BUILD"
    assert options.archs == ("aarch64", "x86_64")
    assert options.jobs is None and options.source("jobs") == "KERNELWHEEL_JOBS"
    assert options.skip == ("*-aarch64-*",) and options.source("skip").startswith("[tool")
    assert options.output_dir == Path.cwd() / "out"


def test_cli_overrides_env(tmp_path: Path) -> None:
    env = {"KERNELWHEEL_BUILD": "torch214-*", "KERNELWHEEL_SKIP": "*-cpu-*"}
    cli = {"build": ["torch213-*", "torch212-* torch211-*"], "skip": None, "jobs": 8}
    options = resolve_options(kernel(tmp_path), env=env, cli=cli)
    assert options.build == ("torch213-*", "torch212-*", "torch211-*")
    assert options.source("build") == "--build"
    assert options.skip == ("*-cpu-*",) and options.source("skip") == "KERNELWHEEL_SKIP"
    assert options.jobs == 8 and options.source("jobs") == "--jobs"


def test_each_layer_replaces_not_merges(tmp_path: Path) -> None:
    options = resolve_options(kernel(tmp_path), env={}, cli={"skip": ["*-cu130-*"]})
    assert options.skip == ("*-cu130-*",)
    cleared = resolve_options(kernel(tmp_path, "[tool.kernelwheel]\nskip = []\n"), env={})
    assert cleared.skip == ()


def test_only_ignores_build_skip_and_archs_from_every_layer(tmp_path: Path) -> None:
    env = {"KERNELWHEEL_BUILD": "torch214-*"}
    name = "torch29-cxx11-cpu-aarch64-linux"
    options = resolve_options(kernel(tmp_path), env=env, cli={"only": name, "archs": ["x86_64"]})
    assert options.only == name and options.build == ("*",) and options.skip == ()
    assert options.arch_filter() is None
    assert options.selector().select([name, "torch214-cxx11-cpu-x86_64-linux"]) == (name,)


def test_selector_names_the_layer_in_errors(tmp_path: Path) -> None:
    options = resolve_options(kernel(tmp_path), env={"KERNELWHEEL_BUILD": "torch3*"})
    with pytest.raises(UsageError, match="KERNELWHEEL_BUILD pattern 'torch3\\*'"):
        options.selector().select(["torch214-cxx11-cpu-x86_64-linux"])
    options = resolve_options(kernel(tmp_path), env={})
    with pytest.raises(UsageError, match=r"\[tool.kernelwheel\] build pattern 'torch29-\*'"):
        options.selector().select(["torch214-cxx11-cpu-x86_64-linux"])


def test_arch_keywords() -> None:
    auto = resolve_options(None, env={"KERNELWHEEL_ARCHS": "auto"})
    assert auto.arch_filter(host=Arch.AARCH64) == (Arch.AARCH64,)
    mixed = resolve_options(None, env={}, cli={"archs": ["native", "x86_64"]})
    assert mixed.arch_filter(host=Arch.X86_64) == (Arch.X86_64,)
    assert resolve_options(None, env={}, cli={"archs": ["all"]}).arch_filter() is None


def test_paths_from_cli_are_relative_to_cwd(tmp_path: Path) -> None:
    options = resolve_options(None, env={}, cli={"recipes": "my-recipes"})
    assert options.recipes == Path.cwd() / "my-recipes"
    absolute = resolve_options(None, env={}, cli={"recipes": tmp_path})
    assert absolute.recipes == tmp_path


def subdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def fake_python(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_python_is_a_path_or_a_name_on_path_as_pip_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = fake_python(tmp_path / "bin", "mypython3")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    # A bare name is looked up on PATH (it used to become ./mypython3), in every layer.
    assert resolve_options(None, env={}, cli={"python": "mypython3"}).python == on_path
    assert resolve_options(None, env={"KERNELWHEEL_PYTHON": "mypython3"}).python == on_path
    project = kernel(subdir(tmp_path / "k"), '[tool.kernelwheel]\npython = "mypython3"\n')
    assert resolve_options(project, env={}).python == on_path
    # A value with a separator is a path: relative to the cwd (flag) or to pyproject.toml.
    local = resolve_options(None, env={}, cli={"python": "./venv/bin/python"}).python
    assert local == tmp_path / "venv/bin/python"
    project = kernel(subdir(tmp_path / "k2"), '[tool.kernelwheel]\npython = "venv/bin/python"\n')
    assert resolve_options(project, env={}).python == tmp_path / "k2/venv/bin/python"
    # A name that is not on PATH: a clear error naming the layer, never ./name.
    with pytest.raises(UsageError) as info:
        resolve_options(None, env={}, cli={"python": "python3.99"})
    assert str(info.value).startswith("--python: no 'python3.99' on PATH")
    assert "./python3.99" in str(info.value)  # the fix: give its path
    with pytest.raises(ProjectError, match=r"tool\.kernelwheel\.python: no 'nope' on PATH"):
        resolve_options(
            kernel(subdir(tmp_path / "k3"), '[tool.kernelwheel]\npython = "nope"\n'), env={}
        )


def test_options_are_frozen() -> None:
    with pytest.raises(AttributeError):
        DEFAULT_OPTIONS.build = ("x",)  # type: ignore[misc]
    assert isinstance(DEFAULT_OPTIONS, Options)


@pytest.mark.parametrize(
    ("env", "text"),
    [
        ({"KERNELWHEEL_ARCHS": "x86-64"}, "KERNELWHEEL_ARCHS: unknown arch 'x86-64'"),
        ({"KERNELWHEEL_JOBS": "0"}, "KERNELWHEEL_JOBS: expected a positive integer"),
        ({"KERNELWHEEL_BUILD": "torch2{13"}, "KERNELWHEEL_BUILD: selector 'torch2{13'"),
    ],
)
def test_bad_environment_values(env: dict[str, str], text: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_options(None, env=env)
    assert text in str(info.value)


def test_bad_cli_values() -> None:
    with pytest.raises(UsageError, match="--only: expected one variant name"):
        resolve_options(None, env={}, cli={"only": "a b"})
    with pytest.raises(UsageError, match="unknown option 'bogus'"):
        resolve_options(None, env={}, cli={"bogus": 1})


@pytest.mark.parametrize(
    ("table", "key", "text"),
    [
        ("biuld = '*'", "tool.kernelwheel.biuld", "did you mean 'build'"),
        ("only = 'x'", "tool.kernelwheel.only", "command-line flag only"),
        ("jobs = -1", "tool.kernelwheel.jobs", "positive integer"),
        ("archs = 'sparc'", "tool.kernelwheel.archs", "unknown arch"),
        ("build = 3", "tool.kernelwheel.build", "expected a string or a list"),
        ("output_dir = 'x'", "tool.kernelwheel.output_dir", "did you mean 'output-dir'?"),
        ("dependencise = {}", "tool.kernelwheel.dependencise", "did you mean 'dependencies'?"),
    ],
)
def test_bad_pyproject_values_name_file_and_key(
    tmp_path: Path, table: str, key: str, text: str
) -> None:
    kernel(tmp_path, f"[tool.kernelwheel]\n{table}\n")
    with pytest.raises(ProjectError) as info:
        resolve_options(tmp_path, env={})
    message = str(info.value)
    assert str(tmp_path / "pyproject.toml") in message and key in message and text in message


def test_tool_kernelwheel_that_is_no_table(tmp_path: Path) -> None:
    kernel(tmp_path, "[tool]\nkernelwheel = 'x86_64'\n")
    with pytest.raises(ProjectError) as info:
        resolve_options(tmp_path, env={})
    assert "pyproject.toml: tool.kernelwheel: expected a table, got a string" in str(info.value)
    kernel(tmp_path, "tool = 1\n")
    with pytest.raises(ProjectError, match=r"pyproject.toml: \[tool\]: expected a table"):
        resolve_options(tmp_path, env={})


def test_invalid_pyproject_toml(tmp_path: Path) -> None:
    kernel(tmp_path, "[tool.kernelwheel\n")
    with pytest.raises(ProjectError, match="invalid TOML"):
        resolve_options(tmp_path, env={})


def test_dependencies_table_belongs_to_lock_not_build(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernelwheel]\nskip = "*-aarch64-*"\n'
        '[tool.kernelwheel.dependencies]\n"drbh/img2gray" = ">=0.1,<0.2"\n'
    )
    options = resolve_options(tmp_path, env={}, cli={})
    assert options.skip == ("*-aarch64-*",)


def test_every_build_setting_has_all_three_layers(tmp_path: Path) -> None:
    """Each build setting (but --only) is a TOML key, a KERNELWHEEL_* variable and a flag.
    ``version`` has no variable: KERNELWHEEL_VERSION is the name a CI would pin kernelwheel's
    own version with, and it must not become every kernel's wheel version."""
    from kernelwheel.plan.options import OPTIONS

    for option in OPTIONS:
        if option.name == "only":
            continue
        if option.name == "version":
            assert option.toml == "version" and option.env is None, option
            continue
        assert option.toml and option.env and option.env.startswith("KERNELWHEEL_"), option
    style = resolve_options(
        kernel(tmp_path, '[tool.kernelwheel]\nlocal-version-style = "compact"\nrepair = false\n'),
        env={"KERNELWHEEL_NO_INDEX": "1", "KERNELWHEEL_FIND_LINKS": "wheels https://h/x"},
        cli={"plat": "manylinux_2_34", "best_effort": True},
    )
    assert style.local_version_style is LocalVersionStyle.COMPACT
    assert style.source("local_version_style") == "[tool.kernelwheel] local-version-style"
    assert style.repair is False and style.manylinux() is None
    assert style.no_index is True and style.source("no_index") == "KERNELWHEEL_NO_INDEX"
    assert style.find_links == (str(Path.cwd() / "wheels"), "https://h/x")
    assert style.plat == "manylinux_2_34" and style.source("plat") == "--plat"
    assert style.best_effort is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KERNELWHEEL_LOCAL_VERSION_STYLE": "short"}, "unknown local version style 'short'"),
        ({"KERNELWHEEL_REPAIR": "maybe"}, "expected true or false, got 'maybe'"),
        ({"KERNELWHEEL_PLAT": "linux_x86_64"}, "unknown manylinux policy"),
        ({"KERNELWHEEL_PLAT": "manylinux_9_99"}, "unknown manylinux policy"),  # not at repair
        ({"KERNELWHEEL_JOBS": "²"}, "expected a positive integer"),  # str.isdigit, int() fails
        ({"KERNELWHEEL_INDEX_URL": "pypi.org/simple"}, "is no index URL"),  # pip: ignored
        ({"KERNELWHEEL_INDEX_URL": "https://"}, "is no index URL"),
        ({"KERNELWHEEL_CUDA_HOME": "/nonexistent"}, "holds no bin/nvcc"),  # not 'no nvcc found'
    ],
)
def test_bad_values_name_their_layer(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as err:
        resolve_options(None, env=env)
    assert next(iter(env)) in str(err.value)


def test_cuda_device_code_options(tmp_path: Path) -> None:
    """fatbin-compression and cuda-capabilities go through the four layers like the others."""
    root = kernel(
        tmp_path, "[tool.kernelwheel]\nfatbin-compression = 'size'\ncuda-capabilities = ['9.0']\n"
    )
    options = resolve_options(root, env={})
    assert (options.fatbin_compression, options.cuda_capabilities) == ("size", parse_all(["9.0"]))
    options = resolve_options(
        root,
        env={"KERNELWHEEL_FATBIN_COMPRESSION": "none"},
        cli={"cuda_capabilities": "8.0, 9.0a 10.0+PTX"},
    )
    assert options.fatbin_compression == "none"
    assert options.source("fatbin_compression") == "KERNELWHEEL_FATBIN_COMPRESSION"
    assert options.cuda_capabilities == parse_all(["8.0", "9.0a", "10.0+PTX"])
    assert DEFAULT_OPTIONS.fatbin_compression == "default"
    assert DEFAULT_OPTIONS.cuda_capabilities is None
    with pytest.raises(UsageError, match="unknown fatbin compression 'small'"):
        resolve_options(None, env={}, cli={"fatbin_compression": "small"})
    with pytest.raises(UsageError, match="invalid CUDA capability 'sm_90'"):
        resolve_options(None, env={"KERNELWHEEL_CUDA_CAPABILITIES": "sm_90"})


def test_compile_options(tmp_path: Path) -> None:
    """with-cpu-kernels (kernelwheel's former default, now explicit) and nvcc-threads go
    through the four layers like the others."""
    assert DEFAULT_OPTIONS.with_cpu_kernels is False and DEFAULT_OPTIONS.nvcc_threads is None
    root = kernel(tmp_path, "[tool.kernelwheel]\nwith-cpu-kernels = true\nnvcc-threads = 4\n")
    options = resolve_options(root, env={})
    assert options.with_cpu_kernels and options.nvcc_threads == 4
    assert options.source("with_cpu_kernels") == "[tool.kernelwheel] with-cpu-kernels"
    options = resolve_options(
        root, env={"KERNELWHEEL_WITH_CPU_KERNELS": "0"}, cli={"nvcc_threads": "auto"}
    )
    assert not options.with_cpu_kernels and options.nvcc_threads is None
    assert options.source("nvcc_threads") == "--nvcc-threads"
    with pytest.raises(UsageError, match="KERNELWHEEL_NVCC_THREADS.*positive integer"):
        resolve_options(None, env={"KERNELWHEEL_NVCC_THREADS": "0"})


def test_memory_per_thread_takes_mib_and_says_so_when_wrong(tmp_path: Path) -> None:
    assert (
        resolve_options(None, env={"KERNELWHEEL_MEMORY_PER_THREAD": "3072"}).memory_per_thread
        == 3072
    )
    with pytest.raises(KernelwheelError, match="KERNELWHEEL_MEMORY_PER_THREAD") as info:
        resolve_options(None, env={"KERNELWHEEL_MEMORY_PER_THREAD": "0"})
    assert "4096 (MiB)" in str(info.value.hint)


def test_preamble_names_each_value_set_above_its_default_and_its_layer(tmp_path: Path) -> None:
    root = kernel(tmp_path, "[tool.kernelwheel]\ncuda-capabilities = ['9.0', '10.0+PTX']\n")
    options = resolve_options(
        root,
        env={"KERNELWHEEL_NO_CCACHE": "1", "KERNELWHEEL_JOBS": "3"},
        cli={"jobs": "2", "repair": False, "local_version_style": "compact"},  # --no-repair
    )
    assert options.preamble() == (  # in data/options.toml's order
        "local-version-style = compact  (--local-version-style)",
        "no-ccache = true  (KERNELWHEEL_NO_CCACHE)",
        "jobs = 2  (--jobs)",  # the flag over the environment
        "repair = false  (--no-repair)",
        "cuda-capabilities = 9.0 10.0+PTX  ([tool.kernelwheel] cuda-capabilities)",
    )
    assert resolve_options(None, env={}, cli={}).preamble() == ()
