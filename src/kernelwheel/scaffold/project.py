"""Write a minimal edition-5 kernel project (``kernelwheel init``) from the templates beside this
module, and ``data/card.md`` as its CARD.md: staged beside the target, read back by the build.toml
reader (every rule applies), moved into place in one rename (a refused name leaves nothing)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from .._util import output_dir, publish, staging_dir
from ..errors import ProjectError, UsageError
from ..model.card import CARD_TEMPLATE, default_template
from ..model.project import kernel_name_problem, load_project
from ..model.sections import BACKENDS

# The backends kernelwheel compiles (docs/backends.md), in build.toml's order: every kind's
# default.
INIT_BACKENDS = ("cpu", "cuda")
_COMPILED = {
    "cpu": ("kernel_cpu.cpp.tmpl", "csrc/{pkg}_cpu.cpp"),
    "cuda": ("kernel_cuda.cu.tmpl", "csrc/{pkg}_cuda.cu"),
}


@dataclass(frozen=True)
class _Kind:
    """One kind of project: its templates' prefix, the backends ``--backends`` may name, each
    backend's kernel source (template, path; ``{pkg}`` is the package name) and the files every
    project of the kind gets."""

    prefix: str
    backends: tuple[str, ...]
    kernels: Mapping[str, tuple[str, str]]
    files: tuple[tuple[str, str], ...]


KINDS: dict[str, _Kind] = {
    # a torch extension: one wheel per torch, or per stable ABI
    "torch": _Kind(
        "",
        INIT_BACKENDS,
        _COMPILED,
        (
            ("header.h.tmpl", "csrc/{pkg}.h"),
            ("torch_binding.h.tmpl", "torch-ext/torch_binding.h"),
            ("torch_binding.cpp.tmpl", "torch-ext/torch_binding.cpp"),
            ("__init__.py.tmpl", "torch-ext/{pkg}/__init__.py"),
            ("test.py.tmpl", "tests/test_{pkg}.py"),
        ),
    ),
    # pure Python ([torch-noarch]): nothing compiled, one wheel serving every backend listed
    "noarch": _Kind(
        "noarch_",
        BACKENDS,
        {},
        (("init.py.tmpl", "torch-ext/{pkg}/__init__.py"), ("test.py.tmpl", "tests/test_{pkg}.py")),
    ),
    # compiled against apache-tvm-ffi, no torch: the backends its recipe has a flavour for
    "tvm-ffi": _Kind(
        "tvm_ffi_",
        INIT_BACKENDS,
        _COMPILED,
        (
            ("header.h.tmpl", "csrc/{pkg}.h"),
            ("binding.cpp.tmpl", "tvm-ffi-ext/tvm_ffi_binding.cpp"),
            ("init.py.tmpl", "tvm-ffi-ext/{pkg}/__init__.py"),
            ("test.py.tmpl", "tests/test_{pkg}.py"),
        ),
    ),
}


@dataclass(frozen=True)
class InitRequest:
    """``kernelwheel init NAME``: the project folder ``parent / name``, a project of ``kind``
    (a key of ``KINDS``) for ``backends``."""

    name: str
    parent: Path
    backends: tuple[str, ...] = INIT_BACKENDS
    kind: str = "torch"


@dataclass(frozen=True)
class InitResult:
    root: Path
    package: str
    files: tuple[Path, ...]  # relative to root, in the order written


def parse_backends(text: str, kind: str = "torch") -> tuple[str, ...]:
    """``"cuda,cpu"`` -> ``("cpu", "cuda")``: backends of ``kind``, once each, in build.toml's
    order."""
    allowed = KINDS[kind].backends
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        listed = ", ".join(map(repr, unknown))
        what = f"{listed} are not backends" if len(unknown) > 1 else f"{listed} is not a backend"
        raise UsageError(
            f"--backends {text!r}: {what if unknown else 'names no backend'} kernelwheel init "
            f"writes for --kind {kind}",
            hint=f"give one or more of {','.join(allowed)}, comma-separated",
        )
    if len(set(names)) != len(names):
        raise UsageError(f"--backends {text!r}: a backend is named twice", hint="name each once")
    return tuple(b for b in allowed if b in names)


def init_project(req: InitRequest) -> InitResult:
    """Write the project; refuse an existing path or a name build.toml's rule refuses."""
    if not req.name or Path(req.name).name != req.name or req.name in (".", ".."):
        raise UsageError(
            f"NAME {req.name!r}: a kernel name, not a path",
            hint="give the name alone (e.g. my-kernel); --directory says where to write it",
        )
    # The name rule first: a name the templates cannot hold would otherwise be reported as
    # the staged build.toml's syntax error.
    if (problem := kernel_name_problem(req.name)) is not None:
        shown = req.name if len(req.name) <= 60 else req.name[:40] + "…"
        # build.toml's fix (use name = "x" and rename the package folder) said as init's
        hint = re.sub(r'use name = "(\S+)" and .*?;', r"kernelwheel init \1;", problem[1])
        raise UsageError(f"NAME {shown!r}: {problem[0]}", hint=hint)
    output_dir(req.parent, "--directory")
    root = req.parent / req.name
    if root.exists() or root.is_symlink():
        raise UsageError(
            f"{root} already exists; kernelwheel init never writes into an existing folder",
            hint="choose another NAME, or run it in another folder (--directory)",
        )
    if req.kind not in KINDS:
        raise UsageError(f"kind {req.kind!r}: give one of {', '.join(KINDS)}")
    allowed = KINDS[req.kind].backends
    if not req.backends or any(b not in allowed for b in req.backends):
        raise UsageError(f"backends {req.backends}: give one or more of {allowed}")
    with staging_dir(req.parent, "init") as stage:
        project = stage / "project"
        files = _write(project, render_files(req.name, req.backends, req.kind))
        try:
            package = load_project(project).package
        except ProjectError as exc:
            raise _as_usage_error(exc, req.name) from None
        publish(project, root)
    return InitResult(root, package, files)


def render_files(name: str, backends: Sequence[str], kind: str = "torch") -> dict[str, str]:
    """Every file of a ``kind`` project, path (relative, '/'-separated) -> text."""
    spec = KINDS[kind]
    pkg = name.replace("-", "_")
    quoted = ", ".join(f'"{b}"' for b in backends)
    kernels = [b for b in backends if b in spec.kernels]
    values = {
        "name": name,
        "pkg": pkg,
        "PKG": pkg.upper(),
        "backends": quoted,
        # a Python tuple as formatters write it: a trailing comma only for one element
        "backends_tuple": f"({quoted}{',' * (len(backends) == 1)})",
        "backends_text": ", ".join(backends),
        "sources_text": "\n".join(
            f"- `{spec.kernels[b][1].format(pkg=pkg)}`: the {b.upper()} kernel" for b in kernels
        ),
    }
    build_toml = _render(f"{spec.prefix}build.toml.tmpl", values) + "".join(
        _render(f"{spec.prefix}kernel_{b}.toml.tmpl", values) for b in kernels
    )
    files = {"build.toml": build_toml}
    for template, path in (*(spec.kernels[b] for b in kernels), *spec.files):
        files[path.format(pkg=pkg)] = _render(spec.prefix + template, values)
    # every kind's: the project's own pytest configuration (its tests do not run under an outer
    # checkout's), and the kind's README
    files["pytest.ini"] = _render("pytest.ini.tmpl", values)
    files[".gitignore"] = _render("gitignore.tmpl", values)  # the build's outputs kept out of git
    files["README.md"] = _render(f"{spec.prefix}README.md.tmpl", values)
    # The card template kernelwheel renders for a project without one: the author edits it.
    files[CARD_TEMPLATE] = default_template()
    return files


def _write(project: Path, files: dict[str, str]) -> tuple[Path, ...]:
    for rel, text in files.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tuple(map(Path, files))


def _render(template: str, values: dict[str, str]) -> str:
    text = (resources.files(__package__) / "templates" / template).read_text("utf-8")
    return Template(text).substitute(values)


def _as_usage_error(exc: ProjectError, name: str) -> UsageError:
    """The reader's refusal of the staged build.toml, said about NAME (the stage is gone)."""
    if exc.key == "general.name":
        reason = exc.message.partition(f"{exc.key}: ")[2] or exc.message
        return UsageError(f"NAME {name!r}: {reason}", hint=exc.hint)
    return UsageError(f"NAME {name!r}: the project it gives is refused: {exc}")
