"""The worker's two changes to torch's BuildExtension, without compiling: the flags
kernel-builder does not pass are dropped, and per-source flags reach build.ninja."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from kernelwheel.compile import _compile_worker as worker


def test_torch_api_include_extension_h_is_dropped_for_every_compiler() -> None:
    flag = "-DTORCH_API_INCLUDE_EXTENSION_H"
    assert worker.without_dropped(["-O3", flag, "-DX"]) == ["-O3", "-DX"]
    args = {"cxx": ["-O3", flag], "nvcc": [flag, "--threads=2"], "sycl": []}
    assert worker.without_dropped(args) == {"cxx": ["-O3"], "nvcc": ["--threads=2"], "sycl": []}


def test_torchs_extension_wide_build_id_is_dropped() -> None:
    """torch defines TORCH_EXTENSION_NAME for every unit; the plan gives it per unit instead."""
    args = {"cxx": ["-DTORCH_EXTENSION_NAME=_k_0123", "-O3"], "nvcc": ["-DTORCH_EXTENSION_NAME=_k"]}
    assert worker.without_dropped(args) == {"cxx": ["-O3"], "nvcc": []}


class _FakeBuildExt:
    """Stands for torch's BuildExtension: records what each extension is compiled with, and
    links it through its compiler's spawn, as setuptools does."""

    compiled: list[Any] = []
    spawned: list[list[str]] = []

    def __init__(self) -> None:
        self.compiler = types.SimpleNamespace(spawn=self.spawned.append)

    @classmethod
    def with_options(cls, **options: Any) -> type:
        assert options == {"use_ninja": True}
        return cls

    def build_extension(self, ext: Any) -> None:
        self.compiled.append(ext.extra_compile_args)
        self.compiler.spawn(["g++", "-c", "a.cpp", "-o", "a.o"])
        self.compiler.spawn(["g++", "-shared", "a.o", "-o", "x.so"])


def test_the_build_class_drops_the_flag_torch_added_before_each_compile() -> None:
    ext = types.SimpleNamespace(
        extra_compile_args={"cxx": ["-DTORCH_API_INCLUDE_EXTENSION_H", "-O3"], "nvcc": []}
    )
    builder = worker.build_ext_class(_FakeBuildExt)
    builder().build_extension(ext)
    assert _FakeBuildExt.compiled == [{"cxx": ["-O3"], "nvcc": []}]
    # every command still runs, and the link is recorded (a dev build's next run reruns it)
    assert len(_FakeBuildExt.spawned) == 2
    assert builder.link_command == ["g++", "-shared", "a.o", "-o", "x.so"]


GENCODE = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"]
NVCC_LINE = ["-DX", "--expt-relaxed-constexpr", *GENCODE, "'-Xcompiler=-O3 -g'", "-std=c++20"]
NINJA = """\
ninja_required_version = 1.3
post_cflags = -O3 -std=c++20
cuda_post_cflags = {nvcc}

build /b/obj/gemm.o: cuda_compile /p/gemm.cu
build /b/obj/a$ b.o: compile /p/a$ b.cpp
build /b/obj/norm.o: cuda_compile /p/norm.cu
build /b/x.so: link /b/obj/gemm.o
""".format(nvcc=" ".join(NVCC_LINE))


def test_source_bindings_follow_their_build_lines() -> None:
    entries = [
        {"source": "/p/gemm.cu", "flags": ["--use_fast_math"], "gencode": [GENCODE[1]]},
        {"source": "/p/a b.cpp", "flags": ["-mavx512f", "-DPRICE=$5"], "gencode": []},
        {"source": "/p/norm.cu", "flags": ["-DN"], "gencode": []},
    ]
    lines = worker.source_bindings(NINJA, entries, NVCC_LINE, GENCODE).splitlines()
    gemm = lines[lines.index("build /b/obj/gemm.o: cuda_compile /p/gemm.cu") + 1]
    assert gemm == (
        "  cuda_post_cflags = -DX --expt-relaxed-constexpr '-Xcompiler=-O3 -g' -std=c++20 "
        "-gencode=arch=compute_90a,code=sm_90a --use_fast_math"
    )
    cpp = lines[lines.index("build /b/obj/a$ b.o: compile /p/a$ b.cpp") + 1]
    assert cpp == "  post_cflags = $post_cflags -mavx512f '-DPRICE=$$5'"
    norm = lines[lines.index("build /b/obj/norm.o: cuda_compile /p/norm.cu") + 1]
    assert norm == "  cuda_post_cflags = $cuda_post_cflags -DN"
    assert lines[-1] == "build /b/x.so: link /b/obj/gemm.o"


def test_a_source_missing_from_build_ninja_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no build statement"):
        worker.source_bindings(
            NINJA, [{"source": "/p/other.cu", "flags": ["-DN"], "gencode": []}], [], []
        )


def test_install_ninja_edits_wraps_torchs_ninja_writer(tmp_path: Path) -> None:
    def _write_ninja_file(path: str, cflags: list[str], cuda_post_cflags: list[str]) -> None:
        Path(path).write_text(NINJA)

    fake = types.SimpleNamespace(_write_ninja_file=_write_ninja_file)
    entry = {"source": "/p/norm.cu", "flags": ["-DN"], "gencode": []}
    worker.install_ninja_edits(fake, [entry], GENCODE)
    out = tmp_path / "build.ninja"
    fake._write_ninja_file(path=str(out), cflags=[], cuda_post_cflags=NVCC_LINE)
    assert "  cuda_post_cflags = $cuda_post_cflags -DN" in out.read_text().splitlines()
    with pytest.raises(RuntimeError, match="no _write_ninja_file"):
        worker.install_ninja_edits(types.SimpleNamespace(), [entry], GENCODE)


def test_compile_statements_follow_the_plans_source_order() -> None:
    """torch writes them sorted by object path; ninja starts them in file order, so the plan's
    order (the binding first) decides what compiles first. Bindings move with their line."""
    entry = {"source": "/p/norm.cu", "flags": ["-DN"], "gencode": []}
    text = worker.source_bindings(NINJA, [entry], NVCC_LINE, GENCODE)
    lines = worker.in_source_order(text, ["/p/a b.cpp", "/p/norm.cu"]).splitlines()
    builds = [ln for ln in lines if ln.startswith("build ") or ln.startswith("  ")]
    assert builds == [
        "build /b/obj/a$ b.o: compile /p/a$ b.cpp",
        "build /b/obj/norm.o: cuda_compile /p/norm.cu",
        "  cuda_post_cflags = $cuda_post_cflags -DN",
        "build /b/obj/gemm.o: cuda_compile /p/gemm.cu",  # not in the list: after it
        "build /b/x.so: link /b/obj/gemm.o",  # not a compile statement: where it was
    ]
    assert (
        lines[: lines.index(builds[0])]
        == NINJA.splitlines()[
            : NINJA.splitlines().index("build /b/obj/gemm.o: cuda_compile /p/gemm.cu")
        ]
    )


def test_torch_free_sources_run_with_ccache_depend_mode_off() -> None:
    text = worker.source_bindings(NINJA, [], [], [], ["/p/norm.cu", "/p/a b.cpp"])
    lines = text.splitlines()
    after = {lines[i - 1]: line for i, line in enumerate(lines) if line.startswith("  ")}
    assert after == {
        "build /b/obj/a$ b.o: compile /p/a$ b.cpp": "  cxx = CCACHE_NODEPEND=1 $cxx",
        "build /b/obj/norm.o: cuda_compile /p/norm.cu": "  nvcc = CCACHE_NODEPEND=1 $nvcc",
    }
    assert worker.source_bindings(NINJA, [], [], []) == NINJA
    # with the unit's own flags too: the compiler's line first, as torch's edits were made
    entry = {"source": "/p/a b.cpp", "flags": ["-DN"], "gencode": []}
    both = worker.source_bindings(NINJA, [entry], [], [], ["/p/a b.cpp"]).splitlines()
    at = both.index("build /b/obj/a$ b.o: compile /p/a$ b.cpp")
    assert both[at + 1 : at + 3] == [
        "  cxx = CCACHE_NODEPEND=1 $cxx",
        "  post_cflags = $post_cflags -DN",
    ]


def test_prefix_maps_cover_relative_paths_and_the_innermost_folder_wins() -> None:
    """ccache hands the compiler paths under the cache folder relative to the compile's folder:
    each map gets its relative twin; gcc tries the last map first, so they are sorted shortest
    first (the work folder's map beats the cache folder's around it)."""
    flags = ["-O3", "-ffile-prefix-map=/c=/kernelwheel/cache",
             "-ffile-prefix-map=/c/work/p/v=/kernelwheel/build"]  # fmt: skip
    out = worker.prefix_mapped(flags, [("/c/envs/e/torch", "/kernelwheel/torch")],
                               "/c/work/p/v/obj", "")  # fmt: skip
    maps = [f.split("=", 1)[1] for f in out if f.startswith("-ffile-prefix-map=")]
    assert out[0] == "-O3"
    assert maps.index("..=/kernelwheel/build") < maps.index("../../../..=/kernelwheel/cache")
    assert maps.index("/c=/kernelwheel/cache") < maps.index("/c/work/p/v=/kernelwheel/build")
    assert maps[-1] == "../../../../envs/e/torch=/kernelwheel/torch"
    nvcc = worker.prefix_mapped(["-Xcompiler=-ffile-prefix-map=/c=/k"], [], "/c/w", "-Xcompiler=")
    assert nvcc == ["-Xcompiler=-ffile-prefix-map=/c=/k", "-Xcompiler=-ffile-prefix-map=..=/k"]


def test_path_views_name_the_project_through_its_link_except_objects_and_maps() -> None:
    text = (
        "cflags = -I/p/csrc -I/s/include -ffile-prefix-map=/p=/kernelwheel/src\n"
        "build /s/obj/p/csrc/a.o: compile /p/csrc/a.cpp\n"
        "  post_cflags = $post_cflags -include /p/csrc/pre.h\n"
    )
    out = worker.view_paths(text, [["/p", "/s/project"]])
    assert out.splitlines() == [
        "cflags = -I/s/project/csrc -I/s/include -ffile-prefix-map=/p=/kernelwheel/src",
        "build /s/obj/p/csrc/a.o: compile /s/project/csrc/a.cpp",
        "  post_cflags = $post_cflags -include /s/project/csrc/pre.h",
    ]


def test_path_views_swap_paths_with_spaces_as_torch_and_ninja_write_them() -> None:
    """Issue 38 family 5: torch quotes a flag whose path has a space ('-I/my p/csrc') and
    ninja escapes it in a build line (/my$ p/...): split on spaces, neither was swapped, the
    header was reached by its real path and the bytes differed from a path without one."""
    views = [["/my p/kx", "/c d/stage/project"]]
    text = (
        "cflags = -O3 '-I/my p/kx/csrc' -I/other $cflags '-I/c d/inc'\n"
        "  cuda_post_cflags = $cuda_post_cflags -include '/my p/kx/pre.h'\n"
        "build /o/a.o: compile /my$ p/kx/csrc/a.cpp || /x$:y\n"
    )
    assert worker.view_paths(text, views).splitlines() == [
        "cflags = -O3 '-I/c d/stage/project/csrc' -I/other $cflags '-I/c d/inc'",
        "  cuda_post_cflags = $cuda_post_cflags -include '/c d/stage/project/pre.h'",
        "build /o/a.o: compile /c$ d/stage/project/csrc/a.cpp || /x$:y",
    ]


def test_one_py_limited_api_definition_per_compiler_torchs() -> None:
    """torch appends its own Py_LIMITED_API after the plan's: two definitions warned
    "redefined" in every unit. The later one (torch's, the one that counted) is kept."""
    text = (
        "cflags = -O3 -DPy_LIMITED_API=0x03090000 -DCPU_KERNEL\n"
        "post_cflags = -fno-gnu-unique -DPy_LIMITED_API=0x030A0000\n"
        "cuda_cflags = -DPy_LIMITED_API=0x03090000 -DCUDA_KERNEL\n"
        "cuda_post_cflags = -DPy_LIMITED_API=0x030A0000 --threads=2\n"
    )
    assert worker.one_limited_api(text) == (
        "cflags = -O3 -DCPU_KERNEL\n"
        "post_cflags = -fno-gnu-unique -DPy_LIMITED_API=0x030A0000\n"
        "cuda_cflags = -DCUDA_KERNEL\n"
        "cuda_post_cflags = -DPy_LIMITED_API=0x030A0000 --threads=2\n"
    )
    # a torch that adds none: the plan's definition is the only one, and stays
    alone = "cflags = -DPy_LIMITED_API=0x03090000\npost_cflags = -O3\n"
    assert worker.one_limited_api(alone) == alone
