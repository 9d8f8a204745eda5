"""compile.diagnostics on compile output as gcc 12, nvcc 13.0 and ninja write it (taken from
real runs here, the build folders renamed): the failing unit, the first error with its context
and notes, the screenful cap, the project's paths through the work folder's link, absolute and
relative to the build folder, and the per-unit warning summary."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kernelwheel.builder.steps import compile_hint, project_path_map
from kernelwheel.compile.diagnostics import (
    MAX_LINES,
    PathMap,
    failure,
    unit_warnings,
    warning_summary,
)
from kernelwheel.errors import BuildError
from kernelwheel.model.variant import Variant

STAGE = "/cache/work/tiny_add/torch213-cxx11-cpu-x86_64-linux"
ROOT = "/home/me/tiny-add"
PATHS = PathMap((f"{STAGE}/project", ROOT), f"{STAGE}/obj")
FIXTURES = Path(__file__).parents[1] / "fixtures" / "compile_output"
FLAGS = "-Wsign-compare -DNDEBUG -g -fwrapv -O3 -Wall -fPIC -c"  # torch's own -c among them


def _compile(source: str) -> str:
    obj = f"{STAGE}/obj{source.removesuffix('.cpp')}.o"
    return f"c++ -MMD -MF {obj}.d {FLAGS} -c {source} -o {obj} -O3 -fvisibility=hidden"


ADD_ONE = f"{STAGE}/project/csrc/add_one.cpp"
BINDING = f"{STAGE}/project/torch-ext/torch_binding.cpp"

# ninja without a terminal: each unit's line when it ends, FAILED and its command, its output.
# ccache hands the compiler paths relative to the build folder (../project/...).
GCC_FAILED = f"""\
$ /cache/envs/py3.11/bin/python _compile_worker.py compile.json result.json
running build_ext
building '_tiny_add_5d0ae1e1f9' extension
[1/3] {_compile(ADD_ONE)}
FAILED: {STAGE}/obj{STAGE}/project/csrc/add_one.o
{_compile(ADD_ONE)}
../project/csrc/add_one.cpp: In function ‘at::Tensor add_one_cpu(const at::Tensor&)’:
../project/csrc/add_one.cpp:5:18: error: expected ‘;’ before ‘}}’ token
    5 |   return x.add(1)
      |                  ^
      |                  ;
    6 | }}
      | ~
../project/csrc/add_one.cpp:4:7: warning: unused variable ‘unused’ [-Wunused-variable]
    4 |   int unused = 3;
      |       ^~~~~~
[2/3] {_compile(BINDING)}
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
  File "/cache/envs/py3.11/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2893
subprocess.CalledProcessError: Command '['ninja', '-v', '-j', '2']' returned non-zero exit status 1.
RuntimeError: Error compiling objects for extension
"""


def test_the_failing_unit_and_its_first_error_with_the_projects_paths() -> None:
    found = failure(GCC_FAILED, PATHS)
    assert found.units == ("csrc/add_one.cpp",)
    assert found.compiler_error
    assert found.lines == (
        "csrc/add_one.cpp: In function ‘at::Tensor add_one_cpu(const at::Tensor&)’:",
        "csrc/add_one.cpp:5:18: error: expected ‘;’ before ‘}’ token",
        "    5 |   return x.add(1)",
        "      |                  ^",
        "      |                  ;",
        "    6 | }",
        "      | ~",
    )  # the warning after it, ninja's and the traceback's lines are left to the log


HEADER_ERRORS = """\
In file included from /home/me/tiny-add/csrc/k.cpp:1:
/home/me/tiny-add/csrc/util.h: In function ‘int scale(int)’:
/home/me/tiny-add/csrc/util.h:2:38: error: ‘factor’ was not declared in this scope
    2 | inline int scale(int x) { return x * factor; }
      |                                      ^~~~~~
/home/me/tiny-add/csrc/k.cpp: In function ‘int g()’:
/home/me/tiny-add/csrc/k.cpp:3:19: error: too few arguments to function ‘int f(int, int)’
    3 | int g() { return f(1); }
      |                  ~^~~
/home/me/tiny-add/csrc/k.cpp:2:5: note: declared here
    2 | int f(int a, int b);
      |     ^
"""


def test_an_error_in_a_header_keeps_its_include_chain_and_stops_at_the_next_error() -> None:
    # absolute paths (a tvm-ffi build names the project so), no ninja: the worker's link
    worker = f"FAILED: [code=1] obj/000-k.o\nc++ -c {ROOT}/csrc/k.cpp\n"
    found = failure(worker + HEADER_ERRORS, PATHS)
    assert found.units == ("csrc/k.cpp",)
    assert found.lines == (
        "In file included from csrc/k.cpp:1:",
        "csrc/util.h: In function ‘int scale(int)’:",
        "csrc/util.h:2:38: error: ‘factor’ was not declared in this scope",
        "    2 | inline int scale(int x) { return x * factor; }",
        "      |                                      ^~~~~~",
    )


def test_an_errors_notes_come_with_it() -> None:
    second = HEADER_ERRORS.split("^~~~~~\n", 1)[1]
    found = failure(second, PATHS)
    assert found.units == ()  # no FAILED line: the error is still found
    error = "csrc/k.cpp:3:19: error: too few arguments to function ‘int f(int, int)’"
    assert found.lines[1] == error
    assert found.lines[-3:] == (
        "csrc/k.cpp:2:5: note: declared here",
        "    2 | int f(int a, int b);",
        "      |     ^",
    )


def test_a_note_with_an_include_chain_of_its_own_belongs_to_the_error() -> None:
    text = """\
csrc/k.cpp:3:10: error: no matching function for call to ‘scale(float*)’
    3 |   return scale(p);
      |          ~~~~~^~~
In file included from csrc/k.cpp:1:
csrc/util.h:2:12: note: candidate: ‘int scale(int)’
    2 | inline int scale(int x) { return x; }
      |            ^~~~~
csrc/k.cpp: In function ‘int h()’:
csrc/k.cpp:7:1: error: expected ‘;’
"""
    lines = failure(text, PathMap((), "/")).lines
    assert lines[3:5] == (
        "In file included from csrc/k.cpp:1:",
        "csrc/util.h:2:12: note: candidate: ‘int scale(int)’",
    )
    assert lines[-1] == "      |            ^~~~~" and len(lines) == 7


NVCC_FAILED = f"""\
FAILED: {STAGE}/obj{STAGE}/project/csrc/k.o
/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c {STAGE}/project/csrc/k.cu -o k.o
{STAGE}/project/csrc/k.cuh(3): error: expected a ";"
  __attribute__((device)) T twice(T x) {{ return x * 2 }}
                                                      ^

1 error detected in the compilation of "{STAGE}/project/csrc/k.cu".
"""


def test_nvccs_front_end_errors_and_the_link_path() -> None:
    found = failure(NVCC_FAILED, PATHS)
    assert found.units == ("csrc/k.cu",)
    assert found.lines == (
        'csrc/k.cuh(3): error: expected a ";"',
        "  __attribute__((device)) T twice(T x) { return x * 2 }",
        "                                                      ^",
    )


def test_nvcc_template_errors_keep_the_instantiation_line() -> None:
    text = """\
t.cu(2): error: expression must have class type but it has type "float"
  __attribute__((device)) T twice(T x) { return x.nosuch(); }
                                                ^
          detected during instantiation of "T twice(T) [with T=float]" at line 3

1 error detected in the compilation of "t.cu".
"""
    lines = failure(text, PATHS).lines
    assert lines[0].startswith("t.cu(2): error:") and "detected during instantiation" in lines[-1]


def test_the_host_compilers_errors_through_nvcc() -> None:
    text = """\
i.cu:1:10: fatal error: nosuch.h: No such file or directory
    1 | #include "nosuch.h"
      |          ^~~~~~~~~~
compilation terminated.
"""
    assert failure(text, PATHS).lines == tuple(text.splitlines()[:3])


def test_a_link_error_is_found_without_a_compiler_line() -> None:
    text = """\
x86_64-linux-gnu-g++ -shared obj/k.o -o build/_k.so
/usr/bin/ld: obj/k.o: in function `add_one_cpu(at::Tensor const&)':
k.cpp:(.text+0x9): undefined reference to `helper(int)'
collect2: error: ld returned 1 exit status
error: command '/usr/bin/x86_64-linux-gnu-g++' failed with exit code 1
"""
    assert failure(text, PATHS).lines == tuple(text.splitlines()[1:3])


def test_a_function_defined_in_a_shared_header_names_the_projects_files_and_the_fix() -> None:
    # a non-inline function in csrc/common/util.h, included by two units: ld's output (gcc 12,
    # a dev build's direct link) named the objects by their build paths and the sources by
    # their -ffile-prefix-map names, was cut before "first defined here", and the fix said
    # "the compiler's first error ... its paths relative to the project"
    obj = f"{STAGE}/obj{STAGE}/project"
    text = f"""\
$ g++ -shared {obj}/csrc/a.o {obj}/csrc/b.o -o {STAGE}/lib/_k.abi3.so
/usr/bin/ld: {obj}/csrc/b.o: in function `c10::detail::weakcount(unsigned long)':
/kernelwheel/build/project/csrc/b.cpp:7: multiple definition of `kx::util::twice(float)'; \
{obj}/csrc/a.o:/kernelwheel/build/project/csrc/common/util.h:7: first defined here
collect2: error: ld returned 1 exit status
"""
    paths = project_path_map(Path(STAGE), Path(ROOT), f"{STAGE}/obj")
    found = failure(text, paths)
    assert found.linker and found.units == ()
    assert found.lines == (
        "/usr/bin/ld: csrc/b.o: in function `c10::detail::weakcount(unsigned long)':",
        "csrc/b.cpp:7: multiple definition of `kx::util::twice(float)'; "
        "csrc/a.o:csrc/common/util.h:7: first defined here",
    )
    hint = compile_hint(Variant.parse("torch213-cxx11-cpu-x86_64-linux"), text, True)
    assert hint.startswith("kx::util::twice(float) is defined in more than one unit")
    assert "must be inline" in hint
    # the source folder's own prefix-map name, as a release build's link gives it
    assert paths.line("/kernelwheel/src/csrc/b.cpp:7:") == "csrc/b.cpp:7:"
    assert not failure(GCC_FAILED, PATHS).linker


def test_without_a_compiler_error_the_outputs_last_lines_are_shown() -> None:
    text = "running build_ext\nTraceback (most recent call last):\n  File x\nRuntimeError: boom\n"
    found = failure(text, PATHS)
    assert not found.compiler_error
    assert found.lines[-1] == "RuntimeError: boom"


def test_a_long_error_is_cut_to_a_screenful_and_says_so() -> None:
    notes = "".join(f"{ROOT}/csrc/k.cpp:{i}:1: note: candidate {i}\n" for i in range(40))
    text = f"{ROOT}/csrc/k.cpp:3:1: error: no match\n{notes}"
    lines = failure(text, PATHS).lines
    assert len(lines) == MAX_LINES
    assert lines[1] == "csrc/k.cpp:0:1: note: candidate 0"
    assert lines[-1] == f"… ({41 - (MAX_LINES - 1)} more lines of this error in the log)"
    huge = failure(f"k.cpp:1:1: error: {'T<' * 400}\n", PATHS).lines[0]
    assert len(huge) == 300 and huge.endswith("…")


def test_paths_outside_the_project_stay_whole() -> None:
    torch = "/cache/envs/py3.11/lib/python3.11/site-packages/torch/include/ATen/Tensor.h"
    assert PATHS.path(torch) == torch
    assert PATHS.path("../../../envs/x.h") == "/cache/work/envs/x.h"  # not the build folder's
    assert PATHS.path(f"{STAGE}/project/csrc/a.cpp") == "csrc/a.cpp"
    assert PATHS.path("../project/csrc/a.cpp") == "csrc/a.cpp"
    assert PATHS.line("see a/b and /home/me/tiny-add/x.h:3") == "see a/b and x.h:3"


def test_warnings_are_summed_up_per_unit_of_a_successful_compile() -> None:
    text = f"""\
[1/3] {_compile(ADD_ONE)}
../project/csrc/add_one.cpp: In function ‘at::Tensor add_one_cpu(const at::Tensor&)’:
../project/csrc/add_one.cpp:4:7: warning: unused variable ‘unused’ [-Wunused-variable]
    4 |   int unused = 3;
      |       ^~~~~~
../project/csrc/add_one.cpp:5:7: warning: unused variable ‘other’ [-Wunused-variable]
[2/3] {_compile(BINDING)}
[3/3] /usr/local/cuda/bin/nvcc -c {STAGE}/project/csrc/k.cu -o k.o
{STAGE}/project/csrc/k.cu(1): warning #177-D: variable "unused" was declared but never referenced
  __attribute__((global)) void f(float* x) {{ int unused = 2; x[0] = 1; }}
                                                 ^

Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

{STAGE}/project/csrc/k.cu(1): warning #177-D: variable "unused" was declared but never referenced
"""
    assert warning_summary(text, PATHS) == (
        "csrc/add_one.cpp: 2 warnings (first: csrc/add_one.cpp:4:7: unused variable ‘unused’ "
        "[-Wunused-variable])",
        # nvcc says it once for the host, once for the device: one warning; its number kept,
        # the one -diag-suppress takes (it was dropped)
        'csrc/k.cu: 1 warning (first: csrc/k.cu(1): variable "unused" was declared but never '
        "referenced [#177-D])",
    )
    assert warning_summary(GCC_FAILED.replace("warning", "note"), PATHS) == ()


def test_a_units_own_warning_is_shown_before_those_of_headers_outside_the_project() -> None:
    # rotary's AVX-512 unit: 44 warnings, the first shown one of torch's vec_base.h (not the
    # author's to fix), the unit's own unused variable counted but never shown
    torch_h = "/cache/envs/py3.11/lib/python3.11/site-packages/torch/include/ATen/vec_base.h"
    pragma = f"{torch_h}:1484: warning: ignoring ‘#pragma unroll ’ [-Wunknown-pragmas]\n"
    text = f"""\
[1/2] {_compile(ADD_ONE)}
In file included from ../project/csrc/add_one.cpp:1:
{pragma}../project/csrc/add_one.cpp:4:7: warning: unused variable ‘unused’ [-Wunused-variable]
[2/2] {_compile(BINDING)}
In file included from ../project/torch-ext/torch_binding.cpp:1:
{pragma}"""
    assert warning_summary(text, PATHS) == (
        "csrc/add_one.cpp: 2 warnings (first: csrc/add_one.cpp:4:7: unused variable ‘unused’ "
        "[-Wunused-variable])",
        "torch-ext/torch_binding.cpp: 1 warning, all in headers outside the project (first: "
        f"{torch_h}:1484: ignoring ‘#pragma unroll ’ [-Wunknown-pragmas])",
    )


def test_the_error_shows_its_diagnostics_under_the_message_and_the_fix_last() -> None:
    exc = BuildError("compiling k.cpp failed (exit 1)", hint="see above", diagnostics=("a", "b"))
    assert str(exc) == "compiling k.cpp failed (exit 1)\na\nb\n  fix: see above"


def test_a_stable_abi_build_including_a_full_torch_header_is_told_which_headers_it_may_use() -> (
    None
):
    # torch's #error names TORCH_TARGET_VERSION, which the author never set: the fix was only
    # "the compiler's first error is above"
    error = (
        'torch/include/ATen/ATen.h:40:2: error: #error "This file should not be included when '
        'either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION is defined."'
    )
    stable = Variant.parse("torch-stable-abi210-cpu-x86_64-linux")
    assert "torch/csrc/stable/... and torch/headeronly/..." in compile_hint(stable, error, True)
    per_torch = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    assert compile_hint(per_torch, error, True).startswith("the compiler's first error is above")
    assert compile_hint(stable, "ld: cannot find -lfoo", False).startswith("the compile's last")


def test_a_device_function_declared_and_never_defined_is_named_demangled_with_its_fix() -> None:
    # ptxas named only the mangled symbol ('_Z6helperf') and the fix was "the compiler's first
    # error is above"; nvcc 13.0's words for a __device__ float helper(float) with no body
    output = "ptxas fatal   : Unresolved extern function '_Z6helperf'\n"
    hint = compile_hint(Variant.parse("torch214-cxx11-cu130-x86_64-linux"), output, True)
    assert hint.startswith("the device code calls helper(float), declared but not defined")
    assert "__device__ inline" in hint


def test_a_host_function_called_from_a_kernel_is_named_with_the_qualifier_to_add() -> None:
    # the fix was only "the compiler's first error is above"; nvcc 13.0's words for a kernel
    # calling float host_twice(float) of an unnamed namespace
    output = (
        '../project/csrc/kc_cuda.cu(20): error: calling a __host__ function("_NV_ANON_NAMESPACE'
        '::host_twice(float)") from a __global__ function("_NV_ANON_NAMESPACE::add_one_kernel") '
        "is not allowed\n"
    )
    hint = compile_hint(Variant.parse("torch214-cxx11-cu130-x86_64-linux"), output, True)
    assert hint.startswith(
        "host_twice(float) is compiled for the host only and called from a __global__ function: "
        "declare it __device__ (__host__ __device__ to call it from both)"
    )


GCC_WARNED = f"""\
[1/2] {_compile(ADD_ONE)}
../project/csrc/add_one.cpp:4:7: warning: unused variable ‘unused’ [-Wunused-variable]
[2/2] {_compile(BINDING)}
"""


def test_an_incremental_compile_replays_the_warnings_of_the_units_it_did_not_compile(
    tmp_path: Path,
) -> None:
    # kernelwheel dev: a unit that warned, then a run where ninja compiled nothing (or another
    # unit) said no warning at all, as if the unused variable were gone
    from kernelwheel.builder.steps import _replayed

    (tmp_path / "compile.json").write_text(json.dumps({"sources": [ADD_ONE, BINDING]}))
    warned = unit_warnings(GCC_WARNED, PATHS)
    first = _replayed(tmp_path, warned, PATHS)
    assert first == list(warning_summary(GCC_WARNED, PATHS)) and first
    assert _replayed(tmp_path, {}, PATHS) == first  # ninja: no work to do
    binding_only = {"torch-ext/torch_binding.cpp": ""}
    assert _replayed(tmp_path, binding_only, PATHS) == first  # another unit recompiled
    fixed = {unit: "" for unit in warned}
    assert _replayed(tmp_path, fixed, PATHS) == []  # the unit compiled again, clean
    # a unit no longer built is forgotten
    _replayed(tmp_path, warned, PATHS)
    (tmp_path / "compile.json").write_text(json.dumps({"sources": [BINDING]}))
    assert _replayed(tmp_path, {}, PATHS) == []


def test_a_tvm_ffi_dev_build_replays_the_warnings_of_the_units_it_kept(tmp_path: Path) -> None:
    # a tvm-ffi build's compile.json lists its units, not "sources": every run after the one
    # that warned said nothing, as if the warning were gone
    from kernelwheel.builder.steps import _replayed

    units = [{"source": path, "object": f"{path}.o", "argv": []} for path in (ADD_ONE, BINDING)]
    (tmp_path / "compile.json").write_text(json.dumps({"kind": "commands", "units": units}))
    first = _replayed(tmp_path, unit_warnings(GCC_WARNED, PATHS), PATHS)
    assert first == list(warning_summary(GCC_WARNED, PATHS)) and first
    assert _replayed(tmp_path, {"torch-ext/torch_binding.cpp": ""}, PATHS) == first
    assert _replayed(tmp_path, {}, PATHS) == first


def test_each_other_failed_unit_gets_a_line_with_its_own_first_error() -> None:
    # two units broken apart (nvcc 13.0's and gcc 12's words): only the first unit's error was
    # shown, the other's was found one rebuild later; one header both include is said once
    cuda = f"{STAGE}/project/csrc/k.cu"
    text = f"""\
FAILED: obj/k.o
/usr/local/cuda/bin/nvcc -c {cuda} -o obj/k.o
../project/csrc/k.cu(12): error: expected a ";"
  }}
  ^
1 error detected in the compilation of "../project/csrc/k.cu".
FAILED: obj/torch_binding.o
{_compile(BINDING)}
../project/torch-ext/torch_binding.cpp:9:57: error: expected ‘;’ before ‘}}’ token
    9 |   return x
ninja: build stopped: subcommand failed.
"""
    found = failure(text, PATHS)
    assert found.units == ("csrc/k.cu", "torch-ext/torch_binding.cpp")
    assert found.lines[0] == 'csrc/k.cu(12): error: expected a ";"'
    assert found.lines[-1] == (
        "also torch-ext/torch_binding.cpp: torch-ext/torch_binding.cpp:9:57: error: expected ‘;’ "
        "before ‘}’ token"
    )
    header = (
        f"In file included from {ROOT}/csrc/k.cpp:1:\n"
        + HEADER_ERRORS.split("/home/me/tiny-add/csrc/k.cpp: In", 1)[0].split("\n", 1)[1]
    )
    twice = "".join(f"FAILED: obj/{u}.o\nc++ -c {ROOT}/csrc/{u}.cpp\n{header}" for u in "kb")
    assert not any(line.startswith("also") for line in failure(twice, PATHS).lines)
    assert failure(twice, PATHS).units == ("csrc/k.cpp", "csrc/b.cpp")


def test_an_error_in_torchs_headers_names_the_projects_line_that_led_there() -> None:
    # gcc 12 on a binding whose impl takes a float (torch wants double): ten lines of torch's
    # paths, the author's line buried among them as "required from here"
    torch = "/envs/py3.11/lib/python3.11/site-packages/torch/include"
    text = f"""\
FAILED: obj/torch_binding.o
{_compile(BINDING)}
In file included from {torch}/torch/library.h:62,
                 from ../project/torch-ext/torch_binding.cpp:1:
{torch}/ATen/core/op_registration/infer_schema.h: In instantiation of ‘int f()’:
{torch}/torch/library.h:695:17:   required from ‘torch::Library& torch::Library::impl()’
../project/torch-ext/torch_binding.cpp:16:70:   required from here
{torch}/ATen/core/op_registration/infer_schema.h:41:21: error: static assertion failed: INVALID TYPE
   41 |  static_assert(std::conjunction_v<
"""
    assert failure(text, PATHS).lines[-1] == (
        "from the project: torch-ext/torch_binding.cpp:16 (the error is in a header outside it)"
    )
    # nvcc's instantiation trace follows the error and names the line "at line N of path"
    nvcc = f"""\
FAILED: obj/k.o
/usr/local/cuda/bin/nvcc -c {STAGE}/project/csrc/k.cu -o obj/k.o
{torch}/ATen/Dispatch.h(12): error: no instance of function template "f" matches
          detected during instantiation of "void g<T>()" at line 24 of ../project/csrc/k.cu
"""
    assert failure(nvcc, PATHS).lines[-1].startswith("from the project: csrc/k.cu:24 ")
    # an error in the project's own file needs no such line; nor does an include chain alone
    assert not any(line.startswith("from the project") for line in failure(GCC_FAILED, PATHS).lines)
    chain = text.replace("../project/torch-ext/torch_binding.cpp:16:70:   required from here\n", "")
    assert not any(line.startswith("from the project") for line in failure(chain, PATHS).lines)


def test_a_binding_without_registration_h_is_told_to_include_it() -> None:
    # gcc 12's words: the fix was "the compiler's first error is above"
    gcc = (
        "torch-ext/torch_binding.cpp:12:21: error: expected constructor, destructor, or type "
        "conversion before ‘(’ token\n"
        "   12 | TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
        "      |                     ^\n"
    )
    cpu = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    assert '#include "registration.h"' in compile_hint(cpu, gcc, True)
    undeclared = "b.cpp:30:1: error: ‘REGISTER_EXTENSION’ was not declared in this scope\n"
    assert '#include "registration.h"' in compile_hint(cpu, undeclared, True)
    # the same gcc error on another line is no such case
    other = gcc.replace("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME", "MY_MACRO(x")
    assert compile_hint(cpu, other, True).startswith("the compiler's first error is above")


def test_a_coloured_compilers_codes_hide_neither_its_error_nor_its_warnings() -> None:
    # gcc 12 with -fdiagnostics-color=always (authors add it, ninja's piped output being plain)
    e = "\x1b"
    error = (
        f"{e}[01m{e}[K../project/csrc/add_one.cpp:5:18:{e}[m{e}[K {e}[01;31m{e}[Kerror: "
        f"{e}[m{e}[Kexpected {e}[01m{e}[K';'{e}[m{e}[K before {e}[01m{e}[K'}}'{e}[m{e}[K token"
    )
    text = f"[1/3] {_compile(ADD_ONE)}\nFAILED: k.o\n{_compile(ADD_ONE)}\n{error}\n"
    found = failure(text, PATHS)
    assert found.compiler_error
    assert found.lines == ("csrc/add_one.cpp:5:18: error: expected ';' before '}' token",)
    warned = error.replace("01;31m", "01;35m").replace("error: ", "warning: ")
    assert warning_summary(f"[1/3] {_compile(ADD_ONE)}\n{warned}\n", PATHS) == (
        "csrc/add_one.cpp: 1 warning (first: csrc/add_one.cpp:5:18: expected ';' before '}' token)",
    )


def test_an_error_in_a_folder_named_with_parentheses_is_found() -> None:
    source = "/home/me/kernels (copy)/csrc/k.cu"
    error = f'{source}(12): error: identifier "y" is undefined'
    text = f'FAILED: k.o\nnvcc -c "{source}" -o k.o\n{error}\n'
    found = failure(text, PATHS)
    assert found.compiler_error
    assert found.lines == (error,)


def test_a_line_of_thousands_of_blanks_is_read_in_an_instant() -> None:
    # it took minutes (a regular expression's backtracking, cubic in the blanks)
    text = f"FAILED: k.o\nc++ -c k.cpp\nk{' ' * 4000}x\nk.cpp:1:1: error: boom\n"
    started = time.monotonic()
    assert failure(text, PATHS).lines == ("k.cpp:1:1: error: boom",)
    assert time.monotonic() - started < 2


def test_a_kernel_signature_torch_cannot_register_says_which_type_and_its_fix() -> None:
    # a CPU kernel taking float (the schema's float is double in C++): torch 2.13's
    # static_assert, under ten lines of template instantiation
    text = (
        "torch/include/ATen/core/op_registration/infer_schema.h:41:21: error: static assertion "
        "failed: INVALID TYPE: float is not supported as an argument type, use double instead\n"
        "   41 |  static_assert(std::conjunction_v<\n"
    )
    hint = compile_hint(Variant.parse("torch213-cxx11-cpu-x86_64-linux"), text, True)
    assert hint.startswith(
        "torch cannot register that kernel's C++ signature: INVALID TYPE: float is not "
        "supported as an argument type, use double instead (the ops.impl"
    ), hint


def test_a_signature_torch_cannot_register_shows_its_error_and_fix_before_the_templates() -> None:
    # g++ 12.2 on a CPU kernel taking float, torch 2.13 (a real run's output, its venv and
    # project renamed): 17 lines of include and instantiation trace stood above the error, and
    # kernelwheel's fix came after them and the notes
    text = (FIXTURES / "float_parameter.gcc.txt").read_text()
    stage = "/root/.cache/kernelwheel/dev/argk-663d0de9c7e7/torch213-cxx11-cpu-x86_64-linux"
    paths = PathMap((f"{stage}/project", "/home/me/argk"), f"{stage}/obj")
    found = failure(text, paths)
    header = (
        "/root/.cache/kernelwheel/envs/py3.11-3dcaaec7a742cdd0/lib/python3.11/site-packages/"
        "torch/include/ATen/core/op_registration/infer_schema.h"
    )
    assert found.units == ("torch-ext/torch_binding.cpp",)
    assert found.lines == (
        f"{header}:41:21: error: static assertion failed: INVALID TYPE: float is not supported "
        "as an argument type, use double instead",
        "… (18 more lines of this error in the log: the templates' trace)",
        "from the project: torch-ext/torch_binding.cpp:36 (the error is in a header outside it)",
    )
    hint = compile_hint(Variant.parse("torch213-cxx11-cpu-x86_64-linux"), text, True)
    shown = str(
        BuildError(
            "compiling torch-ext/torch_binding.cpp failed", hint=hint, diagnostics=found.lines
        )
    ).splitlines()
    assert shown[4].startswith(
        "  fix: torch cannot register that kernel's C++ signature: INVALID TYPE: float"
    ), shown


def test_a_header_the_project_holds_outside_the_units_include_folders_is_named_with_the_key(
    tmp_path: Path,
) -> None:
    # kernels-community relu with its kernel's header moved to relu_cpu/inc/: gcc's
    # "fatal error: zero.h: No such file or directory" came with the fix any error gets
    from support.tinykernel import write_tiny_kernel

    from kernelwheel.model.project import load_project

    project = load_project(write_tiny_kernel(tmp_path / "p"))
    (project.root / "csrc" / "inc").mkdir()
    (project.root / "csrc" / "inc" / "zero.h").write_text("#pragma once\n")
    cpu = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    gcc = "csrc/add_one.cpp:2:10: fatal error: zero.h: No such file or directory\n"
    hint = compile_hint(cpu, gcc, True, project)
    assert hint.startswith("the project holds csrc/inc/zero.h, in no include folder")
    assert 'add "csrc/inc" to include of [kernel.add_one] in build.toml' in hint
    nvcc = 'csrc/add_one.cpp(2): catastrophic error: cannot open source file "inc/zero.h"\n'
    assert 'add "csrc" to include of' in compile_hint(cpu, nvcc, True, project)
    binding = "torch-ext/torch_binding.cpp:3:10: fatal error: zero.h: No such file or directory"
    assert "to include of [torch] in build.toml" in compile_hint(cpu, binding, True, project)
    # a header the project does not hold (a library's): the compiler's error is the fix
    absent = "csrc/add_one.cpp:2:10: fatal error: cutlass/cutlass.h: No such file or directory"
    assert compile_hint(cpu, absent, True, project).startswith("the compiler's first error")
