"""Write a minimal edition-5 kernel project (``kernelwheel init``) from the templates beside this
module and the kernel card template ``data/card.md`` as its CARD.md.

The project is staged next to the target, read back with the build.toml reader (so every rule
applies) and moved into place in one rename: an existing folder is never touched, and a refused
name leaves nothing behind."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from .._util import output_dir, publish, staging_dir
from ..errors import ProjectError, UsageError
from ..model.card import CARD_TEMPLATE, default_template
from ..model.project import kernel_name_problem, load_project

# The backends kernelwheel compiles (docs/backends.md), in build.toml's order.
INIT_BACKENDS = ("cpu", "cuda")

# backend -> (template, path in the project) of its kernel source; {pkg} is the package name.
_KERNEL_SOURCES = {
    "cpu": ("kernel_cpu.cpp.tmpl", "csrc/{pkg}_cpu.cpp"),
    "cuda": ("kernel_cuda.cu.tmpl", "csrc/{pkg}_cuda.cu"),
}
# Written for every project: (template, path in the project).
_COMMON_FILES = (
    ("header.h.tmpl", "csrc/{pkg}.h"),
    ("torch_binding.h.tmpl", "torch-ext/torch_binding.h"),
    ("torch_binding.cpp.tmpl", "torch-ext/torch_binding.cpp"),
    ("__init__.py.tmpl", "torch-ext/{pkg}/__init__.py"),
    ("test.py.tmpl", "tests/test_{pkg}.py"),
    # the project's own pytest configuration: its tests do not run under an outer checkout's
    ("pytest.ini.tmpl", "pytest.ini"),
    ("README.md.tmpl", "README.md"),
)


@dataclass(frozen=True)
class InitRequest:
    """``kernelwheel init NAME``: the project folder ``parent / name`` for ``backends``."""

    name: str
    parent: Path
    backends: tuple[str, ...] = INIT_BACKENDS


@dataclass(frozen=True)
class InitResult:
    root: Path
    package: str
    files: tuple[Path, ...]  # relative to root, in the order written


def parse_backends(text: str) -> tuple[str, ...]:
    """``"cuda,cpu"`` -> ``("cpu", "cuda")``: known, once each, in build.toml's order."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in INIT_BACKENDS]
    if unknown or not names:
        listed = ", ".join(map(repr, unknown))
        what = f"{listed} are not backends" if len(unknown) > 1 else f"{listed} is not a backend"
        raise UsageError(
            f"--backends {text!r}: {what if unknown else 'names no backend'} kernelwheel init "
            "writes",
            hint=f"give one or more of {','.join(INIT_BACKENDS)}, comma-separated",
        )
    if len(set(names)) != len(names):
        raise UsageError(f"--backends {text!r}: a backend is named twice", hint="name each once")
    return tuple(b for b in INIT_BACKENDS if b in names)


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
    if not req.backends or any(b not in INIT_BACKENDS for b in req.backends):
        raise UsageError(f"backends {req.backends}: give one or more of {INIT_BACKENDS}")
    with staging_dir(req.parent, "init") as stage:
        project = stage / "project"
        files = _write(project, render_files(req.name, req.backends))
        try:
            package = load_project(project).package
        except ProjectError as exc:
            raise _as_usage_error(exc, req.name) from None
        publish(project, root)
    return InitResult(root, package, files)


def render_files(name: str, backends: Sequence[str]) -> dict[str, str]:
    """Every file of the project, path (relative, '/'-separated) -> text."""
    pkg = name.replace("-", "_")
    values = {
        "name": name,
        "pkg": pkg,
        "backends": ", ".join(f'"{b}"' for b in backends),
        "backends_text": ", ".join(backends),
        "sources_text": "\n".join(
            f"- `{_KERNEL_SOURCES[b][1].format(pkg=pkg)}`: the {b.upper()} kernel" for b in backends
        ),
    }
    build_toml = _render("build.toml.tmpl", values) + "".join(
        _render(f"kernel_{b}.toml.tmpl", values) for b in backends
    )
    files = {"build.toml": build_toml}
    for template, path in (*(_KERNEL_SOURCES[b] for b in backends), *_COMMON_FILES):
        files[path.format(pkg=pkg)] = _render(template, values)
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
