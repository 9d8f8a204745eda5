"""Compile one extension with torch.utils.cpp_extension. Runs INSIDE the build environment.

Invoked by file path with that environment's interpreter, so it may import only the standard
library, setuptools and torch - never kernelwheel itself. Reads a JSON spec, writes a JSON result.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

_FLAG_LINES = ("cflags", "post_cflags", "cuda_cflags", "cuda_post_cflags")


def _effective_limited_api(build_temp: Path, requested: str) -> str:
    """The Py_LIMITED_API value the compiler really saw: the last definition on the command line.

    torch >= 2.13 appends its own -DPy_LIMITED_API after ours, so the wheel's abi3 tag must follow
    what is in the generated build file, not what we asked for.
    """
    values: list[str] = []
    for ninja in build_temp.rglob("build.ninja"):
        for line in ninja.read_text().splitlines():
            if line.lstrip().startswith(_FLAG_LINES):
                found = re.findall(r"-DPy_LIMITED_API=(0x[0-9A-Fa-f]+)", line)
                if found:
                    values.append(found[-1])
    if values:
        return max(values, key=lambda v: int(v, 16))
    import torch.utils.cpp_extension as ce

    forced = getattr(ce, "min_supported_cpython", None)
    if isinstance(forced, str) and int(forced, 16) > int(requested, 16):
        return forced
    return requested


def _inputs(build_temp: Path) -> list[str] | None:
    """Every file the objects were compiled from (sources and the headers they include), from
    ninja's deps log; None unless it covers each object with an up-to-date record."""
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


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    result_path = Path(sys.argv[2])
    os.environ["MAX_JOBS"] = str(spec["jobs"])
    if spec.get("cuda_home"):
        os.environ["CUDA_HOME"] = spec["cuda_home"]

    import setuptools
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

    build_temp = Path(spec["build_temp"])
    build_lib = Path(spec["build_lib"])
    extra = {"cxx": spec["cxx_flags"]}
    factory = CppExtension
    if spec["cuda"]:
        extra["nvcc"] = spec["nvcc_flags"]
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
    setuptools.setup(
        name=spec["name"],
        ext_modules=[ext],
        cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
        script_args=[
            "build_ext",
            "--build-temp",
            str(build_temp),
            "--build-lib",
            str(build_lib),
        ],
    )
    built = sorted(build_lib.glob(f"{spec['name']}*.so"))
    if len(built) != 1:
        print(f"expected one shared object in {build_lib}, found {built}", file=sys.stderr)
        return 1
    result = {
        "shared_object": str(built[0]),
        "py_limited_api": _effective_limited_api(build_temp, spec["requested_limited_api"]),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "inputs": _inputs(build_temp),
    }
    result_path.write_text(json.dumps(result))
    return 0


def _exit_now(code: int) -> None:
    """Exit without the interpreter's teardown: with torch loaded it takes 0.3-0.5 s (module and
    atexit cleanup), on the critical path of every build. The result file is already closed;
    flush the streams, then leave."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
