"""kernel-builder's first build.toml format (January-May 2025): ``[torch] name`` and ``pyroot``,
kernels without ``backend`` and their ``capabilities``. Read into the same model as the later
forms, or refused naming the key and the edit. The projects are written here (made up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwheel.errors import ProjectError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import Framework, load_project
from kernelwheel.model.recipes import load_recipes
from kernelwheel.plan.matrix import plan_matrix

# The first form: the name under [torch], the package under pyroot, registration.h of one's own.
FIRST = """\
[general]
version = "0.0.3"

[torch]
name = "scale_add"
src = ["ext-torch/registration.h", "ext-torch/torch_binding.cpp", "ext-torch/torch_binding.h"]
pyroot = "ext-torch"
pyext = ["py", "json"]

[kernel.scale_add]
capabilities = ["8.0", "9.0"]
src = ["scale_add/kernel.cu"]
depends = ["torch"]
"""

FIRST_FILES = (
    "ext-torch/registration.h",
    "ext-torch/torch_binding.cpp",
    "ext-torch/torch_binding.h",
    "ext-torch/scale_add/__init__.py",
    "scale_add/kernel.cu",
)

# Between February and May 2025: name under [general], cuda-capabilities, language, universal.
SPRING = """\
[general]
name = "gated"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.gated]
cuda-capabilities = ["8.0", "9.0a"]
rocm-archs = ["gfx942"]
language = "cuda-hipify"
src = ["csrc/gated.cu"]
depends = ["torch"]
"""

SPRING_FILES = ("torch-ext/torch_binding.cpp", "torch-ext/gated/__init__.py", "csrc/gated.cu")


def write(root: Path, text: str, files: tuple[str, ...]) -> Path:
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// made up\n")
    (root / "build.toml").write_text(text)
    return root


def refused(root: Path) -> ProjectError:
    with pytest.raises(ProjectError) as info:
        load_project(root)
    return info.value


def test_first_form_is_read(tmp_path: Path) -> None:
    project = load_project(write(tmp_path / "k", FIRST, FIRST_FILES))
    assert project.name == "scale_add" and project.package == "scale_add"
    assert project.version == "0.0.3"
    assert project.framework is Framework.TORCH and project.backends == ("cuda",)
    (kernel,) = project.kernels
    assert (kernel.id, kernel.backend, kernel.cuda_capabilities) == (
        "scale_add",
        "cuda",
        parse_all(["8.0", "9.0"]),
    )
    assert project.package_dir == tmp_path / "k" / "ext-torch" / "scale_add"
    assert project.pyext == ("py", "json")
    # The package's files are inputs of the build (its cache key reads them from pyroot).
    assert tmp_path / "k" / "ext-torch" / "scale_add" / "__init__.py" in project.source_files()


def test_first_form_plans_cuda_variants_with_its_capabilities(tmp_path: Path) -> None:
    project = load_project(write(tmp_path / "k", FIRST, FIRST_FILES))
    plan = plan_matrix(project, load_recipes())
    assert plan.selected and all("-cu" in name for name in plan.names)
    assert any("backend cpu not in" in r.reason for r in plan.rejected)


def test_pyroot_torch_ext_is_the_default_folder(tmp_path: Path) -> None:
    text = FIRST.replace("ext-torch", "torch-ext")
    files = tuple(f.replace("ext-torch", "torch-ext") for f in FIRST_FILES)
    project = load_project(write(tmp_path / "k", text, files))
    assert project.torch is not None and project.torch.pyroot is None
    assert project.package_dir == tmp_path / "k" / "torch-ext" / "scale_add"


def test_spring_form_hipify_builds_cuda_and_rocm(tmp_path: Path) -> None:
    project = load_project(write(tmp_path / "k", SPRING, SPRING_FILES))
    cuda, rocm = project.kernels
    assert (cuda.id, cuda.backend, cuda.cuda_capabilities, cuda.rocm_archs) == (
        "gated",
        "cuda",
        parse_all(["8.0", "9.0a"]),
        (),
    )
    assert (rocm.id, rocm.backend, rocm.rocm_archs, rocm.src) == (
        "gated_rocm",
        "rocm",
        ("gfx942",),
        cuda.src,
    )
    assert project.backends == ("cuda", "rocm")


def test_torch_universal_is_a_noarch_kernel(tmp_path: Path) -> None:
    text = '[general]\nname = "pure"\n\n[torch]\nuniversal = true\n'
    project = load_project(write(tmp_path / "k", text, ("torch-ext/pure/__init__.py",)))
    assert project.noarch


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        # both spellings of one thing: keep the current one
        (('version = "0.0.3"', 'version = "0.0.3"\nname = "other"'), "torch.name", "remove name"),
        (
            (
                'capabilities = ["8.0", "9.0"]',
                'capabilities = ["8.0"]\ncuda-capabilities = ["9.0"]',
            ),
            "kernel.scale_add.capabilities",
            "keep cuda-capabilities",
        ),
        (('depends = ["torch"]', 'language = "hip"'), "kernel.scale_add.language", 'backend = "'),
        (
            ('depends = ["torch"]', 'rocm-archs = ["gfx90a"]'),
            "kernel.scale_add.rocm-archs",
            'backend = "rocm"',
        ),
        # a key of the later forms needs their backend key
        (
            ('depends = ["torch"]', 'cuda-flags = ["-O3"]'),
            "kernel.scale_add.cuda-flags",
            'add backend = "cuda"',
        ),
        (('pyroot = "ext-torch"', 'pyroot = "ext-torch/registration.h"'), "torch.pyroot", "folder"),
        (('pyroot = "ext-torch"', 'pyroot = "../elsewhere"'), "torch.pyroot", "outside"),
        (('pyroot = "ext-torch"', 'pyroot = "csrc"'), "general.name", "csrc/scale_add"),
        (('capabilities = ["8.0", "9.0"]', 'capabilities = ["sm_90"]'), "capabilities", '"9.0"'),
    ],
)
def test_first_form_refusals_name_the_key_and_the_edit(
    tmp_path: Path, edit: tuple[str, str], key: str, words: str
) -> None:
    old, new = edit
    assert old in FIRST
    error = refused(write(tmp_path / "k", FIRST.replace(old, new), (*FIRST_FILES, "csrc/x.h")))
    assert key in str(error) and words in str(error), str(error)


def test_torch_name_is_refused_in_the_editions(tmp_path: Path) -> None:
    text = (
        '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n'
        '\n[torch]\nname = "relu"\nsrc = ["torch-ext/b.cpp"]\n'
        '\n[kernel.relu]\nbackend = "cpu"\nsrc = ["csrc/relu.cpp"]\ndepends = ["torch"]\n'
    )
    files = ("torch-ext/b.cpp", "csrc/relu.cpp", "torch-ext/relu/__init__.py")
    error = refused(write(tmp_path / "k", text, files))
    assert "torch.name" in str(error) and "[general]" in str(error), str(error)


def test_a_project_without_any_name_is_refused(tmp_path: Path) -> None:
    text = FIRST.replace('name = "scale_add"\n', "")
    error = refused(write(tmp_path / "k", text, FIRST_FILES))
    assert "general.name" in str(error) and "missing" in str(error)


def test_hipify_name_clash_is_refused(tmp_path: Path) -> None:
    text = SPRING + '\n[kernel.gated_rocm]\nbackend = "rocm"\nsrc = ["csrc/gated.cu"]\n'
    error = refused(write(tmp_path / "k", text, SPRING_FILES))
    assert "kernel.gated.language" in str(error) and "gated_rocm" in str(error)


def test_the_fixture_of_the_first_form_reads_as_a_cuda_kernel() -> None:
    # tests/fixtures/first_format: built on CPU-only machines as a CUDA variant, and on the GPU
    # machine by `bash bench/gpu.sh default-variant`, which runs its op.
    root = Path(__file__).resolve().parents[1] / "fixtures" / "first_format"
    project = load_project(root)
    assert (project.name, project.version, project.backends) == ("scale_add", "0.0.3", ("cuda",))
    assert project.package_dir == root / "ext-torch" / "scale_add"
    (kernel,) = project.kernels
    assert kernel.cuda_capabilities == parse_all(["8.0", "9.0"])
    assert project.torch is not None and Path("ext-torch/registration.h") in project.torch.src
