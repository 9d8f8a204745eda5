"""Fuzzing the real CLI (issue 13): generated bad build.toml files, variant folder names, local
versions, metadata.json files, lock files and RECORDs. Every run must end with a documented exit
code (errors.py's hierarchy), print no traceback, write nothing outside its output folder and
leave nothing partial (no hidden staging folder or temporary file) inside it.

The default run is small and derandomized (a few seconds); KERNELWHEEL_OPTIN=1 runs many more
random examples (the ``optin`` marker)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.tags import Tag
from support.gitrepo import HubRepo, variant_files
from support.variants import TORCH27_CU128

from kernelwheel.cli import main
from kernelwheel.wheels import WheelSpec, write_wheel

OPTIN = os.environ.get("KERNELWHEEL_OPTIN") == "1"
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
# Staging folders (.kernelwheel-<purpose>-<pid>-…), staged files, replaced trees.
PARTIAL = re.compile(r"^\.(kernelwheel-.*-[0-9]+-|old-|tmp-)")


def fuzz(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return settings(
        max_examples=examples * 20 if OPTIN else examples,
        deadline=None,
        derandomize=not OPTIN,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def snapshot(root: Path, skip: Path | None = None) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if skip is not None and (here == skip or skip in here.parents):
            dirnames[:] = []
            continue
        out |= {
            str((here / n).relative_to(root))
            for n in dirnames + filenames
            if skip is None or here / n != skip
        }
    return out


def run_cli(argv: list[str], *, cwd: Path, output: Path | None = None) -> tuple[int, str]:
    """Run the CLI in ``cwd``; assert the issue's promises; return (code, stderr)."""
    before = snapshot(cwd, output)
    err = io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(old)
    text = err.getvalue()
    assert code in DOCUMENTED, (code, text)
    assert "Traceback" not in text, text
    assert snapshot(cwd, output) == before, "wrote outside the output folder"
    if output is not None and output.exists():
        hidden = [p.name for p in output.iterdir() if PARTIAL.match(p.name)]
        assert hidden == [], f"left behind: {hidden}"
    return code, text


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kw-fuzz-") as tmp:
        yield Path(tmp)


# -- build.toml ----------------------------------------------------------------------------------

KEYS = [
    "name",
    "version",
    "backends",
    "cuda-minver",
    "cuda-maxver",
    "src",
    "backend",
    "cuda-capabilities",
    "include",
    "cxx-flags",
    "python-depends",
    "universal",
    "pyext",
]
VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 10**20).map(str),
    st.lists(st.text(max_size=8), max_size=3).map(json.dumps),
    st.sampled_from(
        [
            '"img2gray"',
            '"1.0"',
            '["cuda"]',
            '["cpu", "cuda"]',
            '"9.9"',
            "true",
            '["../x.cu"]',
            '["/etc/passwd"]',
            '["csrc/*.cu"]',
            "[[[[1]]]]",
            "{}",
            '"' + "a" * 300 + '"',
            '["99.9f", "1.0"]',
        ]
    ),
)
TABLES = st.sampled_from(
    ["general", "torch", "kernel.img2gray", "kernel.x-y", "general.hub", "kernel", "torch.x", ""]
)
TOML = st.lists(
    st.tuples(TABLES, st.lists(st.tuples(st.sampled_from(KEYS), VALUES), max_size=4)), max_size=4
).map(
    lambda tables: "".join(
        (f"[{t}]\n" if t else "") + "".join(f"{k} = {v}\n" for k, v in kvs) for t, kvs in tables
    )
)
RAW = st.one_of(TOML, st.text(max_size=60), st.binary(max_size=60))


@fuzz(40)
@given(content=RAW)
def test_bad_build_toml(content: str | bytes) -> None:
    with workdir() as tmp:
        project = tmp / "proj"
        (project / "torch-ext" / "img2gray").mkdir(parents=True)
        (project / "torch-ext" / "img2gray" / "__init__.py").write_text("")
        (project / "csrc").mkdir()
        (project / "csrc" / "img2gray.cu").write_text("")
        target = project / "build.toml"
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8", errors="surrogateescape")
        run_cli(["matrix", str(project)], cwd=tmp)
        out = tmp / "out"
        run_cli(
            ["build", str(project), "--print-build-identifiers", "-o", str(out)],
            cwd=tmp,
            output=out,
        )


# -- Hub repos: variant names and metadata.json --------------------------------------------------


@pytest.fixture(scope="module")
def hub_repo(tmp_path_factory: pytest.TempPathFactory, so_cache: Path) -> HubRepo:
    repo = HubRepo(tmp_path_factory.mktemp("fuzz") / "img2gray")
    repo.set_variants([variant_files(TORCH27_CU128, so_cache=so_cache)])
    repo.commit("build")
    return repo


def _to_wheel(repo: HubRepo) -> None:
    repo.commit("fuzz")
    with workdir() as tmp:
        out = tmp / "out"
        args = ["to-wheel", str(repo.root), "1.0", "--revision", "main", "-o", str(out)]
        run_cli(args, cwd=tmp, output=out)


NAME_CHARS = "torch0123456789-cxx11cu128pu.abistlnx_86aarch64linuxdarwinwindowsmetalrocm"
VARIANT_NAMES = st.one_of(
    st.text(alphabet=NAME_CHARS, min_size=1, max_size=60),
    st.builds(
        "torch{}-cxx{}-{}-{}-{}".format,
        st.text("0123456789", min_size=1, max_size=40),
        st.sampled_from(["11", "98", "", "x"]),
        st.sampled_from(["cu128", "cu12.8", "cpu", "rocm63", "cu" + "1" * 200, "xpu", "metal"]),
        st.sampled_from(["x86_64", "aarch64", "riscv64", ""]),
        st.sampled_from(["linux", "darwin", "windows", "plan9"]),
    ),
).filter(lambda n: n not in (".", "..") and len(n.encode()) < 250)


@fuzz(15)
@given(name=VARIANT_NAMES)
def test_hostile_variant_names(hub_repo: HubRepo, name: str) -> None:
    hub_repo.write_file(f"build/{name}/img2gray/__init__.py", b"")
    try:
        _to_wheel(hub_repo)
    finally:
        top = hub_repo.root / "build" / name.split("/")[0]
        if name.split("/")[0] != "torch27-cxx11-cu128-x86_64-linux":
            shutil.rmtree(top, ignore_errors=True)
        else:
            shutil.rmtree(hub_repo.root / "build" / name / "img2gray", ignore_errors=True)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
METADATA = st.one_of(
    st.dictionaries(
        st.sampled_from(
            ["name", "version", "license", "python-depends", "backend", "summary", "id"]
        ),
        JSON,
        max_size=4,
    ).map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=40),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
)


@fuzz(15)
@given(metadata=METADATA, flat=st.booleans())
def test_hostile_metadata_json(hub_repo: HubRepo, metadata: bytes, flat: bool) -> None:
    variant = "torch27-cxx11-cu128-x86_64-linux"
    path = f"build/{variant}/metadata.json"
    hub_repo.write_file(path, metadata)
    init = hub_repo.root / f"build/{variant}/__init__.py"
    if flat:
        hub_repo.write_file(f"build/{variant}/__init__.py", b"")
    try:
        _to_wheel(hub_repo)
    finally:
        (hub_repo.root / path).unlink()
        init.unlink(missing_ok=True)


# -- wheels: local versions and RECORDs ----------------------------------------------------------

LOCALS = st.one_of(
    st.text(alphabet="torch0123456789.cu_cpxabilnsre+-", max_size=40),
    st.sampled_from(
        [
            "torch2.14.cu130.cxx11",
            "torch214cu130cxx11",
            "cxx98",
            "cuda",
            "universal",
            "torch2.14.cu130.cxx11.cxx98",
            "torch99999999999999999999.cpu",
        ]
    ),
)


@fuzz(30)
@given(local=LOCALS, platform=st.sampled_from(["manylinux_2_28_x86_64", "linux_aarch64", "any"]))
def test_hostile_local_versions(local: str, platform: str) -> None:
    with workdir() as tmp:
        house = tmp / "house"
        house.mkdir()
        tag = Tag("py3", "none", "any") if platform == "any" else Tag("cp39", "abi3", platform)
        name = f"demo-1.0+{local}-{tag}.whl"
        try:
            write_wheel(WheelSpec("demo", f"1.0+{local}", tag, {"demo/__init__.py": b""}), house)
        except Exception:  # not a PEP 440 version: a zip named like a wheel anyway
            with zipfile.ZipFile(house / name.replace("/", "_"), "w") as zf:
                zf.writestr("demo/__init__.py", b"")
        wheels = [str(p) for p in house.iterdir()]
        run_cli(["check", *wheels], cwd=tmp)
        out = tmp / "simple"
        run_cli(["index", str(house), "-o", str(out)], cwd=tmp, output=out)


RECORD_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["demo/__init__.py", "../x", "/abs", "demo/a,b.py", 'q"x', "", "demo/"]),
        st.sampled_from(["", "sha256=", "sha256=AAAA", "md5=x", "sha256=" + "A" * 43]),
        st.sampled_from(["", "0", "-1", "x", "99999999999999999999"]),
    ),
    max_size=5,
)
RECORDS = st.one_of(
    RECORD_ROWS.map(lambda rows: "\n".join(",".join(r) for r in rows).encode()),
    st.binary(max_size=80),
    st.text(alphabet=',"\n\r\x00a', max_size=40).map(str.encode),
)


@fuzz(30)
@given(record=RECORDS)
def test_hostile_records(record: bytes) -> None:
    with workdir() as tmp:
        spec = WheelSpec("demo", "1.0", Tag("py3", "none", "any"), {"demo/__init__.py": b"x"})
        wheel = write_wheel(spec, tmp)
        with zipfile.ZipFile(wheel) as zf:
            entries = [(i, zf.read(i)) for i in zf.infolist()]
        with zipfile.ZipFile(wheel, "w") as zf:
            for info, data in entries:
                zf.writestr(info, record if info.filename.endswith("/RECORD") else data)
        code, _ = run_cli(["check", str(wheel)], cwd=tmp)
        assert code in (7, 8)  # never "complies" with a RECORD we wrote at random


# -- lock files ------------------------------------------------------------------------------------

LOCK_LINES = st.lists(
    st.sampled_from(
        [
            "lock-version = 1",
            "lock-version = 99",
            'kernelwheel = "0.1.0"',
            "kernelwheel = 1",
            "source-date-epoch = 315532800",
            "source-date-epoch = -1",
            "[[kernel]]",
            'repo = "acme/relu"',
            'repo = "../../etc"',
            'requested = "1"',
            'requested = ">=x"',
            'ref = "v1"',
            'commit = "' + "a" * 40 + '"',
            'commit = "zz"',
            'version = "1.0"',
            'path = "../relu"',
            'path = "/nonexistent"',
            "[[kernel.variant]]",
            'name = "torch27-cxx11-cu128-x86_64-linux"',
            'name = "../../x"',
            'wheel = "x.whl"',
            'wheel-sha256 = "' + "0" * 64 + '"',
            "[kernel.variant.files]",
            '"a/b.so" = "zz"',
            "skipped = [1]",
            "kernel = 3",
        ]
    ),
    max_size=14,
).map("\n".join)


@fuzz(30)
@given(lock=st.one_of(LOCK_LINES, st.binary(max_size=60)))
def test_hostile_lock_files(lock: str | bytes) -> None:
    with workdir() as tmp:
        project = tmp / "app"
        project.mkdir()
        target = project / "kernelwheel.lock"
        if isinstance(lock, bytes):
            target.write_bytes(lock)
        else:
            target.write_text(lock)
        house = tmp / "house"
        code, _ = run_cli(
            ["download", str(project), "--wheelhouse", str(house)], cwd=tmp, output=house
        )
        assert code != 0
        assert not house.exists() or list(house.iterdir()) == []


# -- issue 30: names, paths, metadata requirements and URLs, --json ------------------------------

RESERVED = ["torch", "triton", "numpy", "pip", "setuptools", "kernels", "kernelwheel", "wheel"]
RESERVED += ["json", "os", "asyncio", "typing", "nvidia-cublas", "pytorch-triton", "packaging"]
KERNEL_NAMES = st.one_of(
    st.sampled_from(RESERVED),
    st.sampled_from(RESERVED).map(str.upper),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=20),
    st.text(max_size=12).filter(lambda s: "/" not in s and s not in (".", "..")),
    st.integers(65, 400).map(lambda n: "a" * n),
    st.sampled_from(['a"b', "a\\b", "a\x00b", "a\nb", "ä-kernel", "import", "class"]),
)


def _toml_str(text: str) -> str:
    """``text`` as a TOML basic string (control characters, DEL, quotes escaped)."""
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 32 or ord(c) == 127 or c in '"\\' else c for c in text
    )
    return f'"{escaped}"'


def _shadows(name: str) -> bool:
    from kernelwheel.model.names import shadowing

    return shadowing(name, name.replace("-", "_").replace(".", "_")) is not None


@fuzz(30)
@given(name=KERNEL_NAMES)
def test_hostile_kernel_names(name: str) -> None:
    """init NAME, build.toml's general.name and to-wheel --name: a documented exit, no
    traceback, nothing half-written; a name of a core package or stdlib module never passes."""
    with workdir() as tmp:
        code, err = run_cli(["init", name, "--backends", "cpu"], cwd=tmp, output=tmp)
        if code == 0:
            assert not _shadows(name), name
            project = tmp / name
        else:
            assert code == 2 and "invalid TOML" not in err, err
            assert list(tmp.iterdir()) == [], "a refused init leaves nothing"
            project = tmp / "p"
            (project / "torch-ext" / "p").mkdir(parents=True)
            (project / "torch-ext" / "p" / "__init__.py").write_text("")
        toml = project / "build.toml"
        text = toml.read_text() if toml.exists() else '[general]\nname = "p"\nbackends = ["cpu"]\n'
        quoted = _toml_str(name)
        toml.write_text(re.sub(r'(?m)^name = ".*"$', lambda _: f"name = {quoted}", text, count=1))
        code, err = run_cli(["build", str(project), "--print-build-identifiers"], cwd=tmp)
        if _shadows(name):  # refused: as a core name, or for its spelling (never suggested)
            assert code == 3 and f'name = "{name.lower()}"' not in err, err
        out = tmp / "o"
        code, err = run_cli(
            ["to-wheel", str(tmp), "1", "--name", name, "-o", str(out)], cwd=tmp, output=out
        )
        if _shadows(name) and code == 2:
            assert "shadow" in err or "package name" in err, err
        elif _shadows(name):
            pytest.fail(f"to-wheel --name {name!r} was not refused: {code} {err}")


SRC_ENTRIES = st.one_of(
    st.text(max_size=20),
    st.builds(
        lambda a, b: f"csrc/{a}{b}.cpp",
        st.sampled_from(["", "a\x00", "\x01", "\n", "\x7f"]),
        st.integers(0, 300).map(lambda n: "b" * n),
    ),
    st.sampled_from(["csrc/" + "é" * 130 + ".cpp", "csrc/./../csrc/k.cpp", "csrc//k.cpp"]),
)


@fuzz(30)
@given(entry=SRC_ENTRIES)
def test_hostile_source_paths(entry: str) -> None:
    """A NUL, a control character or a component over 255 bytes in a build.toml path: a
    ProjectError naming the key (exit 3), never a traceback."""
    with workdir() as tmp:
        project = tmp / "pk"
        (project / "torch-ext" / "pk").mkdir(parents=True)
        (project / "torch-ext" / "pk" / "__init__.py").write_text("")
        (project / "csrc").mkdir()
        (project / "csrc" / "k.cpp").write_text("")
        (project / "build.toml").write_text(
            '[general]\nname = "pk"\nbackends = ["cpu"]\n[torch]\nsrc = ["csrc/k.cpp"]\n'
            f'[kernel.k]\nbackend = "cpu"\nsrc = [{_toml_str(entry)}]\n'
        )
        code, err = run_cli(["matrix", str(project)], cwd=tmp)
        bad = any(ord(c) < 32 for c in entry) or any(
            len(part.encode("utf-8", "surrogatepass")) > 255 for part in entry.split("/")
        )
        if bad:
            assert code == 3 and "kernel.k.src" in err, err


def _json_stdout(argv: list[str], cwd: Path) -> tuple[int, object]:
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(old)
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, json.loads(out.getvalue())  # the whole of stdout is one JSON document


@fuzz(25)
@given(content=RAW)
def test_json_is_a_document_whatever_the_build_toml(content: str | bytes) -> None:
    """--json prints one JSON document, the error's when the command fails as a whole."""
    with workdir() as tmp:
        project = tmp / "proj"
        (project / "torch-ext" / "img2gray").mkdir(parents=True)
        (project / "torch-ext" / "img2gray" / "__init__.py").write_text("")
        target = project / "build.toml"
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8", errors="surrogateescape")
        code, doc = _json_stdout(["matrix", str(project), "--json"], tmp)
        assert isinstance(doc, dict)
        if code != 0:
            assert doc["ok"] is False and doc["exit_code"] == code and doc["error"]["message"]
        code, doc = _json_stdout(["build", str(project), "--json", "-o", str(tmp / "o")], tmp)
        assert isinstance(doc, dict) and (code == 0 or doc["ok"] is False)


REQUIREMENTS = st.one_of(
    st.sampled_from(
        [
            "evil @ file:///etc/passwd",
            "evil@https://example.invalid/e.whl",
            "evil @ git+https://example.invalid/e.git",
            "einops",
            "numpy>=1.26; python_version >= '3.9'",
            "x [a] @ http://h/x.zip ; os_name == 'posix'",
        ]
    ),
    st.text(max_size=20),
)
URLS = st.one_of(
    st.sampled_from(
        [
            "javascript:alert(1)",
            "JAVASCRIPT:alert(1)",
            "file:///etc/passwd",
            "data:text/html,x",
            "https://github.com/a/b",
            "http://h",
            "https://h/ x",
            "https:///nohost",
            "git@github.com:a/b",
            "vbscript:x",
        ]
    ),
    st.text(max_size=20),
)


@fuzz(20)
@given(deps=st.lists(REQUIREMENTS, max_size=3), upstream=URLS, source=URLS)
def test_hostile_metadata_requirements_and_urls(
    hub_repo: HubRepo, deps: list[str], upstream: str, source: str
) -> None:
    """Whatever metadata.json says, a written wheel's METADATA holds no direct reference and
    no Project-URL but an http(s) one."""
    variant = "torch27-cxx11-cu128-x86_64-linux"
    path = f"build/{variant}/metadata.json"
    metadata = {"python-depends": deps, "upstream": upstream, "source": source}
    hub_repo.write_file(path, json.dumps(metadata).encode())
    try:
        hub_repo.commit("fuzz")
        with workdir() as tmp:
            out = tmp / "out"
            args = ["to-wheel", str(hub_repo.root), "1.0", "--revision", "main", "-o", str(out)]
            run_cli(args, cwd=tmp, output=out)
            for wheel in out.glob("*.whl"):
                with zipfile.ZipFile(wheel) as zf:
                    (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
                    text = zf.read(name).decode()
                for line in text.splitlines():
                    if line.startswith("Requires-Dist:"):
                        assert " @ " not in line and "@" not in line.split(";")[0], line
                    if line.startswith("Project-URL:"):
                        url = line.split(",", 1)[1].strip()
                        assert url.startswith(("http://", "https://")), line
                        assert not any(c.isspace() for c in url), line
    finally:
        (hub_repo.root / path).unlink()
