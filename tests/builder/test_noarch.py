"""Pure-Python kernels ([torch-noarch], the older universal = true, edition 3 without a framework
section): one py3-none-any wheel for all of a project's torch-<backend> variants, each backend's
python-depends under an extra; installed into a venv with a real CPU torch and called."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.builds import CPU_VARIANT, build_env
from support.kinds import NOARCH_BUILD_TOML, write_noarch_project
from support.layered import LayeredVenv
from support.requests import request_for
from support.wheelread import read_wheel

from kernelwheel.builder import codegen
from kernelwheel.builder.noarch import build_noarch, noarch_requirements, torch_requirement
from kernelwheel.builder.steps import left_out_note
from kernelwheel.cli import main
from kernelwheel.errors import ProjectError
from kernelwheel.log import SilentReporter
from kernelwheel.model.project import load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.model.variant import Variant
from kernelwheel.plan.options import ENV_VARS, resolve_options

WHEEL = "scale_noarch-1.0.0-py3-none-any.whl"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def build(root: Path, out: Path, *args: str) -> int:
    return main(["build", str(root), "--output-dir", str(out), "--version", "1.0.0", *args])


def metadata(wheel: Path) -> list[tuple[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode()
    return [tuple(line.split(": ", 1)) for line in text.splitlines() if ": " in line]  # type: ignore[misc]


def test_requirements_put_each_backends_depends_under_its_extra(tmp_path: Path) -> None:
    project = load_project(write_noarch_project(tmp_path / "p"))
    variants = [Variant.parse("torch-cpu"), Variant.parse("torch-cuda")]
    requires, extras = noarch_requirements(project, variants)
    assert extras == ("cpu", "cuda")
    assert requires[:2] == ("torch", "einops")
    parsed = [Requirement(r) for r in requires[2:]]
    assert [r.name for r in parsed] == ["nvidia-cutlass-dsl", "numpy"]
    for req in parsed:
        assert req.marker is not None
        assert req.marker.evaluate({"extra": "cuda"})
        assert not req.marker.evaluate({"extra": "cpu"})
        assert not req.marker.evaluate({"extra": ""})
    # The requirement's own marker still applies inside the extra.
    assert not parsed[1].marker.evaluate({"extra": "cuda", "python_version": "3.8"})
    # Only the selected backends get an extra.
    assert noarch_requirements(project, variants[:1]) == (("torch", "einops"), ("cpu",))


def test_torch_bounds_of_an_edition3_pure_python_project(tmp_path: Path) -> None:
    toml = (
        '[general]\nname = "scale-noarch"\nbackends = ["cuda"]\n\n'
        '[torch]\nminver = "2.8"\nmaxver = "2.9"\n'
    )
    project = load_project(write_noarch_project(tmp_path / "p", toml))
    assert project.noarch and project.edition == 3
    assert torch_requirement(project) == "torch>=2.8,<2.10"
    toml = toml.replace('maxver = "2.9"', 'maxver = "2.9.1"')
    project = load_project(write_noarch_project(tmp_path / "q", toml))
    assert torch_requirement(project) == "torch>=2.8,<=2.9.1"


def test_build_writes_one_pure_python_wheel(tmp_path: Path) -> None:
    root = write_noarch_project(tmp_path / "p")
    out = tmp_path / "out"
    assert build(root, out, "--hub-layout", str(tmp_path / "hub")) == 0
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".whl") == [WHEEL]
    contents = read_wheel(out / WHEEL)
    files = sorted(contents.files)
    assert [f for f in files if not f.startswith("scale_noarch-1.0.0.dist-info")] == [
        "scale_noarch/__init__.py",
        "scale_noarch/_ops.py",
        "scale_noarch/factor.json",  # pyext "json"
        "scale_noarch/sub/__init__.py",
    ]  # notes.txt has no pyext suffix
    ops = contents.files["scale_noarch/_ops.py"].decode()
    assert "def add_op_namespace_prefix" in ops and '"_scale_noarch_" + _running_backend()' in ops
    fields = metadata(out / WHEEL)
    assert ("Provides-Extra", "cpu") in fields and ("Provides-Extra", "cuda") in fields
    requires = [v for k, v in fields if k == "Requires-Dist"]
    assert requires[:2] == ["torch", "einops"]
    assert 'nvidia-cutlass-dsl; extra == "cuda"' in requires
    with zipfile.ZipFile(out / WHEEL) as zf:
        wheel_txt = zf.read("scale_noarch-1.0.0.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: true" in wheel_txt and "Tag: py3-none-any" in wheel_txt
    # --hub-layout: kernel-builder's folder per backend, the same files in each.
    for backend in ("cpu", "cuda"):
        folder = tmp_path / "hub" / "build" / f"torch-{backend}"
        assert (folder / "factor.json").is_file() and (folder / "_ops.py").is_file()
        meta = json.loads((folder / "metadata.json").read_text())
        assert meta["backend"]["type"] == backend
        assert meta["id"].startswith(f"_scale_noarch_{backend}_")


def test_a_package_file_left_out_of_the_wheel_is_named_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a data file the package reads, its suffix in no pyext: the wheel built without a word,
    # and the package's read of it failed on the user's machine
    root = write_noarch_project(tmp_path / "p")
    (root / "torch-ext" / "scale_noarch" / ".scale.py.swp").write_bytes(b"vim")  # no part
    (root / "torch-ext" / "scale_noarch" / "Makefile").write_text("")  # no pyext can name it
    assert build(root, tmp_path / "out") == 0
    out = capsys.readouterr().out
    assert (
        "note: torch-ext/scale_noarch/notes.txt left out of the package (its pyext: py, json); "
        'to ship them, add "txt" to pyext in build.toml\'s [torch-noarch]'
    ) in out
    assert "swp" not in out and "Makefile" not in out
    (root / "torch-ext" / "scale_noarch" / "notes.txt").unlink()
    assert build(root, tmp_path / "out") == 0
    assert "left out of the package" not in capsys.readouterr().out


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    root = write_noarch_project(tmp_path / "p")
    assert build(root, tmp_path / "a") == 0
    assert build(root, tmp_path / "b") == 0
    assert (tmp_path / "a" / WHEEL).read_bytes() == (tmp_path / "b" / WHEEL).read_bytes()


@pytest.mark.parametrize(
    "toml",
    [
        # the older forms: universal = true
        '[general]\nname = "scale-noarch"\nversion = "0.3.0"\nuniversal = true\n\n[torch]\n',
        # edition 3: backends, no framework section
        '[general]\nname = "scale-noarch"\nbackends = ["cpu", "rocm"]\n',
        # edition 4: explicit [torch-noarch]
        '[general]\nname = "scale-noarch"\nversion = 0\nlicense = "MIT"\nbackends = ["xpu"]\n\n'
        "[torch-noarch]\n",
    ],
)
def test_every_pure_python_form_builds(tmp_path: Path, toml: str) -> None:
    root = write_noarch_project(tmp_path / "p", toml)
    out = tmp_path / "out"
    assert main(["build", str(root), "--output-dir", str(out), "--version", "0.3.0"]) == 0
    (wheel,) = out.glob("*.whl")
    assert wheel.name == "scale_noarch-0.3.0-py3-none-any.whl"
    project = load_project(root)
    extras = [v for k, v in metadata(wheel) if k == "Provides-Extra"]
    assert extras == list(project.backends)


def test_a_local_version_is_refused(tmp_path: Path) -> None:
    project = load_project(write_noarch_project(tmp_path / "p"))
    recipes = load_recipes()
    recipe = recipes.recipe_for(Variant.parse("torch-cpu"))
    options = resolve_options(None, env={}, cli={"output_dir": str(tmp_path / "o")})
    req = request_for(project, recipe, "1.0+cpu", options, recipes)
    with pytest.raises(ProjectError, match="has a local part") as info:
        build_noarch(req, SilentReporter())
    assert "--version 1.0" in (info.value.hint or "")
    assert not (tmp_path / "o").exists()


def test_a_package_file_that_does_not_compile_fails_the_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the wheel of a pure-Python kernel is its Python: it was written, and its import failed
    root = write_noarch_project(tmp_path / "p")
    (root / "torch-ext" / "scale_noarch" / "sub" / "__init__.py").write_text("def f(:\n")
    assert build(root, tmp_path / "o") == 6
    err = capsys.readouterr().err
    assert "1 Python file(s) of the package do not compile" in err
    assert "  torch-ext/scale_noarch/sub/__init__.py:1: " in err
    assert not list((tmp_path / "o").glob("*.whl"))


@pytest.mark.integration
def test_installed_wheel_runs_its_op_under_cpu_torch(tmp_path: Path) -> None:
    root = write_noarch_project(tmp_path / "p", NOARCH_BUILD_TOML)
    out = tmp_path / "out"
    assert build(root, out) == 0
    venv = LayeredVenv(tmp_path / "venv", build_env(CPU_VARIANT).purelib)
    venv.pip(str(out / WHEEL))  # einops from the index; torch is the layered CPU 2.13
    check = r"""
import importlib.metadata as md, numpy as np, torch, scale_noarch
from scale_noarch import _ops
assert _ops._NAMESPACE.startswith("_scale_noarch_cpu_"), _ops._NAMESPACE
assert _ops.add_op_namespace_prefix("scale") == _ops._NAMESPACE + "::scale"
rng = np.random.default_rng()
for shape in [(0,), (1,), (17, 3), (64, 65, 2)]:
    x = rng.standard_normal(shape).astype(np.float32)
    got = scale_noarch.scale(torch.from_numpy(x)).numpy()
    assert np.allclose(got, x * 2.5), shape
    direct = getattr(torch.ops, _ops._NAMESPACE).scale(torch.from_numpy(x)).numpy()
    assert np.array_equal(direct, got)
print(sorted(md.requires("scale-noarch")))
print("OK", torch.__version__)
"""
    result = venv.run("-c", check)
    assert "OK 2.13.0+cpu" in result.stdout, result.stdout + result.stderr
    assert 'nvidia-cutlass-dsl; extra == "cuda"' in result.stdout
    # A plain install did not pull the CUDA-only requirement.
    missing = venv.run(
        "-c", "import importlib.metadata as m; m.version('nvidia-cutlass-dsl')", check=False
    )
    assert missing.returncode != 0


@pytest.mark.parametrize(
    ("facts", "backend"),
    [
        ({"cuda": "13.0"}, "cuda"),
        ({"hip": "7.1"}, "rocm"),
        ({"xpu": "20250"}, "xpu"),
        ({"mps": True}, "metal"),
        ({"cuda": "13.0", "neuron": True}, "neuron"),  # a plug-in loaded into a CUDA torch
        ({"tpu": True}, "tpu"),
        ({}, "cpu"),
    ],
)
def test_ops_namespace_names_the_running_backend(
    facts: dict[str, object], backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    backends = types.SimpleNamespace(
        mps=types.SimpleNamespace(is_available=lambda: bool(facts.get("mps")))
    )
    if facts.get("tpu"):
        backends.tpu = object()  # type: ignore[attr-defined]
    torch = types.SimpleNamespace(
        version=types.SimpleNamespace(
            cuda=facts.get("cuda"), hip=facts.get("hip"), xpu=facts.get("xpu")
        ),
        backends=backends,
        ops=types.SimpleNamespace(),
    )
    if facts.get("neuron"):
        torch.neuron = object()  # type: ignore[attr-defined]
    namespace = f"_scale_noarch_{backend}_0123456789"
    setattr(torch.ops, namespace, "the namespace")
    monkeypatch.setitem(sys.modules, "torch", torch)
    scope: dict[str, object] = {}
    exec(codegen.noarch_ops_py("scale_noarch", "0123456789"), scope)
    assert scope["ops"] == "the namespace"
    assert scope["add_op_namespace_prefix"]("scale") == f"{namespace}::scale"  # type: ignore[operator]


def test_the_left_out_note_of_an_edition_3_pure_python_project_gives_a_fix_it_accepts(
    tmp_path: Path,
) -> None:
    # kernels-community einops's build.toml without edition and [torch-noarch] (edition 3: no
    # section means pure Python): the note said to add "typed" to pyext in [torch-noarch],
    # which that edition refuses ("'torch-noarch' needs edition 5 or later")
    edition_3 = '[general]\nname = "scale-noarch"\nversion = 1\nbackends = ["cpu"]\n'
    root = write_noarch_project(tmp_path / "n", edition_3)
    project = load_project(root)
    assert project.edition == 3 and project.torch_noarch is not None
    note = left_out_note(project) or ""
    assert "[torch-noarch]" not in note
    assert 'add [torch] with pyext = ["py", "pyi", "json", "txt"] to build.toml' in note
    fix = note.split("add ", 1)[1].split(" to build.toml")[0]  # [torch] with pyext = [...]
    section, pyext = fix.split(" with ")
    (root / "build.toml").write_text(f"{edition_3}{section}\n{pyext}\n")
    mended = load_project(root)
    assert mended.edition == 3 and mended.torch_noarch is not None  # still pure Python
    assert left_out_note(mended) is None
