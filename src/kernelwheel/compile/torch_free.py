"""Which sources reach no torch header: ccache keys those on their preprocessed text, the same
for every torch of one toolkit, so the torch variants share their objects (docs/build-corpus.md);
the rest keep the cheaper depend mode (preprocessing torch's headers costs more than it saves)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)
# Headers of torch (and of what only torch builds use), by how an include names them; the
# generated registration.h includes torch's library header.
_TORCH = ("torch/", "ATen/", "c10/", "caffe2/", "pybind11/", "Python.h", "registration.h")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
# What one scan has read: a file's text and includes (what they resolve to), so the units of a
# project that include the same headers read and resolve them once.
_Read = dict[Path, tuple[str, list[str], list[Path]]]


def torch_free_sources(
    sources: Sequence[str], include_dirs: Sequence[str], root: Path
) -> tuple[str, ...]:
    """The ``sources`` whose includes, followed through the files under ``root``, reach no torch.
    It only picks the cache mode: both are exact, so a wrong guess costs time, never a wrong
    object. A header outside the project (CUDA, CUTLASS) is torch-free; one in ``#if`` counts."""
    walk = _walker(include_dirs, root)
    return tuple(
        s for s in sources if not any(n.startswith(_TORCH) for _, names in walk(s) for n in names)
    )


def sources_naming(
    word: str, sources: Sequence[str], include_dirs: Sequence[str], root: Path
) -> tuple[str, ...]:
    """The members of ``sources`` whose text, or that of a project file they include (followed
    as for :func:`torch_free_sources`), names the preprocessor token ``word`` outside comments.
    The build id reaches only these (``TORCH_EXTENSION_NAME``): a miss here is a compile error
    naming the macro, never a wrong object, and a token in an ``#if`` branch still counts."""
    token = re.compile(rf"\b{re.escape(word)}\b")
    walk = _walker(include_dirs, root)
    return tuple(s for s in sources if any(token.search(_COMMENT.sub(" ", t)) for t, _ in walk(s)))


def _walker(
    include_dirs: Sequence[str], root: Path
) -> Callable[[str], Iterator[tuple[str, list[str]]]]:
    """:func:`_walk` from a source, the files read kept for the next source of one scan."""
    dirs = [Path(d) for d in include_dirs]
    root = root.resolve()
    read: _Read = {}
    return lambda source: _walk(Path(source), dirs, root, read)


def _walk(
    source: Path, dirs: Sequence[Path], root: Path, read: _Read
) -> Iterator[tuple[str, list[str]]]:
    """``source`` and the project files (under ``root``) it includes, transitively, each once:
    its text and the names its ``#include`` lines give. Callers stop early by not iterating."""
    seen: set[Path] = set()
    todo = [source]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path not in read:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            includes = _INCLUDE.findall(text)
            beside = path.parent
            found = (_resolve(name, beside if q == '"' else None, dirs) for q, name in includes)
            own = [f for f in found if f is not None and f.is_relative_to(root)]
            read[path] = (text, [name for _, name in includes], own)
        text, names, own = read[path]
        yield text, names
        todo.extend(own)


def _resolve(name: str, beside: Path | None, dirs: Sequence[Path]) -> Path | None:
    """Where the compiler finds ``#include name``: beside the includer for quotes, then the
    include folders. Only the file found is resolved (a miss in each of torch's and CUDA's
    folders for each include of each unit made most of an unchanged dev run's 0.5 s)."""
    for folder in ([beside] if beside is not None else []) + list(dirs):
        candidate = folder / name
        if candidate.is_file():
            return candidate.resolve()
    return None
