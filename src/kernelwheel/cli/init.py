"""``kernelwheel init NAME [--kind torch|noarch|tvm-ffi] [--backends cuda,cpu]``: write a new
kernel project to start from."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..scaffold.project import INIT_BACKENDS, KINDS, InitRequest, init_project, parse_backends
from ._args import path_arg
from .ui import ConsoleUI


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "init",
        help="write a new kernel project (edition-5 build.toml, a kernel per backend, binding, "
        "Python API, a test) that builds as it is",
        description=(
            "Write the folder NAME: a minimal kernel project in kernel-builder's layout "
            "(build.toml edition 5), with one op, add_one(x) = x + 1 for float32 tensors: a "
            "kernel per backend, the shared check, the binding (registration.h's "
            "TORCH_LIBRARY_EXPAND / TORCH_LIBRARY_IMPL_EXPAND, CPU_KERNEL / CUDA_KERNEL), the "
            "Python package and a test of the installed wheel. --kind noarch writes a "
            "pure-Python kernel ([torch-noarch]: the op in plain torch, nothing compiled), "
            "--kind tvm-ffi one compiled against apache-tvm-ffi instead of torch ([tvm-ffi], "
            "its binding in tvm-ffi-ext/). Each builds, installs and passes its test as "
            "written; replace add_one with your op. An existing NAME is refused (nothing is "
            "overwritten); NAME follows build.toml's rule ^[a-z][-a-z0-9]*[a-z0-9]$."
        ),
        epilog=(
            "examples:\n"
            "  kernelwheel init my-kernel                   # cpu and cuda kernels\n"
            "  kernelwheel init my-kernel --backends cpu\n"
            "  kernelwheel init my-kernel --kind noarch     # pure Python\n"
            "  kernelwheel init my-kernel --kind tvm-ffi    # against apache-tvm-ffi\n"
            "  kernelwheel build my-kernel -o wheelhouse\n"
            "\n"
            "exit codes: 0 written; 2 bad NAME, --kind or --backends, or NAME exists"
        ),
    )
    p.add_argument("name", metavar="NAME", help="the kernel's name, and the folder to write")
    p.add_argument(
        "--kind",
        choices=tuple(KINDS),
        default="torch",
        help="torch: a compiled torch extension (default); noarch: pure Python; tvm-ffi: "
        "compiled against apache-tvm-ffi",
    )
    p.add_argument(
        "--backends",
        default=",".join(INIT_BACKENDS),
        metavar="LIST",
        help=f"comma-separated backends (default: {','.join(INIT_BACKENDS)}): torch and tvm-ffi "
        f"get a kernel for each of {','.join(INIT_BACKENDS)}; noarch lists them in build.toml "
        f"(any of {','.join(KINDS['noarch'].backends)}: a wheel extra and Hub folder each)",
    )
    p.add_argument(
        "--directory",
        type=path_arg,
        default=Path("."),
        metavar="DIR",
        help="the folder to create NAME in (default: .)",
    )


# What `kernelwheel test` does for each kind, and where its tests run.
_TEST_DOES = {
    "torch": "compile what changed, load it, run tests/",
    "noarch": "run tests/ against your files, in the active venv: it must hold torch",
    "tvm-ffi": "compile what changed, load it, run tests/ in the active venv: it must hold "
    "apache-tvm-ffi and torch",
}


def run(args: argparse.Namespace, ui: ConsoleUI) -> int:
    backends = parse_backends(args.backends, args.kind)
    request = InitRequest(args.name, args.directory, backends, args.kind)
    result = init_project(request)
    ui.print(
        f"wrote {result.root} ({args.kind} project, package {result.package}, backends "
        f"{', '.join(request.backends)}):"
    )
    for path in result.files:
        ui.print(f"  {path.as_posix()}")
    # the author's loop first; the release build once the tests pass
    root = shlex.quote(str(result.root))
    ui.print(f"next: cd {root} && kernelwheel test  ({_TEST_DOES[args.kind]})")
    ui.print("then: kernelwheel build -o wheelhouse  (the wheels, from the same folder)")
    return 0
