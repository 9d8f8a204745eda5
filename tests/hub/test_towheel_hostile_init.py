"""Issue 38 family 6: a Hub variant whose ``__init__.py`` is in another encoding or nested deeper
than Python's parser reads is refused alone, with a message naming the file, and the other
variants are converted (to-wheel used to abort the whole run with a traceback). An
``__init__.py`` that declares its encoding (PEP 263) converts, its bytes kept in that encoding."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from support.gitrepo import HubRepo, variant_files
from support.shared import leftovers, wheels_in
from support.variants import TORCH27_CPU as CPU
from support.variants import TORCH27_CU128 as CU128

from kernelwheel.cli import main

INIT = "img2gray/__init__.py"


def _convert(tmp_path: Path, so_cache: Path, init: bytes) -> tuple[int, Path]:
    """A repo with a good CPU variant and a CUDA one whose ``__init__.py`` is ``init``,
    converted: (exit code, output folder)."""
    repo = HubRepo(tmp_path / "img2gray")
    hostile = variant_files(CU128, so_cache=so_cache)
    hostile.files[INIT] = init
    repo.set_variants([variant_files(CPU, so_cache=so_cache), hostile])
    repo.commit("build")
    out = tmp_path / "out"
    code = main(["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)])
    return code, out


def _init_of(out: Path, variant_token: str) -> bytes:
    (wheel,) = [out / w for w in wheels_in(out) if variant_token in w]
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(INIT)


@pytest.mark.parametrize(
    ("init", "problem"),
    [
        (
            b"# Kernel f\xfcr Bilder\nfrom ._ops import ops\n",
            "img2gray/__init__.py is not utf-8 (byte 0xfc at offset 10) and declares no other",
        ),
        (
            b"# -*- coding: no-such-codec -*-\nfrom ._ops import ops\n",
            "img2gray/__init__.py: unknown encoding",
        ),
        (
            b"x = " + b"-" * 3000 + b"1\n",  # RecursionError in the parser
            "img2gray/__init__.py is nested deeper than Python's parser reads",
        ),
        (
            b"x = " + b"not " * 100_000 + b"1\n",  # MemoryError: the parser's stack
            "img2gray/__init__.py is nested deeper than Python's parser reads",
        ),
    ],
    ids=["latin-1-bytes", "unknown-codec", "recursion", "parser-stack"],
)
def test_an_init_no_interpreter_could_import_refuses_that_variant_only(
    init: bytes,
    problem: str,
    so_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _convert(tmp_path, so_cache, init)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert code == 9 and f"{CU128}: not converted" in err and problem in err, err
    assert len(wheels_in(out)) == 1 and leftovers(out) == []


@pytest.mark.parametrize(
    "init",
    [
        b"# -*- coding: latin-1 -*-\n'''Kernel f\xfcr Bilder.'''\nfrom ._ops import ops\n",
        b"\xef\xbb\xbf'''Kernel f\xc3\xbcr Bilder.'''\nfrom ._ops import ops\n",  # a UTF-8 BOM
    ],
    ids=["coding-line", "bom"],
)
def test_an_init_that_declares_its_encoding_converts_in_that_encoding(
    init: bytes, so_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _convert(tmp_path, so_cache, init)
    err = capsys.readouterr().err
    assert code == 0, err
    written = _init_of(out, "cu128")
    guard = b"from . import _kernelwheel_guard"
    assert guard in written
    # the user's bytes as they were, the guard after the docstring (PEP 263 file stays valid)
    assert written.replace(guard + b"  # noqa: F401,E402  (added by kernelwheel)\n", b"") == init
    assert written.index(guard) > written.index(b"Bilder")
