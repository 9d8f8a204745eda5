"""Load a freshly linked extension the way its package will. Runs INSIDE the build environment,
by path: the standard library, torch and tvm_ffi only, never kernelwheel.

Arguments: the kind (``torch``, ``tvm-ffi``), the shared object, its namespace, the package's
Python folder. Prints one JSON line: the ops, or first the files this Python cannot compile
(``syntax``). A failure is an exception (exit 1) or torch's abort (a signal), read from stderr.
Kind ``torch+pytest``: the check into a log (args: also the log, then pytest's), a ``MARK`` line
once loaded (or pytest missing), then pytest in this process. Kind ``syntax``: the folder only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

MARK = "kernelwheel-load-check: "
# the dispatch keys of a composite kernel, which serves every backend
COMPOSITE_KEYS = (
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)


def load_torch(path: str, namespace: str) -> dict[str, object]:
    """Import ``path`` as the module ``namespace`` after torch (as ``_ops.py`` does); its
    schemas (``ops``), impls no schema defines (``undefined``: torch takes a misspelt
    ``ops.impl`` silently), schemas in other namespaces (``elsewhere``), per backend the ops
    without a kernel (``lacking``) and those without a fake one (``no_fake``)."""
    import torch

    before = {str(s) for s in torch._C._jit_get_all_schemas()}
    spec = importlib.util.spec_from_file_location(namespace, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not an extension module this Python can load")
    module = importlib.util.module_from_spec(spec)  # dlopen: the static op registrations run
    spec.loader.exec_module(module)
    prefix = namespace + "::"
    every = [s for s in torch._C._jit_get_all_schemas() if str(s) not in before]
    schemas = [s for s in every if s.name.startswith(prefix)]
    defined = {s.name + (f".{s.overload_name}" if s.overload_name else "") for s in schemas}
    names: list[str] = getattr(torch._C, "_dispatch_get_all_op_names", list)()
    undefined = [n for n in names if n.startswith(prefix) and n not in defined]
    elsewhere = [str(s) for s in every if not s.name.startswith(prefix)]
    # per backend (and Meta, which torch.compile's fake tensors run), the ops without a kernel
    # for it; a composite kernel serves every backend
    has = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", lambda name, key: True)
    lacking = {
        key: sorted(n for n in defined if not any(has(n, k) for k in (key, *COMPOSITE_KEYS)))
        for key in ("CPU", "CUDA", "Meta")
    }
    return {
        "ops": sorted(map(str, schemas)),
        "undefined": sorted(undefined),
        "elsewhere": sorted(elsewhere),
        "lacking": {key: lacking[key] for key in ("CPU", "CUDA")},
        "no_fake": lacking["Meta"],
    }


def syntax_errors(folder: str) -> list[str]:
    """``FILE:LINE: message`` of each Python file below ``folder`` this interpreter cannot
    compile (kernelwheel's may read another grammar); emacs's lock ``.#name.py`` is none."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(n for n in filenames if n.endswith(".py") and n[:2] != ".#"):
            path = os.path.join(dirpath, name)
            if not os.path.isfile(path):
                continue
            try:
                with open(path, "rb") as fh:
                    compile(fh.read(), path, "exec", dont_inherit=True)
            except SyntaxError as exc:
                found.append(f"{path}:{exc.lineno}: {exc.msg}")
            except ValueError as exc:  # a NUL byte, before Python 3.12
                found.append(f"{path}: {exc}")
            except (RecursionError, MemoryError):  # its parser's or compiler's depth: no import
                found.append(f"{path}: nested too deeply for this Python's parser")
    return found


def load_tvm_ffi(path: str) -> list[str]:
    """Load ``path`` as ``_ops.py`` does, every symbol bound; the functions it exports (each a
    symbol ``__tvm_ffi_<name>``)."""
    import ctypes

    import tvm_ffi

    ctypes.CDLL(path, mode=os.RTLD_NOW)  # load_module binds lazily: a missing function passes
    module = tvm_ffi.load_module(path)
    with open(path, "rb") as fh:
        names = {name.decode() for name in re.findall(rb"__tvm_ffi_([A-Za-z_]\w*)\0", fh.read())}
    return sorted(name for name in names if module.implements_function(name))


def then_pytest(path: str, namespace: str, python: str, log: str, args: list[str]) -> int:
    """The load check, its output appended to ``log``, then pytest on the restored output."""
    with open(log, "a") as fh:
        if syntax := syntax_errors(python):  # pytest would fail at each test's import
            fh.write(MARK + json.dumps({"syntax": syntax}) + "\n")
            return 1
        try:
            import pytest
        except ImportError:
            fh.write(MARK + json.dumps({"missing": "pytest"}) + "\n")
            return 1
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(fd) for fd in (1, 2)]
        for fd in (1, 2):  # an abort's message too, which Python's streams never see
            os.dup2(fh.fileno(), fd)
        found = load_torch(path, namespace)  # a failure leaves its traceback in the log
        # kernels.get_kernel imports the Hub layout's package under that name: not taken here
        sys.modules.pop(namespace, None)
        print(MARK + json.dumps(found), flush=True)
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
    sys.path.insert(0, os.getcwd())  # as python -m pytest
    return int(pytest.main(args))


def main(argv: list[str]) -> int:
    if argv[0] == "torch+pytest":
        return then_pytest(argv[1], argv[2], argv[3], argv[4], argv[5:])
    if argv[0] == "syntax":  # a dev build whose shared object loaded before: its Python alone
        found: dict[str, object] = {"syntax": syntax_errors(argv[1])}
    elif syntax := syntax_errors(argv[3]):  # first: the cheaper error, and the import's own
        found = {"syntax": syntax}
    else:
        kind, path, namespace, _ = argv
        found = {"ops": load_tvm_ffi(path)} if kind == "tvm-ffi" else load_torch(path, namespace)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    # Run by path, its own folder leads sys.path: kernelwheel's builder/, whose tvm_ffi.py
    # would shadow the tvm_ffi package.
    sys.path.pop(0)
    sys.exit(main(sys.argv[1:]))
