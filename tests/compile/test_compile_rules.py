"""kernel-builder's compile rules: one backend per variant and its macros, nvcc's macros, a
kernel's cuda-minver and cuda-flags per toolkit, nvcc threads times jobs within the CPUs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelwheel.compile.compile_rules import (
    Parallelism,
    backend_macros,
    include_file_notes,
    kernel_backends,
    kernel_cuda_flags,
    kernels_to_compile,
    nvcc_parallelism,
    nvcc_torch_flags,
    shared_source_notes,
)
from kernelwheel.model.project import load_project


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("cuda", {"CUDA_KERNEL": None, "USE_CUDA": "1"}),
        ("rocm", {"ROCM_KERNEL": None, "USE_ROCM": "1"}),
        ("xpu", {"XPU_KERNEL": None, "USE_XPU": None}),
        ("metal", {"METAL_KERNEL": None}),
        ("cpu", {"CPU_KERNEL": None}),
    ],
)
def test_each_backend_has_kernel_builders_macros(backend: str, expected: dict[str, str]) -> None:
    assert dict(backend_macros(backend)) == expected
    assert kernel_backends(backend) == (backend,)


def test_with_cpu_kernels_adds_the_cpu_kernels_and_kernelwheels_macros() -> None:
    assert kernel_backends("cuda", with_cpu_kernels=True) == ("cuda", "cpu")
    assert dict(backend_macros("cuda", with_cpu_kernels=True)) == {
        "CUDA_KERNEL": None,
        "USE_CUDA": "1",
        "KERNELWHEEL_WITH_CPU": "1",
        "KERNELWHEEL_WITH_CUDA": "1",
    }
    # CPU_KERNEL stays off in a CUDA variant: bindings written `#if CPU_KERNEL ... #elif
    # CUDA_KERNEL` would otherwise register only the CPU kernel.
    assert kernel_backends("cpu", with_cpu_kernels=True) == ("cpu",)
    assert dict(backend_macros("cpu", with_cpu_kernels=True)) == {
        "CPU_KERNEL": None,
        "KERNELWHEEL_WITH_CPU": "1",
    }


BUILD_TOML = """\
[general]
name = "mixed"
backends = ["cpu", "cuda", "rocm"]

[torch]
src = ["torch-ext/binding.cpp"]

[kernel.old]
backend = "cuda"
src = ["old.cu"]

[kernel.new]
backend = "cuda"
cuda-minver = "12.8"
src = ["new.cu"]

[kernel.host]
backend = "cpu"
src = ["host.cpp"]

[kernel.amd]
backend = "rocm"
src = ["amd.cu"]
"""


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    for rel in ("old.cu", "new.cu", "host.cpp", "amd.cu", "torch-ext/binding.cpp"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("// x\n")
    (tmp_path / "torch-ext" / "mixed").mkdir()
    (tmp_path / "torch-ext" / "mixed" / "__init__.py").write_text("")
    (tmp_path / "build.toml").write_text(textwrap.dedent(BUILD_TOML))
    return tmp_path


def _ids(kernels: tuple[object, ...]) -> list[str]:
    return [k.id for k in kernels]  # type: ignore[attr-defined]


def test_a_variant_compiles_its_backends_kernels_only(mixed: Path) -> None:
    project = load_project(mixed)
    kernels, notes = kernels_to_compile(project, kernel_backends("cuda"), "13.0")
    assert _ids(kernels) == ["old", "new"] and notes == ()
    kernels, _ = kernels_to_compile(project, kernel_backends("cpu"), None)
    assert _ids(kernels) == ["host"]
    kernels, _ = kernels_to_compile(project, kernel_backends("cuda", True), "13.0")
    assert _ids(kernels) == ["old", "new", "host"]


def test_a_kernel_above_the_toolkit_is_left_out_with_a_note(mixed: Path) -> None:
    kernels, notes = kernels_to_compile(load_project(mixed), ("cuda",), "12.6")
    assert _ids(kernels) == ["old"]
    assert notes == ("kernel.new left out: its cuda-minver 12.8 is above CUDA 12.6",)


def test_nvcc_gets_kernel_builders_macros_instead_of_torchs() -> None:
    flags = nvcc_torch_flags("13.0")
    assert "-U__CUDA_NO_HALF_OPERATORS__" in flags and "-U__CUDA_NO_HALF2_OPERATORS__" in flags
    assert "-U__CUDA_NO_BFLOAT16_CONVERSIONS__" in flags and flags[-1] == "-DENABLE_FP8"
    assert "-DENABLE_FP8" not in nvcc_torch_flags("11.7")
    assert "--expt-extended-lambda" in flags  # as torch's CMake config (kernel-builder) has it


def test_template_stub_flag_only_where_nvcc_has_it() -> None:
    flags = ("-static-global-template-stub=false", "--use_fast_math")
    assert kernel_cuda_flags(flags, "12.8") == flags
    assert kernel_cuda_flags(flags, "12.6") == ("--use_fast_math",)


@pytest.mark.parametrize(
    ("jobs", "cpus", "requested", "capabilities", "cuda_files", "expected"),
    [
        # one .cu: a thread per capability, the CPUs left go to the C++ sources beside it
        (16, 16, None, 10, 1, Parallelism(jobs=7, nvcc_threads=10)),
        (16, 16, None, 10, 2, Parallelism(jobs=3, nvcc_threads=8)),  # the budget shared
        (16, 16, None, 10, 3, Parallelism(jobs=4, nvcc_threads=5)),
        (16, 16, None, 10, 56, Parallelism(jobs=16, nvcc_threads=1)),  # files fill the CPUs
        (2, 2, None, 10, 56, Parallelism(jobs=2, nvcc_threads=1)),
        (2, 2, None, 10, 1, Parallelism(jobs=2, nvcc_threads=2)),  # one C++ job beside
        (16, 16, None, 4, 1, Parallelism(jobs=13, nvcc_threads=4)),
        (16, 16, 2, 10, 56, Parallelism(jobs=8, nvcc_threads=2)),  # NVCC_THREADS, jobs divided
        (2, 16, None, 10, 1, Parallelism(jobs=2, nvcc_threads=2)),  # --jobs is the budget
        (64, 8, 4, 10, 4, Parallelism(jobs=2, nvcc_threads=4)),  # at most the CPUs
        (8, 8, None, 0, 0, Parallelism(jobs=8, nvcc_threads=1)),  # a CPU variant
        (1, 1, 32, 12, 1, Parallelism(jobs=1, nvcc_threads=1)),
    ],
)
def test_nvcc_threads_and_jobs_at_their_peak_stay_within_the_cpus(
    jobs: int,
    cpus: int,
    requested: int | None,
    capabilities: int,
    cuda_files: int,
    expected: Parallelism,
) -> None:
    split = nvcc_parallelism(jobs, cpus, requested, capabilities, cuda_files=cuda_files)
    assert split == expected
    # nvcc's serial stages idle its threads: one C++ job beside the .cu files may exceed it
    budget = min(jobs, cpus)
    assert _peak_threads(split, cuda_files) <= budget + (1 if budget > 1 else 0)


def _peak_threads(split: Parallelism, cuda_files: int) -> int:
    """Compiler threads with every job running, nvcc jobs first."""
    nvcc_jobs = min(cuda_files, split.jobs)
    return nvcc_jobs * split.nvcc_threads + (split.jobs - nvcc_jobs)


def test_a_header_two_kernels_of_different_flags_list_is_warned_of_only_as_a_source(
    tmp_path: Path,
) -> None:
    # a header compiles with no flags of its own (each unit including it has its kernel's):
    # the warning to give each kernel its own copy was shown for csrc/common.h too
    for rel in ("a.cpp", "b.cpp", "shared.cpp", "common.h", "torch-ext/binding.cpp"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("// x\n")
    (tmp_path / "torch-ext" / "two").mkdir()
    (tmp_path / "torch-ext" / "two" / "__init__.py").write_text("")
    (tmp_path / "build.toml").write_text(
        '[general]\nname = "two"\nbackends = ["cpu"]\n[torch]\nsrc = ["torch-ext/binding.cpp"]\n'
        '[kernel.a]\nbackend = "cpu"\nsrc = ["a.cpp", "common.h", "shared.cpp"]\n'
        'cxx-flags = ["-DX=1"]\n'
        '[kernel.b]\nbackend = "cpu"\nsrc = ["b.cpp", "common.h", "shared.cpp"]\n'
    )
    kernels, _ = kernels_to_compile(load_project(tmp_path), ("cpu",), None)
    notes = shared_source_notes(kernels)
    assert len(notes) == 1 and notes[0].startswith("warning: shared.cpp is listed by kernels")


def test_a_kernel_of_a_backend_the_project_does_not_list_is_warned_of(mixed: Path) -> None:
    # [kernel.amd] added, "rocm" not added to general.backends: it was silently never compiled
    toml = mixed / "build.toml"
    toml.write_text(toml.read_text().replace('"cpu", "cuda", "rocm"', '"cpu", "cuda"'))
    kernels, notes = kernels_to_compile(load_project(mixed), ("cpu",), None)
    assert _ids(kernels) == ["host"]
    assert notes == (
        'warning: kernel.amd has backend = "rocm", which general.backends (cpu, cuda) does not '
        'list: no variant compiles it; add "rocm" to general.backends in build.toml, or remove '
        "[kernel.amd]",
    )


def test_an_include_entry_that_is_a_file_is_warned_of(mixed: Path) -> None:
    # include = ["csrc/w7k.h"] (the header, not its folder): g++ was given -I of a file, found
    # nothing through it, and no one said so
    (mixed / "inc").mkdir()
    toml = mixed / "build.toml"
    text = toml.read_text().replace('src = ["host.cpp"]', 'src = ["host.cpp"]\ninclude = ["inc"]')
    toml.write_text(
        text.replace('src = ["old.cu"]', 'src = ["old.cu"]\ninclude = ["inc", "old.cu"]')
    )
    text = toml.read_text().replace(
        'src = ["torch-ext/binding.cpp"]',
        'src = ["torch-ext/binding.cpp"]\ninclude = ["torch-ext/binding.cpp"]',
    )
    toml.write_text(text)
    project = load_project(mixed)
    kernels, _ = kernels_to_compile(project, ("cuda",), "13.0")
    assert include_file_notes(project, kernels) == (
        "warning: torch.include: 'torch-ext/binding.cpp' is a file, not a folder: the compiler "
        "finds no header through it; name the folder that holds it, 'torch-ext'",
        "warning: kernel.old.include: 'old.cu' is a file, not a folder: the compiler finds no "
        "header through it; name the folder that holds it, '.'",
    )
    assert include_file_notes(project, kernels_to_compile(project, ("cpu",), None)[0]) == (
        include_file_notes(project, kernels)[0],
    )
