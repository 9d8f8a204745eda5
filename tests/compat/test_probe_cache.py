"""compat.probe_cache: an interpreter's report is reused until a file it came from changes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kernelwheel.compat import probe_cache

# A torch whose every import is counted (one line per import in IMPORTS), with real modules for
# version and _C, the files the cache watches.
_INIT = """import os
from . import _C, version
__version__ = version.__version__
with open(os.environ["IMPORTS"], "a") as fh:
    fh.write("import\\n")
"""


def _site(root: Path, version: str) -> Path:
    pkg = root / "site" / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(_INIT)
    (pkg / "version.py").write_text(f"__version__ = {version!r}\ncuda = '13.0'\nhip = None\n")
    (pkg / "_C.py").write_text("_GLIBCXX_USE_CXX11_ABI = True\n")
    return root / "site"


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder with a counted fake torch 2.14.1+cu130 on PYTHONPATH; the count's file."""
    site = _site(tmp_path, "2.14.1+cu130")
    monkeypatch.setenv("PYTHONPATH", str(site))
    imports = tmp_path / "imports"
    monkeypatch.setenv("IMPORTS", str(imports))
    return imports


def _imports(counted: Path) -> int:
    return len(counted.read_text().splitlines()) if counted.exists() else 0


def test_an_unchanged_interpreter_is_probed_once(counted: Path, tmp_path: Path) -> None:
    python = Path(sys.executable)
    first, kept_first = probe_cache.run_cached(python, tmp_path / "cache")
    second, kept_second = probe_cache.run_cached(python, tmp_path / "cache")
    assert _imports(counted) == 1
    assert (kept_first, kept_second) == (False, True)
    assert first == second
    assert first.torch is not None and first.torch.version == "2.14.1+cu130"
    assert first.torch_cuda == "13.0"


def test_a_new_torch_is_probed_again(counted: Path, tmp_path: Path) -> None:
    python = Path(sys.executable)
    probe_cache.run_cached(python, tmp_path / "cache")
    version = tmp_path / "site" / "torch" / "version.py"
    version.unlink()  # written anew, as an upgrade writes it: a new inode
    version.write_text("__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n")
    found, kept = probe_cache.run_cached(python, tmp_path / "cache")
    assert _imports(counted) == 2 and not kept
    assert found.torch is not None and found.torch.version == "2.13.0+cpu"
    assert found.torch_cuda is None


def test_a_package_installed_on_the_path_means_a_new_probe(counted: Path, tmp_path: Path) -> None:
    """A package that appears in a sys.path folder may shadow torch: the folder's stamp changes."""
    python = Path(sys.executable)
    probe_cache.run_cached(python, tmp_path / "cache")
    (tmp_path / "site" / "other-1.0.dist-info").mkdir()
    probe_cache.run_cached(python, tmp_path / "cache")
    assert _imports(counted) == 2


def test_a_change_kernelwheel_makes_keeps_a_valid_record_valid(
    counted: Path, tmp_path: Path
) -> None:
    """A dev build's .pth written into a folder on sys.path (kept_across): no new probe; a
    change made outside it still means one."""
    python, cache = Path(sys.executable), tmp_path / "cache"
    probe_cache.run_cached(python, cache)
    with probe_cache.kept_across(python, cache):
        (tmp_path / "site" / "kernelwheel-dev-k.pth").write_text(str(tmp_path / "dev") + "\n")
    assert probe_cache.run_cached(python, cache)[1] and _imports(counted) == 1
    (tmp_path / "site" / "other-1.0.dist-info").mkdir()
    assert not probe_cache.run_cached(python, cache)[1] and _imports(counted) == 2
    # a record that was not valid before is not made valid by the change
    (tmp_path / "site" / "another-1.0.dist-info").mkdir()
    with probe_cache.kept_across(python, cache):
        (tmp_path / "site" / "kernelwheel-dev-j.pth").write_text(str(tmp_path / "dev") + "\n")
    assert not probe_cache.run_cached(python, cache)[1] and _imports(counted) == 3


def test_another_pythonpath_is_another_record(
    counted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = Path(sys.executable)
    probe_cache.run_cached(python, tmp_path / "cache")
    other = _site(tmp_path / "b", "2.12.0+cu126")
    monkeypatch.setenv("PYTHONPATH", str(other))
    found, _ = probe_cache.run_cached(python, tmp_path / "cache")
    assert found.torch is not None and found.torch.version == "2.12.0+cu126"
    assert len(list((tmp_path / "cache" / "interpreters").glob("*.json"))) == 2


def test_a_damaged_record_is_replaced(counted: Path, tmp_path: Path) -> None:
    python = Path(sys.executable)
    probe_cache.run_cached(python, tmp_path / "cache")
    (record,) = (tmp_path / "cache" / "interpreters").glob("*.json")
    record.write_text("{not json")
    found, kept = probe_cache.run_cached(python, tmp_path / "cache")
    assert found.torch is not None and found.torch.version == "2.14.1+cu130"
    assert _imports(counted) == 2 and not kept
    probe_cache.run_cached(python, tmp_path / "cache")
    assert _imports(counted) == 2  # the rewritten record holds again


def test_an_interpreter_without_torch_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.fspath(tmp_path / "empty"))
    found, _ = probe_cache.run_cached(Path(sys.executable), tmp_path / "cache")
    if found.torch is not None:
        pytest.skip("this interpreter has torch")
    assert not (tmp_path / "cache" / "interpreters").exists()


def _edit_record(tmp_path: Path, edit: object, *, redigest: bool) -> None:
    import json

    (record,) = (tmp_path / "cache" / "interpreters").glob("*.json")
    saved = json.loads(record.read_text())
    edit(saved)  # type: ignore[operator]
    if redigest and isinstance(saved.get("report"), dict):
        saved["digest"] = probe_cache._digest(saved["report"], saved["stamps"])
    record.write_text(json.dumps(saved))


@pytest.mark.parametrize("redigest", [False, True], ids=["edited", "edited-and-redigested"])
def test_a_record_that_parses_but_lies_is_probed_again(
    counted: Path, tmp_path: Path, redigest: bool
) -> None:
    """Issue 30: a record naming another torch than the installed one, its stamps unchanged:
    the digest (an edit after writing) or torch's own version.py (an edit that redid the digest)
    tells, and the interpreter is probed again."""
    python = Path(sys.executable)
    probe_cache.run_cached(python, tmp_path / "cache")

    def lie(saved: dict[str, object]) -> None:
        report = saved["report"]
        assert isinstance(report, dict)
        report["torch"][0] = "2.99.0+cu999"
        report["torch_cuda"] = "99.9"

    _edit_record(tmp_path, lie, redigest=redigest)
    found, kept = probe_cache.run_cached(python, tmp_path / "cache")
    assert not kept and _imports(counted) == 2
    assert found.torch is not None and found.torch.version == "2.14.1+cu130"
    assert found.torch_cuda == "13.0"


WRONG_TYPES = {
    "record-a-list": lambda s: s.clear(),
    "report-a-string": lambda s: s.update(report="torch 2.14"),
    "stamps-a-number": lambda s: s.update(stamps=5),
    "python-strings": lambda s: s["report"].update(python=["3", "11"]),
    "torch-short": lambda s: s["report"].update(torch=["2.14.1"]),
    "sys-path-none": lambda s: s["report"].update(sys_path=None),
    "tags-a-string": lambda s: s["report"].update(tags="cp311"),
    "pip-a-string": lambda s: s["report"].update(pip="yes"),
    "executable-a-number": lambda s: s["report"].update(executable=7),
    "backend-strings": lambda s: s["report"].update(torch=["2.14.1+cu130", "cuda", ["13"], True]),
}


@pytest.mark.parametrize("edit", list(WRONG_TYPES.values()), ids=list(WRONG_TYPES))
def test_a_wrong_typed_record_is_probed_again_without_a_traceback(
    counted: Path, tmp_path: Path, edit: object
) -> None:
    python = Path(sys.executable)
    probe_cache.run_cached(python, tmp_path / "cache")
    _edit_record(tmp_path, edit, redigest=True)
    found, kept = probe_cache.run_cached(python, tmp_path / "cache")
    assert not kept and _imports(counted) == 2
    assert found.torch is not None and found.torch.version == "2.14.1+cu130"
