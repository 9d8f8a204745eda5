"""Compile one extension with torch.utils.cpp_extension INSIDE the build environment: run by
path, it imports the standard library, setuptools and torch, never kernelwheel. JSON spec in, JSON
result out; a ``commands`` spec (tvm-ffi) runs on the standard library alone (run_commands)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

_FLAG_LINES = ("cflags", "post_cflags", "cuda_cflags", "cuda_post_cflags")
# What torch's BuildExtension adds that kernel-builder does not: with it, <torch/torch.h> pulls
# in pybind11 (torch/extension.h), which does not compile under Py_LIMITED_API.
DROPPED_FLAGS = ("-DTORCH_API_INCLUDE_EXTENSION_H",)
# torch also defines TORCH_EXTENSION_NAME (the build id) for every unit; the plan defines it
# only for the units that name it (builder.compile_plan), so an edit recompiles those alone.
DROPPED_PREFIXES = ("-DTORCH_EXTENSION_NAME=",)
# ccache runs in depend mode (toolchain.compiler_cache); a source that reaches no torch header is
# cached on its preprocessed text instead, which every torch variant of one toolkit shares.
_PREPROCESSED = "CCACHE_NODEPEND=1"
_LIMITED_API = re.compile(r" -DPy_LIMITED_API=\S*")
# Tokens that name the build's real folders on purpose (prefix maps, nvcc's --keep-dir).
_REAL_PATH_FLAGS = ("-ffile-prefix-map=", "-Xcompiler=-ffile-prefix-map=", "--keep-dir")
_COMMAND_LINES = (*_FLAG_LINES, "cxx", "nvcc")
# A build line's paths (a space escaped as "$ ") and a flag line's shell words (quoted parts kept
# whole), for view_paths.
_NINJA_PATHS = re.compile(r"(?:\$.|[^ $])+")
_SHELL_WORDS = re.compile(r"""(?:[^\s'"\\]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+""")
_MAP = "-ffile-prefix-map="


def without_dropped(args: Any) -> Any:
    """``extra_compile_args`` (a list, or a dict of lists) without the dropped flags."""
    if isinstance(args, dict):
        return {key: without_dropped(value) for key, value in args.items()}
    return [
        arg for arg in args if arg not in DROPPED_FLAGS and not arg.startswith(DROPPED_PREFIXES)
    ]


def build_ext_class(build_extension: Any) -> Any:
    """torch's BuildExtension (ninja) without :data:`DROPPED_FLAGS`, dropped in
    ``build_extension``: the setuptools hook that sees them last, after torch adds them."""

    class KernelBuilderExtension(build_extension.with_options(use_ninja=True)):  # type: ignore[misc]
        # The link command setuptools ran: a dev build's next run links with it directly
        link_command: list[str] | None = None

        def build_extension(self, ext: Any) -> None:
            ext.extra_compile_args = without_dropped(ext.extra_compile_args)
            spawn = self.compiler.spawn

            def recording(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
                if "-shared" in cmd:
                    type(self).link_command = [str(c) for c in cmd]
                return spawn(cmd, *args, **kwargs)

            self.compiler.spawn = recording
            super().build_extension(ext)

    return KernelBuilderExtension


def _ninja_quote(flag: str) -> str:
    return shlex.quote(flag).replace("$", "$$")


def _build_line_source(line: str) -> tuple[str, str] | None:
    """``build OBJ: RULE SRC`` -> (rule, source path), for the compile rules only."""
    if not line.startswith("build ") or ": " not in line:
        return None
    rule, _, source = line.split(": ", 1)[1].partition(" ")
    if rule not in ("compile", "cuda_compile"):
        return None
    return rule, os.path.abspath(source.replace("$ ", " "))


def source_bindings(
    text: str,
    entries: list[dict[str, Any]],
    cuda_post_cflags: list[str],
    gencode: list[str],
    torch_free: Iterable[str] = (),
) -> str:
    """build.ninja with, under each build line, ccache's depend mode off for a ``torch_free``
    source's compiler, then each entry's own flags (and a .cu's -gencode)."""
    wanted = {os.path.abspath(e["source"]): e for e in entries}
    free = {os.path.abspath(s) for s in torch_free}
    shared = [f for f in cuda_post_cflags if f.strip() not in {shlex.quote(g) for g in gencode}]
    out: list[str] = []
    for line in text.splitlines():
        out.append(line)
        found = _build_line_source(line)
        if found is not None and found[1] in free:
            tool = "cxx" if found[0] == "compile" else "nvcc"
            out.append(f"  {tool} = {_PREPROCESSED} ${tool}")
        entry = wanted.pop(found[1], None) if found else None
        if found is None or entry is None:
            continue
        own = " ".join(_ninja_quote(f) for f in [*entry["gencode"], *entry["flags"]])
        if found[0] == "compile":
            out.append(f"  post_cflags = $post_cflags {own}")
        elif entry["gencode"]:
            out.append(f"  cuda_post_cflags = {' '.join(f.strip() for f in shared)} {own}")
        else:
            out.append(f"  cuda_post_cflags = $cuda_post_cflags {own}")
    if wanted:
        raise RuntimeError(f"kernelwheel: no build statement in build.ninja for {sorted(wanted)}")
    return "\n".join(out) + "\n"


def in_source_order(text: str, sources: list[str]) -> str:
    """build.ninja's compile statements in ``sources``' order (others after, as they were):
    ninja starts them in file order, and torch's object-path order put the binding, the
    longest host compile, last, finishing alone on one CPU."""
    rank = {os.path.abspath(src): i for i, src in enumerate(sources)}
    blocks: list[tuple[int, list[str]]] = []
    head: list[str] = []
    tail: list[str] = []
    for line in text.splitlines():
        found = _build_line_source(line)
        if found is not None:
            blocks.append((rank.get(found[1], len(rank)), [line]))
        elif blocks and line.startswith((" ", "\t")):
            blocks[-1][1].append(line)
        else:
            (tail if blocks else head).append(line)
    ordered = [ln for _, block in sorted(blocks, key=lambda b: b[0]) for ln in block]
    return "\n".join([*head, *ordered, *tail]) + "\n"


def one_limited_api(text: str) -> str:
    """build.ninja with one Py_LIMITED_API per compiler: torch appends its own after the plan's
    and two warn "redefined" in every unit; the later, torch's, counted (and tags the wheel)."""
    lines = text.splitlines()
    for first, last in (("cflags", "post_cflags"), ("cuda_cflags", "cuda_post_cflags")):
        if any(line.startswith(f"{last} = ") and "-DPy_LIMITED_API=" in line for line in lines):
            lines = [
                _LIMITED_API.sub("", line) if line.startswith(f"{first} = ") else line
                for line in lines
            ]
    return "\n".join(lines) + "\n"


def view_paths(text: str, views: list[list[str]]) -> str:
    """build.ninja's flags and sources naming each ``[folder, link]`` of ``views`` through the
    link (objects keep their paths: setuptools links by them), so ccache's keys are the same
    on every machine."""
    if not views:
        return text

    def swap(token: str) -> str:
        if token.startswith(_REAL_PATH_FLAGS):
            return token
        for folder, link in views:
            for head in ("", "-I", "-isystem", "-include", "-iquote"):
                if token == head + folder or token.startswith(head + folder + "/"):
                    return head + link + token[len(head + folder) :]
        return token

    def swap_word(raw: str) -> str:
        """A flag line's shell word, swapped, requoted only if changed (torch quotes a path
        with a space: '-I/my dir/csrc'; a ninja ``$variable`` stays)."""
        try:
            words = shlex.split(raw)
        except ValueError:
            return raw
        if len(words) != 1:
            return raw
        swapped = swap(words[0])
        return raw if swapped == words[0] else shlex.quote(swapped)

    def swap_path(raw: str) -> str:
        """A path of a build line: ninja escapes a space, a colon and a dollar with ``$``."""
        plain = re.sub(r"\$(.)", r"\1", raw)
        swapped = swap(plain)
        if swapped == plain:
            return raw
        return swapped.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")

    out: list[str] = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if line.startswith("build ") and ": " in line:
            target, _, rest = line.partition(": ")
            paths = _NINJA_PATHS.findall(rest)
            line = f"{target}: {' '.join(swap_path(t) for t in paths)}"
        elif stripped.startswith(_COMMAND_LINES) and " = " in stripped:
            indent = line[: len(line) - len(stripped)]
            name, _, value = stripped.partition(" = ")
            words = _SHELL_WORDS.findall(value)
            line = f"{indent}{name} = {' '.join(swap_word(w) for w in words)}"
        out.append(line)
    return "\n".join(out) + "\n"


def measured(text: str, wrapper: list[str]) -> str:
    """build.ninja's ``cxx`` and ``nvcc`` run through ``wrapper`` (compile/_peak_rss)."""
    prefix = " ".join(_ninja_quote(arg) for arg in wrapper)
    return re.sub(r"^(?:cxx|nvcc) = ", lambda m: f"{m[0]}{prefix} ", text, flags=re.MULTILINE)


def install_ninja_edits(
    cpp_extension: Any,
    entries: list[dict[str, Any]],
    gencode: list[str],
    order: list[str] | None = None,
    torch_free: list[str] | None = None,
    views: list[list[str]] | None = None,
    wrapper: list[str] | None = None,
) -> None:
    """The edits above (flags, cache mode, ``order``, one limited API, ``wrapper``) made to the
    build.ninja torch writes, through its private ``_write_ninja_file`` (torch 1.x to 2.14).
    Without it order and cache mode stay the defaults (speed, not needs); own flags fail."""
    original: Callable[..., Any] | None = getattr(cpp_extension, "_write_ninja_file", None)
    if original is None and not entries and not views and not wrapper:
        return
    if original is None:
        raise RuntimeError(
            "kernelwheel: this torch's cpp_extension has no _write_ninja_file, so kernels "
            "cannot have their own flags or capabilities here; give every kernel the same ones"
        )
    signature = inspect.signature(original)

    def write(*args: Any, **kwargs: Any) -> Any:
        written = original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs).arguments
        path = Path(bound["path"])
        nvcc = list(bound.get("cuda_post_cflags") or [])
        text = source_bindings(path.read_text(), entries, nvcc, gencode, torch_free or [])
        text = in_source_order(text, order) if order else text
        text = view_paths(one_limited_api(text), views or [])
        path.write_text(measured(text, wrapper) if wrapper else text)
        return written

    cpp_extension._write_ninja_file = write


def prefix_mapped(flags: list[str], extra: list[tuple[str, str]], cwd: str, wrap: str) -> list[str]:
    """``flags`` with their prefix maps and the ``extra`` ones, each also relative to ``cwd``
    (as ccache's base_dir passes paths), last, shortest first: gcc tries the last map first,
    so a folder's own map wins over its parent's."""
    kept: list[str] = []
    maps: dict[str, str] = {}
    for flag in flags:
        if flag.startswith(wrap + _MAP):
            old, _, new = flag[len(wrap + _MAP) :].rpartition("=")
            maps[old] = new
        else:
            kept.append(flag)
    maps.update(extra)
    for old, new in list(maps.items()):
        if os.path.isabs(old):
            maps.setdefault(os.path.relpath(os.path.normpath(old), cwd), new)
    ordered = sorted(maps.items(), key=lambda item: len(item[0]))
    return [*kept, *(f"{wrap}{_MAP}{old}={new}" for old, new in ordered)]


def _leftover_dropped_flags(build_temp: Path) -> list[str]:
    """:data:`DROPPED_FLAGS` still in a build.ninja (a torch that adds them elsewhere)."""
    found: set[str] = set()
    for ninja in build_temp.rglob("build.ninja"):
        text = ninja.read_text()
        found.update(flag for flag in DROPPED_FLAGS if flag in text)
        # the extension-wide lines only: a unit's own binding may define the build id
        shared = [line for line in text.splitlines() if line.startswith(_FLAG_LINES)]
        found.update(p for p in DROPPED_PREFIXES if any(p in line for line in shared))
    return sorted(found)


def _effective_limited_api(build_temp: Path, requested: str) -> str:
    """The Py_LIMITED_API the compiler really saw: torch >= 2.13 appends its own after ours, so
    the wheel's abi3 tag follows the generated build file, not what we asked for."""
    values: list[str] = []
    for ninja in build_temp.rglob("build.ninja"):
        for line in ninja.read_text().splitlines():
            if line.lstrip().startswith(_FLAG_LINES):
                if found := re.findall(r"-DPy_LIMITED_API=(0x[0-9A-Fa-f]+)", line):
                    values.append(found[-1])
    if values:
        return max(values, key=lambda v: int(v, 16))
    import torch.utils.cpp_extension as ce

    forced = getattr(ce, "min_supported_cpython", None)
    if isinstance(forced, str) and int(forced, 16) > int(requested, 16):
        return forced
    return requested


def _inputs(build_temp: Path) -> list[str] | None:
    """Every file the objects were compiled from, by ninja's deps log; None unless complete."""
    import subprocess

    try:
        proc = subprocess.run(
            ["ninja", "-C", str(build_temp), "-t", "deps"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    targets: set[str] = set()
    inputs: set[str] = set()
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            target, _, state = line.partition(": #deps ")
            if not state.rstrip().endswith("(VALID)"):
                return None
            targets.add(os.path.normpath(build_temp / target))
        else:
            inputs.add(os.path.normpath(build_temp / line.strip()))
    objects = {os.path.normpath(p) for p in build_temp.rglob("*.o")}
    if not objects or not objects <= targets:
        return None
    return sorted(inputs)


def _peak_wrapper(spec: dict[str, Any]) -> list[str]:
    """The compilers' wrapper appending each unit's peak memory to a fresh ``peak_log``."""
    if not spec.get("peak_log"):
        return []
    Path(spec["peak_log"]).unlink(missing_ok=True)
    peak_rss = str(Path(__file__).with_name("_peak_rss.py"))
    return [sys.executable, "-E", "-S", peak_rss, spec["peak_log"]]


def run_commands(spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run a ``commands`` spec's units, ``jobs`` at a time in ``schedule`` order, then its link
    (None once one fails). Each unit is logged whole when it ends, as ninja logs without a
    terminal (compile.diagnostics reads it so); seconds and peaks recorded as torch builds'."""
    import subprocess
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    rank = {source: i for i, source in enumerate(spec.get("schedule") or ())}
    units = sorted(spec["units"], key=lambda u: rank.get(u["source"], len(rank)))
    cwd = spec["build_temp"]
    lock = threading.Lock()
    failed = threading.Event()
    counter = iter(range(1, len(units) + 1))
    wrapper = _peak_wrapper(spec)
    timings = Path(cwd, ".ninja_log")
    timings.write_text("# ninja log v5\n")
    began = time.monotonic()

    def run(argv: list[str], output: str, step: str, *, measured: bool = False) -> int:
        start = time.monotonic()
        proc = subprocess.run(
            [*wrapper, *argv] if measured else argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        # start and end in ms since the first unit, as ninja writes them
        times = [int((t - began) * 1000) for t in (start, time.monotonic())]
        command = shlex.join(argv)
        with lock:
            if measured and proc.returncode == 0:
                with open(timings, "a") as log:
                    log.write(f"{times[0]}\t{times[1]}\t0\t{output}\t0\n")
            print(f"{step} {command}", flush=True)
            if proc.returncode != 0:
                print(f"FAILED: [code={proc.returncode}] {output}\n{command}", flush=True)
            sys.stdout.buffer.write(proc.stdout)
            sys.stdout.flush()
        return proc.returncode

    def compile_one(unit: dict[str, Any]) -> int:
        if failed.is_set():
            return 0
        Path(unit["object"]).parent.mkdir(parents=True, exist_ok=True)
        # an older depfile would name another compile's inputs (this one may write none)
        Path(f"{unit['object']}.d").unlink(missing_ok=True)
        with lock:
            step = f"[{next(counter)}/{len(units)}]"
        code = run(unit["argv"], unit["object"], step, measured=True)
        if code != 0:
            failed.set()
        return code

    with ThreadPoolExecutor(max_workers=max(1, int(spec["jobs"]))) as pool:
        codes = list(pool.map(compile_one, units))
    if any(codes):
        return None
    Path(spec["shared_object"]).parent.mkdir(parents=True, exist_ok=True)
    if run(spec["link"], spec["shared_object"], "$") != 0:
        return None
    return {"shared_object": spec["shared_object"], "inputs": _depfile_inputs(units, cwd)}


def _depfile_inputs(units: list[dict[str, Any]], cwd: str) -> list[str] | None:
    """Every file the units were compiled from, by their depfiles; None unless all wrote one."""
    inputs: set[str] = set()
    for unit in units:
        try:
            text = Path(f"{unit['object']}.d").read_text()
        except OSError:
            return None
        if (paths := depfile_paths(text, cwd)) is None:
            return None
        inputs.update(paths)
    return sorted(inputs)


def depfile_paths(text: str, cwd: str) -> list[str] | None:
    """The inputs a depfile (``-MMD``'s ``OBJECT: INPUT...``, lines continued by ``\\``,
    spaces in names escaped) names, normalized, relative ones from ``cwd``; None without the
    ``: ``."""
    _, colon, deps = text.replace("\\\n", " ").partition(": ")
    if not colon:
        return None
    items = (item for item in re.split(r"(?<!\\)\s+", deps.strip()) if item)
    return [os.path.normpath(os.path.join(cwd, item.replace("\\ ", " "))) for item in items]


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    result = run_commands(spec) if spec.get("kind") == "commands" else build_with_torch(spec)
    if result is None:
        return 1
    Path(sys.argv[2]).write_text(json.dumps(result))
    return 0


def build_with_torch(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The extension built by torch's cpp_extension through setuptools; None if it made no one
    shared object."""
    os.environ["MAX_JOBS"] = str(spec["jobs"])
    if spec.get("cuda_home"):
        os.environ["CUDA_HOME"] = spec["cuda_home"]

    import setuptools
    import torch
    import torch.utils.cpp_extension as cpp_extension
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    build_temp = Path(spec["build_temp"])
    build_lib = Path(spec["build_lib"])
    # The compilers run in build_temp: ccache names folders under the cache by the path
    # relative to it, and takes $PWD as that folder when it is one (not its realpath).
    os.environ["PWD"] = str(build_temp)
    import sysconfig

    own = [
        (os.path.dirname(torch.__file__), "/kernelwheel/torch"),
        (sysconfig.get_paths()["include"], "/kernelwheel/python"),
    ]
    extra = {"cxx": prefix_mapped(spec["cxx_flags"], own, str(build_temp), "")}
    factory = CppExtension
    if spec["cuda"]:
        extra["nvcc"] = prefix_mapped(spec["nvcc_flags"], own, str(build_temp), "-Xcompiler=")
        factory = CUDAExtension
    ext = factory(
        name=spec["name"],
        sources=spec["sources"],
        include_dirs=spec["include_dirs"],
        # Optional (cross builds): searched before torch's own library dir.
        library_dirs=spec.get("library_dirs", []),
        define_macros=[tuple(m) for m in spec["define_macros"]],
        extra_compile_args=extra,
        extra_link_args=spec.get("link_flags", []),
        py_limited_api=True,
    )
    gencode = [f for f in spec["nvcc_flags"] if f.startswith("-gencode=")]
    install_ninja_edits(
        cpp_extension,
        spec.get("source_flags", []),
        gencode,
        spec.get("schedule") or spec["sources"],
        spec.get("torch_free", []),
        spec.get("path_views", []),
        _peak_wrapper(spec),
    )
    builder = build_ext_class(BuildExtension)
    setuptools.setup(
        name=spec["name"],
        ext_modules=[ext],
        cmdclass={"build_ext": builder},
        script_args=[
            "build_ext",
            "--build-temp",
            str(build_temp),
            "--build-lib",
            str(build_lib),
            *(["--force"] if spec.get("incremental") else []),
        ],
    )
    for flag in _leftover_dropped_flags(build_temp):
        print(f"warning: torch's build still passes {flag}", file=sys.stderr)
    built = sorted(build_lib.glob(f"{spec['name']}*.so"))
    if len(built) != 1:
        print(f"expected one shared object in {build_lib}, found {built}", file=sys.stderr)
        return None
    return {
        "shared_object": str(built[0]),
        "py_limited_api": _effective_limited_api(build_temp, spec["requested_limited_api"]),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "inputs": _inputs(build_temp),
        # what a dev build's next run needs to compile and link without this program
        "ninja": shutil.which("ninja"),
        "link": builder.link_command,
    }


if __name__ == "__main__":
    code = main()
    # Exit without the teardown: with torch loaded it takes 0.3-0.5 s of every build.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
