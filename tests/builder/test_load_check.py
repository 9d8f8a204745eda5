"""The load check's reading of a failed import (builder/load_check.py), on the output torch and
Python give for each way a freshly linked extension fails to load."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.requests import build_request
from support.runners import Reply, ScriptedRunner
from support.sofiles import build_extension
from support.tinykernel import BINDING, write_tiny_kernel

from kernelwheel._util import Runner
from kernelwheel.builder._load_check import load_torch, load_tvm_ffi, syntax_errors
from kernelwheel.builder.load_check import LoadReport, explain_failure, skip_reason
from kernelwheel.builder.steps import load_checked
from kernelwheel.errors import BuildError
from kernelwheel.log import SilentReporter
from kernelwheel.model.variant import Arch, Variant

NS = "_tiny_add_0123456789"
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"

# What torch 2.13 prints when a kernel's C++ signature does not match its schema, thrown from a
# static registration while the shared object loads (std::terminate, then SIGABRT).
MISMATCH = f"""\
terminate called after throwing an instance of 'c10::Error'
  what():  Inferred operator schema for a C++ kernel function doesn't match the expected function schema.
  operator: {NS}::add_one
  expected schema: {NS}::add_one(Tensor x, Tensor y) -> Tensor
    registered at /kernelwheel/build/project/torch-ext/torch_binding.cpp:7
  inferred schema: (Tensor _0) -> Tensor _0
    registered at /kernelwheel/build/project/torch-ext/torch_binding.cpp:10
  reason: The number of arguments is different. 2 vs 1.
Exception raised from checkSchema at /__w/pytorch/aten/src/ATen/core/dispatch/OperatorEntry.cpp:98 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f in libc10.so)
"""  # noqa: E501

UNDEFINED = f"""\
Traceback (most recent call last):
  File "/x/_load_check.py", line 50, in <module>
    sys.exit(main(sys.argv[1:]))
ImportError: /w/lib/{NS}.abi3.so: undefined symbol: _Z11add_one_cpuRKN2at6TensorE
"""


def test_a_mismatched_schema_names_the_op_both_signatures_and_their_lines() -> None:
    message, lines, fix = explain_failure(-signal.SIGABRT, MISMATCH, NS)
    assert message == (
        "the extension crashed (SIGABRT) when loaded: op add_one: its C++ implementation does "
        "not match the schema it was defined with"
    )
    assert lines[0].split() == [
        "schema",
        "add_one(Tensor",
        "x,",
        "Tensor",
        "y)",
        "->",
        "Tensor",
        "(torch-ext/torch_binding.cpp:7)",
    ]
    assert lines[1].endswith("(Tensor _0) -> Tensor _0  (torch-ext/torch_binding.cpp:10)")
    assert lines[2].strip() == "The number of arguments is different. 2 vs 1."
    assert len(lines) == 3
    shown = "\n".join((message, *lines))
    assert NS not in shown and "/kernelwheel/" not in shown and "frame #0" not in shown
    assert 'ops.def("add_one(...)")' in fix


def test_a_mismatch_names_the_ops_own_def_and_impl_lines_in_the_project(tmp_path: Path) -> None:
    # torch names the TORCH_LIBRARY block's line for both; the author edits ops.def/ops.impl.
    binding = tmp_path / "torch-ext" / "torch_binding.cpp"
    binding.parent.mkdir()
    binding.write_text(BINDING.replace("add_one(Tensor x)", "add_one(Tensor x, Tensor y)"))
    text = binding.read_text().splitlines()
    block = next(i for i, line in enumerate(text, 1) if line.startswith("TORCH_LIBRARY"))
    define = next(i for i, line in enumerate(text, 1) if 'ops.def("add_one(' in line)
    implement = next(i for i, line in enumerate(text, 1) if 'ops.impl("add_one"' in line)
    stderr = MISMATCH.replace("torch_binding.cpp:7", f"torch_binding.cpp:{block}")
    stderr = stderr.replace("torch_binding.cpp:10", f"torch_binding.cpp:{block}")
    _, lines, _ = explain_failure(-signal.SIGABRT, stderr, NS, tmp_path)
    assert lines[0].endswith(f"(torch-ext/torch_binding.cpp:{define})"), lines
    assert lines[1].endswith(f"(torch-ext/torch_binding.cpp:{implement})"), lines
    assert block < define < implement
    # a file not in the project, or no line naming the op: torch's line, as it was
    _, lines, _ = explain_failure(-signal.SIGABRT, stderr, NS, tmp_path / "elsewhere")
    assert lines[0].endswith(f"(torch-ext/torch_binding.cpp:{block})"), lines
    binding.write_text("// nothing here\n")
    _, lines, _ = explain_failure(-signal.SIGABRT, stderr, NS, tmp_path)
    assert lines[1].endswith(f"(torch-ext/torch_binding.cpp:{block})"), lines


@pytest.mark.parametrize("op, define, implement", [("img2gray", 3, 7), ("img2gray.out", 4, 8)])
def test_an_overloads_lines_are_its_own_not_its_namesakes(
    tmp_path: Path, op: str, define: int, implement: int
) -> None:
    (tmp_path / "b.cpp").write_text(
        "// img2gray\n"
        "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
        '  ops.def("img2gray(Tensor input) -> Tensor");\n'
        '  ops.def("img2gray.out(Tensor input, Tensor! output, int s) -> ()");\n'
        "}\n"
        "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {\n"
        '  ops.impl("img2gray", &img2gray_cuda);\n'
        '  ops.impl("img2gray.out", &img2gray_out_cuda);\n'
        "}\n"
    )
    stderr = (
        MISMATCH.replace("add_one", op)
        .replace("torch-ext/torch_binding.cpp:7", "b.cpp:2")
        .replace("torch-ext/torch_binding.cpp:10", "b.cpp:6")
    )
    _, lines, fix = explain_failure(-signal.SIGABRT, stderr, NS, tmp_path)
    assert lines[0].endswith(f"(b.cpp:{define})") and lines[1].endswith(f"(b.cpp:{implement})")
    assert f'ops.def("{op}(...)")' in fix


# What torch 2.14 printed when the schema and its Meta kernel gained an argument and the CUDA
# kernel did not: the two kernels' signatures compared before either is checked against the schema.
KERNELS_DIFFER = f"""\
terminate called after throwing an instance of 'c10::Error'
  what():
Mismatch in kernel C++ signatures
  operator: {NS}::add_one(Tensor x, float alpha=1.) -> Tensor
    registered at /kernelwheel/build/project/torch-ext/torch_binding.cpp:3
  kernel 1: at::Tensor (at::Tensor const&, double)
    dispatch key: Meta
    registered at /kernelwheel/build/project/torch-ext/torch_binding.cpp:6
  kernel 2: at::Tensor (at::Tensor const&)
    dispatch key: CUDA
    registered at /kernelwheel/build/project/torch-ext/torch_binding.cpp:9

Exception raised from registerKernel at /__w/pytorch/aten/src/ATen/core/dispatch/OperatorEntry.cpp:174 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d (0x7f in libc10.so)
"""  # noqa: E501


def test_kernels_whose_signatures_differ_name_the_op_each_kernel_its_line_and_the_types(
    tmp_path: Path,
) -> None:
    binding = tmp_path / "torch-ext" / "torch_binding.cpp"
    binding.parent.mkdir()
    binding.write_text(
        "// add_one\n"
        "#include <torch/library.h>\n"
        "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
        '  ops.def("add_one(Tensor x, float alpha=1.0) -> Tensor");\n'
        "}\n"
        "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, Meta, ops) {\n"
        '  ops.impl("add_one", &add_one_meta);\n'
        "}\n"
        "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {\n"
        '  ops.impl("add_one", &add_one_cuda);\n'
        "}\n"
    )
    message, lines, fix = explain_failure(-signal.SIGABRT, KERNELS_DIFFER, NS, tmp_path)
    assert message == (
        "the extension crashed (SIGABRT) when loaded: op add_one: its kernels' C++ signatures "
        "differ"
    )
    assert [line.split("  (")[-1] for line in lines] == [
        "torch-ext/torch_binding.cpp:4)",
        "torch-ext/torch_binding.cpp:7)",
        "torch-ext/torch_binding.cpp:10)",
    ]
    assert lines[1].split() == [
        "Meta",
        "kernel",
        "at::Tensor",
        "(at::Tensor",
        "const&,",
        "double)",
    ] + ["(torch-ext/torch_binding.cpp:7)"]
    assert lines[2].split()[:2] == ["CUDA", "kernel"]
    assert fix == (
        "give each kernel of add_one (Meta, CUDA) the C++ types the schema asks for, "
        "at::Tensor add_one(const at::Tensor& x, double alpha)"
    )
    shown = "\n".join((message, *lines, fix))
    assert NS not in shown and "/kernelwheel/" not in shown and "--no-load-check" not in shown
    # a kernel registered with no dispatch key (ops.impl("add_one", &f) in TORCH_LIBRARY)
    catch_all = KERNELS_DIFFER.replace("dispatch key: CUDA", "dispatch key: (none)")
    _, lines, fix = explain_failure(-signal.SIGABRT, catch_all, NS, tmp_path)
    assert lines[2].split()[:2] == ["catch-all", "kernel"] and "(Meta, catch-all)" in fix


def test_an_undefined_symbol_says_a_definition_is_missing() -> None:
    message, lines, fix = explain_failure(1, UNDEFINED, NS)
    assert lines == ()
    assert message.startswith("the extension failed when loaded: ImportError: ")
    assert "undefined symbol: _Z11add_one_cpuRKN2at6TensorE" in message
    # the function the author wrote, not the linker's mangled name
    assert fix.startswith("add_one_cpu(at::Tensor const&) is declared but not defined")


def test_an_undefined_symbol_names_the_unlisted_source_that_defines_it(tmp_path: Path) -> None:
    # csrc/helper.cpp written, left out of build.toml: the fix said only "add its source to
    # build.toml's src", not which; a listed file that declares it, a header, are no answer
    (tmp_path / "csrc").mkdir()
    (tmp_path / "build.toml").write_text('[kernel.k]\nsrc = ["csrc/k.cpp"]\n')
    (tmp_path / "csrc" / "k.cpp").write_text("at::Tensor add_one_cpu(const at::Tensor& x);\n")
    (tmp_path / "csrc" / "k.h").write_text("at::Tensor add_one_cpu(const at::Tensor& x);\n")
    (tmp_path / "csrc" / "other.cpp").write_text("int add_one_cpu_too(int);\n")
    _, _, fix = explain_failure(1, UNDEFINED, NS, tmp_path)
    assert fix.endswith("or link the library that has it")  # nothing unlisted names it
    (tmp_path / "csrc" / "helper.cpp").write_text(
        "at::Tensor add_one_cpu(const at::Tensor& x) { return x + 1; }\n"
    )
    _, _, fix = explain_failure(1, UNDEFINED, NS, tmp_path)
    assert fix == (
        "add_one_cpu(at::Tensor const&) is declared but not defined in any compiled source: "
        "csrc/helper.cpp names it and is in no build.toml src list: add it to the src of the "
        "kernel that calls it"
    )


def test_an_undefined_symbol_names_the_listed_definition_whose_parameters_differ(
    tmp_path: Path,
) -> None:
    # the binding declared scale_cpu(..., float), the kernel defined it with double: "declared
    # but not defined in any compiled source", though a listed source defines it two lines in
    (tmp_path / "csrc").mkdir()
    (tmp_path / "build.toml").write_text('[kernel.k]\nsrc = ["csrc/k.cpp", "csrc/b.cpp"]\n')
    (tmp_path / "csrc" / "b.cpp").write_text(
        "at::Tensor add_one_cpu(const at::Tensor& x, double y);\n"
        "at::Tensor twice(const at::Tensor& x) { return add_one_cpu(x, 1.0) * 2; }\n"
    )
    _, _, fix = explain_failure(1, UNDEFINED, NS, tmp_path)
    assert fix.endswith("or link the library that has it")  # a declaration, a call: no answer
    (tmp_path / "csrc" / "k.cpp").write_text(
        "#include <torch/all.h>\n\nat::Tensor add_one_cpu(const at::Tensor& x,\n"
        "                       double y) {\n  return x + y;\n}\n"
    )
    _, _, fix = explain_failure(1, UNDEFINED, NS, tmp_path)
    assert fix == (
        "add_one_cpu(at::Tensor const&) is declared but not defined in any compiled source: "
        "csrc/k.cpp:3 defines a add_one_cpu: make its parameters and namespace the "
        "declaration's, and check that its kernel is compiled for this variant"
    )


def test_a_source_listed_in_single_quotes_is_not_called_unlisted_nor_an_unreadable_one_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # build.toml's 'csrc/helper.cpp' (a TOML literal string) was read as unlisted, the author
    # told to add a file already listed; a .cu the author cannot read (root-owned output of a
    # container) raised PermissionError in place of the load check's own error
    from support.tinykernel import write_tiny_kernel

    root = write_tiny_kernel(tmp_path / "p")
    text = (root / "build.toml").read_text()
    (root / "build.toml").write_text(text.replace('"csrc/add_one.cpp"', "'csrc/add_one.cpp'"))
    assert "'csrc/add_one.cpp'" in (root / "build.toml").read_text()
    (root / "csrc" / "add_one.cpp").write_text(
        "at::Tensor add_one_cpu(const at::Tensor& x) { return x + 1; }\n"
    )
    _, _, fix = explain_failure(1, UNDEFINED, NS, root)
    assert "in no build.toml src list" not in fix and "csrc/add_one.cpp:1 defines" in fix
    (root / "csrc" / "locked.cu").write_text("at::Tensor add_one_cpu(const at::Tensor& x);\n")
    read_text = Path.read_text

    def refusing(path: Path, *args: object, **kwargs: object) -> str:
        if path.name == "locked.cu":
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", refusing)
    message, _, fix = explain_failure(1, UNDEFINED, NS, root)
    assert "undefined symbol" in message and "in no build.toml src list" not in fix


def test_any_other_failure_shows_its_last_lines_and_the_way_out() -> None:
    message, lines, fix = explain_failure(-signal.SIGSEGV, "boom\nSegfault in init\n", NS)
    assert message == "the extension crashed (SIGSEGV) when loaded: boom"
    assert lines == ("  Segfault in init",)
    assert "--no-load-check" in fix


def test_another_arch_is_not_loaded_here() -> None:
    here = Arch.host().value
    other = "aarch64" if here == "x86_64" else "x86_64"
    reason = skip_reason(Variant.parse(f"torch213-cxx11-cpu-{other}-linux"))
    assert reason == f"an {other} extension cannot be loaded on this {here} host"
    assert skip_reason(Variant.parse(f"torch213-cxx11-cpu-{here}-linux")) is None


def test_the_report_names_the_ops_without_the_namespace() -> None:
    report = LoadReport(
        ops=(f"{NS}::add_one(Tensor x) -> Tensor", f"{NS}::twice(Tensor x) -> Tensor")
    )
    assert report.describe(NS) == "2 op(s) loaded: add_one, twice"


def test_a_tvm_ffi_object_is_reported_with_the_functions_it_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the build said "0 op(s) loaded" for every tvm-ffi kernel (a function exported under a
    # wrong name went unseen), and tvm_ffi.load_module binds lazily, so an object calling a
    # function no source defines passed, to fail at the user's call
    funcs = "void __tvm_ffi_add_one_cpu(void) {%s}\nvoid __tvm_ffi_twice(void) {}\n"
    funcs += "void *__tvm_ffi__library_ctx = 0;\n"  # tvm-ffi's own symbol: no function
    module = SimpleNamespace(implements_function=lambda name: not name.startswith("_"))
    monkeypatch.setitem(sys.modules, "tvm_ffi", SimpleNamespace(load_module=lambda p: module))
    good, bad = (tmp_path / "good.so", tmp_path / "bad.so")
    good.write_bytes(build_extension(tmp_path, "good", code=(funcs % "", "")))
    assert load_tvm_ffi(str(good)) == ["add_one_cpu", "twice"]
    missing = ("void missing(void);\n" + funcs % "missing();", "")
    bad.write_bytes(build_extension(tmp_path, "bad", code=missing))
    with pytest.raises(OSError, match="undefined symbol: missing"):
        load_tvm_ffi(str(bad))


class _Schema(SimpleNamespace):
    def __str__(self) -> str:
        return f"{self.name}{'.' + self.overload_name if self.overload_name else ''}(Tensor x)"


def test_a_misspelt_impl_and_a_fixed_namespace_are_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ops.impl("add_onee", ...) beside ops.def("add_one(...)"), and an op defined under a fixed
    # TORCH_LIBRARY(my_ns, m): torch accepts both silently. Its dispatcher as a stand-in; the
    # extension a module whose import registers them, as a shared object's does.
    schemas = [_Schema(name="aten::add", overload_name="")]
    names = [f"{NS}::add_one", f"{NS}::add_one.out", f"{NS}::add_onee", "aten::add"]
    fake = SimpleNamespace(
        _jit_get_all_schemas=lambda: list(schemas), _dispatch_get_all_op_names=lambda: names
    )
    torch = SimpleNamespace(_C=fake, schemas=schemas, Schema=_Schema)
    monkeypatch.setitem(sys.modules, "torch", torch)
    (tmp_path / "ext.py").write_text(
        "import torch\n"
        f"torch.schemas += [torch.Schema(name='{NS}::add_one', overload_name=''),\n"
        f"    torch.Schema(name='{NS}::add_one', overload_name='out'),\n"
        "    torch.Schema(name='my_ns::twice', overload_name='')]\n"
    )
    found = load_torch(str(tmp_path / "ext.py"), NS)
    assert found["undefined"] == [f"{NS}::add_onee"]
    assert found["elsewhere"] == ["my_ns::twice(Tensor x)"]  # aten's, there before, is not
    warnings = LoadReport.read(found).warnings(NS)
    assert "ops.impl of add_onee, which no ops.def of the build's namespace" in warnings[1]
    assert warnings[0].startswith("warning: my_ns::twice defined outside the build's namespace")
    assert "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)" in warnings[0]
    assert LoadReport.read({"ops": found["ops"]}).warnings(NS) == ()


# What torch prints for ops.def("add_one(Tensor x -> Tensor"), a schema it cannot parse.
UNPARSED = """\
terminate called after throwing an instance of 'std::runtime_error'
  what():  expected ) but found 'arrow' here:
add_one(Tensor x -> Tensor
                 ~~ <--- HERE
"""


def test_a_schema_torch_cannot_parse_is_named_with_its_line_and_column(tmp_path: Path) -> None:
    binding = tmp_path / "torch-ext" / "torch_binding.cpp"
    binding.parent.mkdir()
    binding.write_text('TORCH_LIBRARY(x, ops) {\n  ops.def("add_one(Tensor x -> Tensor");\n}\n')
    (tmp_path / "csrc").mkdir()  # a header that quotes it too: the binding's line is the one
    (tmp_path / "csrc" / "a.h").write_text('// "add_one(Tensor x -> Tensor"\n')
    message, lines, fix = explain_failure(-signal.SIGABRT, UNPARSED, NS, tmp_path)
    assert message == (
        "the extension crashed (SIGABRT) when loaded: the op schema 'add_one(Tensor x -> Tensor' "
        "(torch-ext/torch_binding.cpp:2) does not parse: expected ) but found 'arrow' here:"
    )
    # the ~~ stays under the column torch stopped at
    assert lines == ("  add_one(Tensor x -> Tensor", "                   ~~ <--- HERE")
    assert fix.startswith("fix that schema in its ops.def(...)")
    # a schema of several literals, one a line (kernels-community's apply_rotary): its first
    (tmp_path / "csrc" / "a.h").unlink()
    binding.write_text(
        'TORCH_LIBRARY(x, ops) {\n  ops.def(\n      "add_one(Tensor x "\n      "-> Tensor");\n}\n'
    )
    message, _, _ = explain_failure(-signal.SIGABRT, UNPARSED, NS, tmp_path)
    assert "(torch-ext/torch_binding.cpp:3) does not parse" in message, message


def test_a_package_file_that_does_not_compile_fails_the_check_with_its_project_path(
    tmp_path: Path,
) -> None:
    package = tmp_path / "torch-ext" / "tiny_add"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from ._ops import ops\n\ndef add_one(x)\n    return x\n")
    (package / "sub" / "nul.py").write_bytes(b"x = 1\x00\n")
    (package / "fine.py").write_text("match = 1\n")
    (package / "notes.txt").write_text("def (\n")  # not Python: not compiled
    (package / ".#__init__.py").symlink_to("me@host.4242:1700000000")  # emacs's lock: skipped
    # and its lock where links cannot be made (a Windows drive under WSL): a file of that text
    (package / "sub" / ".#nul.py").write_text("me@host.4242:1700000000")
    found = syntax_errors(str(package))
    assert len(found) == 2, found
    assert found[0] == f"{package}/__init__.py:3: expected ':'"
    assert found[1].startswith(f"{package}/sub/nul.py")
    with pytest.raises(BuildError) as caught:
        LoadReport.read({"syntax": found}).refuse_syntax(tmp_path / "log", tmp_path)
    assert "do not compile with the build environment's Python" in str(caught.value)
    assert caught.value.diagnostics[0] == "  torch-ext/tiny_add/__init__.py:3: expected ':'"
    assert LoadReport.read({"ops": ["x"]}).refuse_syntax(tmp_path / "log", tmp_path).ops == ("x",)


def test_a_load_check_warning_is_shown_on_every_run_that_reuses_its_build(
    tmp_path: Path,
) -> None:
    # A dev build's load check runs once per shared object: its warning (here a misspelt
    # ops.impl) showed on that run only, and the next unchanged run said nothing.
    req = build_request(write_tiny_kernel(tmp_path / "p"), Variant.parse(CPU_VARIANT))
    req.log.parent.mkdir(parents=True, exist_ok=True)
    found = {"ops": [f"{NS}::add_one(Tensor x) -> Tensor"], "undefined": [f"{NS}::add_onee"]}
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout=json.dumps(found) + "\n"))
    record = tmp_path / "dev" / "v.loaded"
    record.parent.mkdir()
    shown = []
    for digest in ("aaa", "aaa", "aaa", "bbb"):
        reporter = SilentReporter()
        so = tmp_path / "x.so"
        load_checked(req, Path("py"), so, NS, reporter, runner, loaded=(record, digest))
        shown.append([m for _, m in reporter.messages if "add_onee" in m])
    assert _loads(runner) == 2  # loaded once per shared object
    assert all(len(lines) == 1 for lines in shown)
    assert shown[1] == shown[2] and shown[1][0].startswith(shown[0][0])
    assert shown[1][0].endswith("(this build's load check; shown until it changes)")
    assert record.read_text().splitlines()[0] == "bbb"
    # a build whose check found nothing shows nothing on its next runs
    found.pop("undefined")
    load_checked(req, Path("py"), so, NS, SilentReporter(), runner, loaded=(record, "ccc"))
    reporter = SilentReporter()
    load_checked(req, Path("py"), so, NS, reporter, runner, loaded=(record, "ccc"))
    assert reporter.messages == [] and _loads(runner) == 3


def test_an_op_without_a_kernel_for_the_variants_backend_is_warned_of() -> None:
    # the CPU registration left out of a CPU build (a Meta kernel alone): "1 op(s) loaded", and
    # every test of the op was skipped or failed with NotImplementedError far from the cause
    from kernelwheel.builder.load_check import dispatch_key

    found = {
        "ops": [f"{NS}::add_one(Tensor x) -> Tensor", f"{NS}::mul(Tensor x) -> Tensor"],
        "lacking": {"CPU": [f"{NS}::add_one"], "CUDA": [f"{NS}::add_one", f"{NS}::mul"]},
    }
    report = LoadReport.read(found)
    cpu = dispatch_key(Variant.parse("torch213-cxx11-cpu-x86_64-linux"))
    assert cpu == "CPU"
    assert report.warnings(NS, cpu) == (
        "warning: add_one has no CPU kernel in this build: a call with CPU tensors raises "
        "NotImplementedError (\"Could not run ... from the 'CPU' backend\"); register one in "
        'the binding: ops.impl("add_one", torch::kCPU, &fn) under #if defined(CPU_KERNEL), '
        'fn\'s source in the src of a build.toml kernel with backend = "cpu"',
    )
    cuda = dispatch_key(Variant.parse("torch214-cxx11-cu130-x86_64-linux"))
    # two ops: "have", each one to register (not "add_one, mul has no CUDA kernel")
    assert "add_one, mul have no CUDA kernel" in report.warnings(NS, cuda)[0]
    assert (
        'register each in the binding: ops.impl("add_one", torch::kCUDA, &fn)'
        in (report.warnings(NS, cuda)[0])
    )
    assert report.warnings(NS) == ()  # a backend torch has no key of here: nothing to say
    assert LoadReport.read({"ops": found["ops"]}).warnings(NS, cpu) == ()  # an older child


def test_a_cuda_builds_op_with_a_cpu_kernel_only_is_not_said_to_raise_on_every_call() -> None:
    # A CUDA variant whose binding registers mul's CPU kernel alone: the warning said "every
    # call raises", though calls with CPU tensors run; it names the device whose calls raise.
    found = {
        "ops": [f"{NS}::add_one(Tensor x) -> Tensor", f"{NS}::mul(Tensor x) -> Tensor"],
        "lacking": {"CPU": [f"{NS}::add_one"], "CUDA": [f"{NS}::add_one", f"{NS}::mul"]},
    }
    (warning,) = LoadReport.read(found).warnings(NS, "CUDA")
    assert "every call" not in warning
    assert warning.startswith(
        "warning: add_one, mul have no CUDA kernel in this build: a call with CUDA tensors "
        "raises NotImplementedError (\"Could not run ... from the 'CUDA' backend\") (mul runs "
        "on CPU tensors); register each in the binding"
    )
    assert 'backend = "cuda"' in warning and "#if defined(CUDA_KERNEL)" in warning
    # a CPU build's op with a CUDA kernel only (its CPU one left out) runs on CUDA tensors
    found["lacking"] = {"CPU": [f"{NS}::mul"], "CUDA": []}
    (warning,) = LoadReport.read(found).warnings(NS, "CPU")
    assert "(mul runs on CUDA tensors)" in warning


def test_ops_without_a_fake_kernel_get_one_note_naming_the_fix() -> None:
    # torch.compile (and torch.library.opcheck) fails on an op with no Meta kernel: one note for
    # them all, not a warning (many authors never compile); none when every op has one
    found = {"ops": [f"{NS}::a(Tensor x) -> Tensor"], "no_fake": [f"{NS}::a", f"{NS}::b.out"]}
    assert LoadReport.read(found).notes(NS) == (
        "note: a, b.out have no fake (Meta) kernel: torch.compile and torch.library.opcheck "
        "fail on them; register one in the package's Python (@torch.library.register_fake("
        'add_op_namespace_prefix("a")), the prefix from ._ops) or in the binding (ops.impl("a", '
        "torch::kMeta, &fn))",
    )
    assert LoadReport.read(found).warnings(NS, "CPU") == ()  # a note, not a warning
    assert LoadReport.read({"ops": found["ops"]}).notes(NS) == ()
    # an overload is registered by its full name, in the note and the kernel warning alike
    overload = LoadReport.read({"no_fake": [f"{NS}::b.out"], "lacking": {"CUDA": [f"{NS}::b.out"]}})
    assert 'register_fake(add_op_namespace_prefix("b.out"))' in overload.notes(NS)[0]
    assert 'ops.impl("b.out", torch::kMeta, &fn)' in overload.notes(NS)[0]
    assert 'ops.impl("b.out", torch::kCUDA, &fn)' in overload.warnings(NS, "CUDA")[0]


def test_ops_with_a_kernel_for_every_backend_or_one_from_python_are_not_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch 2.13's dispatcher, asked of ops a library registered so (checked on the real one):
    # a CompositeExplicitAutogradNonFunctional kernel alone runs on CPU and CUDA alike; an op
    # the binding defines and the package's Python implements (torch.library.impl) gets its
    # kernel when the package is imported, after the check
    kernels = {
        f"{NS}::functional": {"CompositeExplicitAutogradNonFunctional"},
        f"{NS}::implicit": {"CompositeImplicitAutograd"},
        f"{NS}::from_python": set(),
        f"{NS}::meta_only": {"Meta"},
        f"{NS}::cpu_only": {"CPU", "CUDA"},  # a fake from Python: not noted
        f"{NS}::plain": {"CPU", "CUDA"},
    }
    schemas: list[_Schema] = []
    fake = SimpleNamespace(
        _jit_get_all_schemas=lambda: list(schemas),
        _dispatch_get_all_op_names=lambda: list(kernels),
        _dispatch_has_kernel_for_dispatch_key=lambda name, key: key in kernels[name],
    )
    torch = SimpleNamespace(_C=fake, schemas=schemas, Schema=_Schema)
    monkeypatch.setitem(sys.modules, "torch", torch)
    (tmp_path / "ext.py").write_text(
        "import torch\n"
        f"torch.schemas += [torch.Schema(name=n, overload_name='') for n in {list(kernels)}]\n"
    )
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix\n\n"
        '@torch.library.impl(add_op_namespace_prefix("from_python"), "CPU")\n'
        "def _(x):\n    return x\n"
    )
    (package / "fake.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix\n\n"
        '@torch.library.register_fake(add_op_namespace_prefix("cpu_only"))\n'
        "def _(x):\n    return x\n"
    )
    # what the extension registers, before the package's Python adds its kernels
    found = load_torch(str(tmp_path / "ext.py"), NS)
    both = [f"{NS}::from_python", f"{NS}::meta_only"]
    assert found["lacking"] == {"CPU": both, "CUDA": both}
    # no Meta kernel (the composites serve Meta too)
    assert found["no_fake"] == [f"{NS}::cpu_only", f"{NS}::from_python", f"{NS}::plain"]
    # the package's Python read by the caller: the ops it gives a kernel (a fake one) are not
    # warned of (noted)
    report = LoadReport.read(found)
    assert report.warnings(NS, "CPU", package)[0].startswith("warning: meta_only has no CPU")
    assert "cpu_only" not in report.notes(NS, package)[0]
    assert report.notes(NS, package)[0].startswith("note: from_python, plain have no fake")
    assert "from_python, meta_only have no CPU" in report.warnings(NS, "CPU")[0]  # no package


def test_a_reused_builds_warning_follows_the_packages_python_as_it_is_now(
    tmp_path: Path,
) -> None:
    # A dev build whose op had no CPU kernel: the author registers one from the package's
    # Python (torch.library.impl), no C++ changed, the extension reused; the recorded warning
    # went on saying "no CPU kernel" on every run, stale, until the extension changed.
    req = build_request(write_tiny_kernel(tmp_path / "p"), Variant.parse(CPU_VARIANT))
    req.log.parent.mkdir(parents=True, exist_ok=True)
    found = {"ops": [f"{NS}::add_one(Tensor x) -> Tensor"], "lacking": {"CPU": [f"{NS}::add_one"]}}
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout=json.dumps(found) + "\n"))
    record = tmp_path / "dev" / "v.loaded"
    record.parent.mkdir()

    def shown() -> list[str]:
        reporter = SilentReporter()
        load_checked(req, Path("py"), tmp_path / "x.so", NS, reporter, runner, loaded=(record, "a"))
        return [m for _, m in reporter.messages if "no CPU kernel" in m]

    assert len(shown()) == 1 and len(shown()) == 1  # loaded, then reused: shown both times
    init = req.project.package_dir / "__init__.py"
    init.write_text(
        init.read_text() + "\n\n@torch.library.impl(add_op_namespace_prefix('add_one'), 'CPU')\n"
        "def _(x):\n    return x + 1\n"
    )
    assert shown() == [] and _loads(runner) == 1  # the same extension, not loaded again
    # a record an older kernelwheel wrote (its warnings as text): the check runs again
    record.write_text("a\nops: add_one\nwarning: add_one has no CPU kernel\n")
    assert shown() == [] and _loads(runner) == 2
    # a damaged record, JSON of another shape: the check runs again, no traceback
    for damaged in ('{"ops": 5}', '{"lacking": {"CPU": 3}}', '{"no_fake": null}'):
        record.write_text(f"a\n{damaged}\n")
        before = _loads(runner)
        assert shown() == [] and _loads(runner) == before + 1


def test_a_call_of_an_op_the_build_no_longer_defines_is_warned_of_with_its_line(
    tmp_path: Path,
) -> None:
    # split2 renamed to split_pm in the binding, the package's wrapper left calling
    # ops.split2: the build, `check` and `import` all passed, and every call raised
    # AttributeError in the user's code
    req = build_request(write_tiny_kernel(tmp_path / "p"), Variant.parse(CPU_VARIANT))
    req.log.parent.mkdir(parents=True, exist_ok=True)
    package = req.project.package_dir
    where = package.relative_to(req.project.root).as_posix() + "/__init__.py"
    (package / "__init__.py").write_text(
        "from ._ops import ops\n\n\ndef add_one(x):\n    return ops.add_one.default(x)\n\n\n"
        "def split2(x):\n    return ops.split2(x)\n"
    )
    (package / "helpers.py").write_text("import torch.ops as ops\n\nops.anything\n")  # not ours
    found = {"ops": [f"{NS}::add_one(Tensor x) -> Tensor", f"{NS}::split_pm.out(Tensor x) -> ()"]}
    runner = ScriptedRunner(lambda cmd, cwd: Reply(stdout=json.dumps(found) + "\n"))
    record = tmp_path / "dev" / "v.loaded"
    record.parent.mkdir()
    warning = (
        f"warning: the package calls ops.split2 ({where}:9), which no ops.def defines (this "
        "build's ops: add_one, split_pm): each such call raises AttributeError (a registration "
        "naming it with add_op_namespace_prefix fails the package's import); rename the "
        "call or define the op"
    )
    shown = []
    for _ in range(2):  # loaded, then reused (the dev loop): the warning both times
        reporter = SilentReporter()
        load_checked(req, Path("py"), tmp_path / "x.so", NS, reporter, runner, loaded=(record, "a"))
        shown.append([m for _, m in reporter.messages if "warning" in m])
    assert shown == [[warning], [warning]] and _loads(runner) == 1
    # the call mended, the shared object unchanged: no stale warning on the next run
    (package / "__init__.py").write_text("from ._ops import ops\n\nops.split_pm(1)\n")
    reporter = SilentReporter()
    load_checked(req, Path("py"), tmp_path / "x.so", NS, reporter, runner, loaded=(record, "a"))
    assert reporter.messages == [] and _loads(runner) == 1
    # a release build: the check's own run
    (package / "__init__.py").write_text("from ._ops import ops\n\nops.gone(1)\n")
    reporter = SilentReporter()
    load_checked(req, Path("py"), tmp_path / "x.so", NS, reporter, runner)
    assert [m for _, m in reporter.messages if "ops.gone" in m]


# Ops a library registers from Python so, each with the kernels its name says; py_fake's fake
# kernel comes from the package's Python (register_fake), imported after the check.
REAL_EXTENSION = """\
import torch
_lib = torch.library.Library("{ns}", "DEF")
for name in ("cpu_only", "with_meta", "composite", "py_fake"):
    _lib.define(name + "(Tensor x) -> Tensor")
_lib.impl("cpu_only", lambda x: x, "CPU")
_lib.impl("with_meta", lambda x: x, "CPU")
_lib.impl("with_meta", lambda x: x, "Meta")
_lib.impl("composite", lambda x: x, "CompositeExplicitAutograd")
_lib.impl("py_fake", lambda x: x, "CPU")
"""

# What torch.compile's fake tensors say of each op, the package's fake kernel registered: the
# ops they cannot run
FAKE_RUN = """\
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import ext
torch.library.register_fake("{ns}::py_fake", lambda x: torch.empty_like(x))
from torch._subclasses.fake_tensor import FakeTensorMode
failed = []
for name in ("cpu_only", "with_meta", "composite", "py_fake"):
    try:
        with FakeTensorMode():
            getattr(torch.ops.{ns}, name)(torch.empty(3))
    except Exception:
        failed.append("{ns}::" + name)
print(json.dumps(failed))
"""


@pytest.mark.integration
def test_the_ops_noted_for_torch_compile_are_those_fake_tensors_cannot_run(
    tmp_path: Path,
) -> None:
    # the check's child on a real torch (2.13 CPU's build environment, no compile), against
    # what FakeTensorMode itself does with each op
    import subprocess

    from support.builds import build_env
    from support.variants import TORCH213_CPU

    python = str(build_env(TORCH213_CPU).python)
    (tmp_path / "ext.py").write_text(REAL_EXTENSION.format(ns=NS))
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix\n\n"
        '@torch.library.register_fake(add_op_namespace_prefix("py_fake"))\n'
        "def _(x):\n    return torch.empty_like(x)\n"
    )
    program = str(Path(load_torch.__code__.co_filename))
    argv = [python, program, "torch", str(tmp_path / "ext.py"), NS, str(package)]
    found = json.loads(subprocess.run(argv, capture_output=True, check=True).stdout)
    run = [python, "-c", FAKE_RUN.format(ns=NS), str(tmp_path)]
    failed = json.loads(subprocess.run(run, capture_output=True, check=True).stdout)
    assert failed == [f"{NS}::cpu_only"]
    report = LoadReport.read(found)  # the package's Python read here: py_fake has its fake
    assert report.notes(NS, package)[0].startswith("note: cpu_only has no fake (Meta) kernel")
    # the CUDA build's view: no CUDA kernel for three, each of which runs on CPU tensors
    (warning,) = report.warnings(NS, "CUDA")
    assert "cpu_only, py_fake, with_meta have no CUDA kernel" in warning
    assert "(cpu_only, py_fake, with_meta run on CPU tensors)" in warning


def test_the_ops_the_packages_python_registers_are_those_its_calls_name(tmp_path: Path) -> None:
    # Every name quoted in a file that registered one kernel counted as registered: an
    # __all__ beside one register_fake silenced the note (and a warning) for every op it lists.
    from kernelwheel.builder.load_check import python_kernels

    (tmp_path / "__init__.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix, ops\n\n"
        '__all__ = ["a", "b", "c", "d", "e"]\n\n'
        '@torch.library.register_fake(add_op_namespace_prefix("a"))\n'
        "def _(x):\n    return x\n\n"
        'torch.library.impl(add_op_namespace_prefix("c"), "Meta")(lambda x: x)\n'
        'torch.library.impl(f"{NS}::d.out", ("CPU", "Meta"))(lambda x: x)\n'
        "torch.library.register_fake(ops.e.default)(lambda x: x)\n"
    )
    assert python_kernels(tmp_path, fake=True) == {"a", "c", "d.out", "e"}
    assert python_kernels(tmp_path) == {"d.out"}  # a Meta kernel alone runs no tensor
    # an op named by a variable: every name the file quotes, as silence beats a false alarm
    (tmp_path / "more.py").write_text(
        'import torch\nNAME = "ns::f"\nOTHER = "g"\ntorch.library.register_fake(NAME)(len)\n'
    )
    assert python_kernels(tmp_path, fake=True) == {"a", "c", "d.out", "e", "f", "g"}


def test_a_kernel_registered_for_a_device_type_counts_as_torch_maps_it_to_its_key(
    tmp_path: Path,
) -> None:
    # torch.library.impl and register_kernel take device types, which torch maps to keys
    # (torch 2.13: "meta" -> Meta, "default" -> CompositeExplicitAutograd): a "meta" kernel
    # was read as a CPU/CUDA one (the missing-kernel warning silenced) and as no fake (the
    # torch.compile note given for an op that has one)
    from kernelwheel.builder.load_check import python_kernels

    (tmp_path / "__init__.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix\n\n"
        'torch.library.impl(add_op_namespace_prefix("b"), "meta")(lambda x: x)\n'
        'torch.library.register_kernel(add_op_namespace_prefix("g"), "meta")(lambda x: x)\n'
        'torch.library.impl(add_op_namespace_prefix("h"), ["cpu", "meta"])(lambda x: x)\n'
        'torch.library.impl(add_op_namespace_prefix("k"), "default")(lambda x: x)\n'
        'torch.library.impl(add_op_namespace_prefix("c"), "cuda")(lambda x: x)\n'
    )
    assert python_kernels(tmp_path, fake=True) == {"b", "g", "h", "k"}
    assert python_kernels(tmp_path) == {"h", "k", "c"}


def test_a_python_kernel_for_another_backend_does_not_silence_the_missing_kernel_warning(
    tmp_path: Path,
) -> None:
    # a CPU build whose op has no CPU kernel, the package's Python registering a CUDA one:
    # the warning that CPU tensors raise was silenced by a kernel they never reach
    (tmp_path / "__init__.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix\n\n"
        'torch.library.impl(add_op_namespace_prefix("on_cuda"), "cuda")(lambda x: x)\n'
        'torch.library.impl(add_op_namespace_prefix("on_cpu"), "CPU")(lambda x: x)\n'
        'torch.library.register_kernel(add_op_namespace_prefix("everywhere"), None)(len)\n'
        'torch.library.impl(add_op_namespace_prefix("composite"), "default")(lambda x: x)\n'
    )
    found = {"lacking": {"CPU": [f"{NS}::{op}" for op in ("on_cuda", "on_cpu", "everywhere")]}}
    (warning,) = LoadReport.read(found).warnings(NS, "CPU", tmp_path)
    assert warning.startswith("warning: on_cuda has no CPU kernel in this build")
    assert (
        LoadReport.read({"lacking": {"CUDA": [f"{NS}::on_cuda"]}}).warnings(NS, "CUDA", tmp_path)
        == ()
    )


def _loads(runner: ScriptedRunner) -> int:
    """The load checks ``runner`` ran (a reused build's run checks its Python's syntax alone)."""
    return sum(1 for cmd in runner.commands if str(cmd[2]) != "syntax")


def test_a_reused_builds_python_is_still_refused_where_it_does_not_compile(
    tmp_path: Path,
) -> None:
    # an edit of the package's Python alone: the shared object, unchanged, is not loaded again,
    # and `dev` said ✓ (exit 0) where `build` refuses the same files
    req = build_request(write_tiny_kernel(tmp_path / "p"), Variant.parse(CPU_VARIANT))
    req.log.parent.mkdir(parents=True, exist_ok=True)
    runner = Runner()  # the syntax check's child for real: this Python, _load_check.py
    record = tmp_path / "dev" / "v.loaded"
    record.parent.mkdir()
    record.write_text("a\n" + json.dumps({"ops": [f"{NS}::add_one(Tensor x) -> Tensor"]}) + "\n")
    so, python = tmp_path / "x.so", Path(sys.executable)
    load_checked(req, python, so, NS, SilentReporter(), runner, loaded=(record, "a"))
    init = req.project.package_dir / "__init__.py"
    init.write_text(init.read_text() + "def broken(:\n")
    with pytest.raises(BuildError) as caught:
        load_checked(req, python, so, NS, SilentReporter(), runner, loaded=(record, "a"))
    assert "do not compile with the build environment's Python" in str(caught.value)
    line = init.read_text().count("\n")
    assert caught.value.diagnostics == (f"  torch-ext/tiny_add/__init__.py:{line}: invalid syntax",)
    # x.so does not exist: a load of it would have failed with another message


def test_a_mismatchs_fix_gives_the_cxx_signature_the_schema_asks_for() -> None:
    # torch 2.13's own message for lin(Tensor x, Tensor? bias=None) implemented with a Tensor
    stderr = (
        MISMATCH.replace("add_one(Tensor x, Tensor y)", "lin(Tensor x, Tensor? bias=None)")
        .replace("add_one", "lin")
        .replace("(Tensor _0) -> Tensor _0", "(Tensor _0, Tensor _1) -> Tensor _0")
        .replace(
            "The number of arguments is different. 2 vs 1.",
            "Type mismatch in argument 2: Tensor? vs Tensor.",
        )
    )
    _, lines, fix = explain_failure(-signal.SIGABRT, stderr, NS)
    assert lines[2].strip() == "Type mismatch in argument 2: Tensor? vs Tensor."
    assert "at::Tensor lin(const at::Tensor& x, const std::optional<at::Tensor>& bias)" in fix
    assert 'ops.def("lin(...)")' in fix and NS not in fix


def test_an_overload_is_its_own_op_for_the_kernels_python_registers(tmp_path: Path) -> None:
    # torch 2.13: register_fake("ns::f") gives f a Meta kernel and f.out none (and the other
    # way round): a fake for one silenced the note (and a kernel the warning) of the other
    (tmp_path / "__init__.py").write_text(
        "import torch\nfrom ._ops import add_op_namespace_prefix, ops\n\n"
        'torch.library.register_fake(add_op_namespace_prefix("add_one"))(len)\n'
        "torch.library.register_fake(ops.split.out)(len)\n"
        "torch.library.register_fake(ops.mul.default)(len)\n"
        'torch.library.impl(add_op_namespace_prefix("scale.out"), "CPU")(len)\n'
    )
    ops = ("add_one", "add_one.out", "split", "split.out", "mul", "scale", "scale.out")
    report = LoadReport.read(
        {
            "no_fake": [f"{NS}::{op}" for op in ops],
            "lacking": {"CPU": [f"{NS}::{op}" for op in ops]},
        }
    )
    (note,) = report.notes(NS, tmp_path)
    assert note.startswith("note: add_one.out, split, scale, scale.out have no fake"), note
    (warning,) = report.warnings(NS, "CPU", tmp_path)
    assert warning.startswith(
        "warning: add_one, add_one.out, split, split.out, mul, scale have no CPU kernel"
    ), warning


def test_an_op_the_packages_python_defines_under_a_computed_name_is_not_called_undefined() -> None:
    # ops defined in a loop (define(name + "(Tensor x) -> Tensor"), as REAL_EXTENSION does)
    # were no op of the package's own: each call of one warned that it raises AttributeError
    from kernelwheel.builder.load_check import op_calls

    source = (
        b"import torch\nfrom ._ops import ops, add_op_namespace_prefix\n\n"
        b'_lib = torch.library.Library("ns", "FRAGMENT")\n'
        b'for name in ("scale", "shift"):\n'
        b'    _lib.define(name + "(Tensor x) -> Tensor")\n'
        b'SCHEMA = "ns::norm.out(Tensor x) -> Tensor"\n'
        b"_lib.define(SCHEMA)\n"
        b'torch.library.define(add_op_namespace_prefix("clip"), "(Tensor x) -> Tensor")\n\n'
        b"ops.scale(1)\nops.shift(1)\nops.norm(1)\nops.clip(1)\nops.gone(1)\n"
    )
    assert op_calls([("p/__init__.py", source)]) == [("gone", "p/__init__.py:15")]


def test_a_mismatch_of_an_op_defined_with_its_function_names_that_line(tmp_path: Path) -> None:
    # ops.def("deffn(Tensor x, Tensor y) -> Tensor", &twice): torch 2.13 names the block's
    # line for the implementation; the line to edit is that ops.def, not the block's first
    (tmp_path / "b.cpp").write_text(
        "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
        '  ops.def("twice(Tensor x) -> Tensor");\n'
        '  ops.def("deffn(Tensor x, Tensor y) -> Tensor", &twice);\n'
        '  ops.impl("twice", torch::kCPU, &twice);\n'
        "}\n"
    )
    stderr = (
        MISMATCH.replace("add_one", "deffn")
        .replace("torch-ext/torch_binding.cpp:7", "b.cpp:3")
        .replace("torch-ext/torch_binding.cpp:10", "b.cpp:1")
    )
    _, lines, _ = explain_failure(-signal.SIGABRT, stderr, NS, tmp_path)
    assert lines[0].endswith("(b.cpp:3)") and lines[1].endswith("(b.cpp:3)"), lines


def test_a_call_of_an_op_the_package_probes_for_is_not_called_undefined() -> None:
    # an op a variant may lack (defined under CUDA_KERNEL alone), its call guarded by
    # hasattr(ops, ...) or a try catching AttributeError: every such call was warned to raise
    from kernelwheel.builder.load_check import op_calls

    source = (
        b"from ._ops import ops\n\n"
        b'HAS = hasattr(ops, "third") and hasattr(torch, "gone")\n'
        b"def f(x):\n"
        b'    if hasattr(ops, "fast"):\n'
        b"        return ops.fast(x)\n"
        b"    try:\n"
        b"        return ops.other(x)\n"
        b"    except (KeyError, AttributeError):\n"
        b"        return ops.third(x) if HAS else x\n"
        b"    try:\n"
        b"        return ops.unguarded(x)\n"
        b"    except KeyError:\n"
        b"        return ops.gone(x)\n"
    )
    assert op_calls([("p.py", source)]) == [("unguarded", "p.py:12"), ("gone", "p.py:14")]


def test_a_registration_naming_an_op_the_binding_no_longer_defines_is_warned_of() -> None:
    # split2 renamed to halves in the binding alone: register_fake / register_autograd of
    # add_op_namespace_prefix("split2") fail the package's import (torch: "operator ... does
    # not exist"), and only the wrapper's ops.split2 call was warned of
    from kernelwheel.builder.load_check import op_calls

    source = (
        b"import torch\nfrom ._ops import add_op_namespace_prefix as prefix, ops\n\n"
        b'@torch.library.register_fake(prefix("split2"))\n'
        b"def _fake(x):\n    return x\n\n"
        b'torch.library.register_autograd(prefix("split2.out"), len)\n'
        b'torch.library.define(prefix("mine"), "(Tensor x) -> Tensor")\n'
        b'torch.library.register_fake(prefix("mine"))(len)\n'
        b"torch.library.register_fake(prefix(NAME))(len)\n"
        b'add_op_namespace_prefix("unrelated")\n'
    )
    assert op_calls([("p.py", source)]) == [("split2", "p.py:4"), ("split2", "p.py:8")]
