"""Tests for kernelwheel.model.project: build.toml -> frozen KernelProject, its errors."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.version import Version

from kernelwheel.builder.codegen import build_id
from kernelwheel.errors import ProjectError, UsageError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import (
    DEFAULT_PYEXT,
    HubConfig,
    KernelProject,
    editor_file,
    find_project_root,
    load_project,
)
from kernelwheel.model.variant import Variant

GENERAL = '[general]\nname = "img2gray"\n'
TORCH = '[torch]\nsrc = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]\n'
CUDA_KERNEL = '[kernel.img2gray]\nbackend = "cuda"\nsrc = ["csrc/img2gray.cu"]\n'
VALID = GENERAL + TORCH + CUDA_KERNEL

DEFAULT_FILES = (
    "csrc/img2gray.cu",
    "csrc/img2gray_cpu.cpp",
    "csrc/common.h",
    "torch-ext/torch_binding.cpp",
    "torch-ext/torch_binding.h",
)


def make_project(
    root: Path,
    build_toml: str | None,
    *,
    package: str | None = "img2gray",
    files: Iterable[str] = DEFAULT_FILES,
) -> Path:
    """Write a kernel-builder layout under ``root``; ``build_toml=None`` leaves it out."""
    root.mkdir(parents=True, exist_ok=True)
    if build_toml is not None:
        (root / "build.toml").write_text(textwrap.dedent(build_toml), encoding="utf-8")
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"// {rel}\n", encoding="utf-8")
    if package is not None:
        pkg = root / "torch-ext" / package
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("from ._ops import ops\n", encoding="utf-8")
    return root


def load_error(root: Path) -> ProjectError:
    with pytest.raises(ProjectError) as info:
        load_project(root)
    return info.value


def assert_error(err: ProjectError, key: str | None, *fragments: str) -> None:
    """The message names the file and key, and message + fix contain each fragment."""
    text = str(err)
    assert "build.toml" in text
    assert err.file is not None and err.file.name == "build.toml"
    assert err.key == key
    if key is not None:
        assert key in text
    assert err.hint, "every error says how to fix it"
    assert "fix:" in text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"


# -- valid projects ---------------------------------------------------------------------------


def test_realistic_multi_kernel_project(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "img2gray",
        """\
        [general]
        name = "img2gray"
        version = "0.1.0"
        backends = ["cuda", "cpu"]
        python-depends = ["einops >= 0.7", "numpy; python_version >= '3.10'"]

        [general.cuda]
        minver = "11.8"
        maxver = "13.0"

        [general.hub]
        repo-id = "kernels-community/img2gray"
        branch = "v1"

        [torch]
        src = ["torch-ext/torch_binding.cpp", "./torch-ext/torch_binding.h"]
        include = ["."]
        pyext = ["py", ".json"]
        minver = "2.5"
        maxver = "2.10"

        [kernel.img2gray]
        backend = "cuda"
        src = ["csrc/img2gray.cu", "csrc/common.h"]
        depends = ["torch", "cutlass_3_8"]
        include = ["csrc"]
        cxx-flags = ["-O3"]
        cuda-flags = ["--use_fast_math"]
        cuda-capabilities = ["8.0", "9.0a", "10.0f", "12.0", "8.0"]
        cuda-minver = "12.4"

        [kernel.img2gray_cpu]
        backend = "cpu"
        src = ["csrc/img2gray_cpu.cpp"]
        depends = ["torch"]
        """,
    )
    project = load_project(root)

    assert project.root == root.resolve()
    assert project.build_toml == root.resolve() / "build.toml"
    assert project.name == project.package == "img2gray"
    assert project.version == "0.1.0"
    assert project.backends == ("cpu", "cuda")
    assert project.noarch is False
    assert (project.cuda_minver, project.cuda_maxver) == (Version("11.8"), Version("13.0"))
    assert project.python_depends == ("einops>=0.7", 'numpy; python_version >= "3.10"')
    assert project.hub == HubConfig(repo_id="kernels-community/img2gray", branch="v1")
    assert project.package_dir == root.resolve() / "torch-ext" / "img2gray"

    torch = project.torch
    assert torch is not None
    assert torch.src == (Path("torch-ext/torch_binding.cpp"), Path("torch-ext/torch_binding.h"))
    assert torch.include == (Path("."),)
    assert torch.pyext == ("py", "json")
    assert (torch.minver, torch.maxver) == (Version("2.5"), Version("2.10"))

    cuda, cpu = project.kernels  # file order
    assert cuda.id == "img2gray" and cuda.backend == "cuda"
    assert cuda.src == (Path("csrc/img2gray.cu"), Path("csrc/common.h"))
    assert cuda.depends == ("torch", "cutlass_3_8")
    assert cuda.include == (Path("csrc"),)
    assert cuda.cxx_flags == ("-O3",) and cuda.cuda_flags == ("--use_fast_math",)
    assert cuda.cuda_capabilities == parse_all(["8.0", "9.0a", "10.0f", "12.0"])
    assert cuda.cuda_minver == Version("12.4")
    assert cpu.id == "img2gray_cpu" and cpu.backend == "cpu"
    assert cpu.cuda_capabilities == () and cpu.cuda_minver is None
    assert cpu.include == () and cpu.cxx_flags == ()

    assert project.kernels_for(["cuda"]) == (cuda,)
    assert project.kernels_for("cpu") == (cpu,)
    assert project.kernels_for(["cpu", "cuda"]) == (cuda, cpu)
    assert project.kernels_for(["rocm"]) == ()
    with pytest.raises(UsageError, match="cdua"):
        project.kernels_for(["cdua"])


def test_load_by_build_toml_path_and_str(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", VALID)
    by_dir = load_project(str(root))
    by_file = load_project(root / "build.toml")
    assert by_dir == by_file
    assert by_dir.torch is not None and by_dir.torch.pyext == DEFAULT_PYEXT == ("py", "pyi")


def test_minimal_defaults(tmp_path: Path) -> None:
    project = load_project(make_project(tmp_path / "k", VALID))
    assert project.version is None
    assert project.backends == ("cuda",)  # derived from the kernel sections
    assert project.cuda_minver is None and project.cuda_maxver is None
    assert project.python_depends == ()
    assert project.hub is None
    (kernel,) = project.kernels
    assert kernel.depends == () and kernel.cuda_capabilities == ()


def test_older_cuda_minver_style(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k",
        GENERAL
        + 'universal = false\ncuda-minver = "12.1"\ncuda-maxver = "12.8"\n'
        + TORCH
        + CUDA_KERNEL,
    )
    project = load_project(root)
    assert project.cuda_minver == Version("12.1")
    assert project.cuda_maxver == Version("12.8")
    assert project.noarch is False


def test_hyphenated_name_maps_to_package(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k",
        '[general]\nname = "my-kernel"\n' + TORCH + CUDA_KERNEL,
        package="my_kernel",
    )
    project = load_project(root)
    assert project.name == "my-kernel"
    assert project.package == "my_kernel"
    assert project.package_dir.name == "my_kernel"


def test_version_is_normalized(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", GENERAL + 'version = "1.0-RC1"\n' + TORCH + CUDA_KERNEL)
    assert load_project(root).version == "1.0rc1"


def test_noarch_project(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", '[general]\nname = "pure"\n', package="pure", files=())
    project = load_project(root)
    assert project.noarch is True
    assert project.backends == ()
    assert project.kernels == ()
    assert project.torch is None
    assert project.kernels_for(["cuda", "cpu"]) == ()


def test_noarch_variants_keep_backends(tmp_path: Path) -> None:
    # Newer kernel-builder: a pure-Python kernel published as torch-cuda / torch-cpu.
    root = make_project(
        tmp_path / "k",
        '[general]\nname = "pure"\nbackends = ["cuda", "cpu", "cuda"]\n[torch]\npyext = ["py"]\n',
        package="pure",
        files=(),
    )
    project = load_project(root)
    assert project.noarch
    assert project.backends == ("cpu", "cuda")
    assert project.torch is not None and project.torch.src == () and project.torch.pyext == ("py",)


def test_older_universal_flag(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", '[general]\nname = "pure"\nuniversal = true\n', package="pure", files=()
    )
    project = load_project(root)
    assert project.noarch


def test_models_are_frozen(tmp_path: Path) -> None:
    project = load_project(make_project(tmp_path / "k", VALID))
    assert project.torch is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        project.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        project.kernels[0].backend = "cpu"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        project.torch.pyext = ()  # type: ignore[misc]
    assert isinstance(project.kernels, tuple) and isinstance(project.kernels[0].src, tuple)
    # Frozen and made of hashable parts, so usable as a cache key.
    assert hash(project) == hash(load_project(project.root))


def test_source_files(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k",
        GENERAL
        + TORCH
        + '[kernel.img2gray]\nbackend = "cuda"\nsrc = ["csrc/img2gray.cu"]\n'
        + 'include = ["csrc", "csrc/common.h"]\n',
    )
    pkg = root / "torch-ext" / "img2gray"
    (pkg / "layers.py").write_text("", encoding="utf-8")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "data.json").write_text("{}", encoding="utf-8")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "layers.cpython-311.pyc").write_bytes(b"")
    (root / "csrc" / "unlisted.cu").write_text("", encoding="utf-8")

    project = load_project(root)
    files = project.source_files()
    base = root.resolve()
    assert files == tuple(
        sorted(
            base / rel
            for rel in (
                "build.toml",
                "csrc/img2gray.cu",
                "csrc/common.h",
                "torch-ext/torch_binding.cpp",
                "torch-ext/torch_binding.h",
                "torch-ext/img2gray/__init__.py",
                "torch-ext/img2gray/layers.py",
                "torch-ext/img2gray/sub/data.json",
            )
        )
    )
    assert all(p.is_absolute() for p in files)


# what vim, emacs, JetBrains IDEs and kate leave beside a file while it is edited
EDITOR_FILES = (
    ".__init__.py.swp", ".__init__.py.swx", "4913", "__init__.py~", "#__init__.py#",
    "__init__.py___jb_tmp___", "__init__.py___jb_old___", ".__init__.py.kate-swp",
)  # fmt: skip


def test_editors_temporary_files_are_no_part_of_the_build(tmp_path: Path) -> None:
    """A release built while the package is open in an editor is the build without it: the same
    build id, so the same ops namespace and shared object's name."""
    root = make_project(tmp_path / "k", VALID)
    project = load_project(root)
    variant = Variant.parse("torch213-cxx11-cpu-x86_64-linux")
    files, build = project.source_files(), build_id(project, variant)
    pkg = root / "torch-ext" / "img2gray"
    for name in EDITOR_FILES:
        (pkg / name).write_text("noise", encoding="utf-8")
    (pkg / ".#__init__.py").symlink_to("me@host.4242:1700000000")  # emacs's lock: dangling
    assert project.source_files() == files
    assert build_id(project, variant) == build
    assert not any(map(editor_file, ("__init__.py", "a.swp", "x.cu", "49130.cu", "a~b.h", "#a")))
    # nor is any of them in the wheel: emacs's lock is a regular .py file where links cannot be
    # made (a Windows drive under WSL), and went into the wheel a build id had left it out of
    (pkg / ".#__init__.py").unlink()
    (pkg / ".#__init__.py").write_text("me@host.4242:1700000000", encoding="utf-8")
    assert build_id(project, variant) == build
    from kernelwheel.builder.steps import package_files

    assert sorted(package_files(project)) == ["img2gray/__init__.py"]


# -- locating and parsing ---------------------------------------------------------------------


def test_missing_build_toml_names_directory(tmp_path: Path) -> None:
    root = make_project(tmp_path / "empty", None)
    err = load_error(root)
    assert err.key is None and err.file is not None and err.file.name == "build.toml"
    assert str(root.resolve()) in str(err)
    assert "fix:" in str(err)


def test_missing_directory(tmp_path: Path) -> None:
    err = load_error(tmp_path / "nope")
    assert "no such directory or file" in str(err) and str(tmp_path / "nope") in str(err)
    assert "fix:" in str(err)


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", '[general]\nname = "img2gray"\nversion = 0.1.0\n')
    err = load_error(root)
    assert_error(err, None, "invalid TOML", "line 3", "column")


def test_non_utf8_build_toml(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", None)
    (root / "build.toml").write_bytes(b'[general]\nname = "\xff"\n')
    assert_error(load_error(root), None, "UTF-8")


# -- unknown keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "suggestion"),
    [
        (
            VALID + "cuda_capabilities = ['8.0']\n",
            "kernel.img2gray.cuda_capabilities",
            "did you mean 'cuda-capabilities'?",
        ),
        (
            VALID + "cuda-capabilites = ['8.0']\n",
            "kernel.img2gray.cuda-capabilites",
            "did you mean 'cuda-capabilities'?",
        ),
        (
            GENERAL + 'python_depends = ["x"]\n' + TORCH + CUDA_KERNEL,
            "general.python_depends",
            "did you mean 'python-depends'?",
        ),
        (
            GENERAL + 'backend = ["cuda"]\n' + TORCH + CUDA_KERNEL,
            "general.backend",
            "did you mean 'backends'?",
        ),
        (
            GENERAL + 'cuda-capabilities = ["8.0"]\n' + TORCH + CUDA_KERNEL,
            "general.cuda-capabilities",
            "belongs in [kernel.<id>]",
        ),
        (
            GENERAL + '[general.cuda]\nminversion = "12.0"\n' + TORCH + CUDA_KERNEL,
            "general.cuda.minversion",
            "did you mean 'minver'?",
        ),
        (
            GENERAL + '[general.hub]\nrepo_id = "a/b"\n' + TORCH + CUDA_KERNEL,
            "general.hub.repo_id",
            "did you mean 'repo-id'?",
        ),
        (
            GENERAL + TORCH + 'py-ext = ["py"]\n' + CUDA_KERNEL,
            "torch.py-ext",
            "did you mean 'pyext'?",
        ),
        (
            GENERAL + TORCH + '[kernels.img2gray]\nbackend = "cuda"\n',
            "kernels",
            "did you mean 'kernel'?",
        ),
        (GENERAL + '[hub]\nrepo-id = "a/b"\n', "hub", "belongs in [general]"),
        (VALID + 'colour = "blue"\n', "kernel.img2gray.colour", "backend, src"),
    ],
)
def test_unknown_keys_get_suggestions(tmp_path: Path, toml: str, key: str, suggestion: str) -> None:
    err = load_error(make_project(tmp_path / "k", toml))
    assert_error(err, key, "unknown key", suggestion)


# -- required keys and types ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        ("", "general.name", "[general]"),
        ('[general]\nversion = "1.0"\n', "general.name", 'name = "'),
        (  # (the older forms' kernels without backend are CUDA: test_first_format.py)
            GENERAL + 'backends = ["cuda"]\n' + TORCH + '[kernel.img2gray]\nsrc = ["csrc/x.cu"]\n',
            "kernel.img2gray.backend",
            "backend = ",
        ),
        (
            GENERAL + TORCH + '[kernel.img2gray]\nbackend = "cuda"\n',
            "kernel.img2gray.src",
            "src = [",
        ),
    ],
)
def test_missing_required_keys(tmp_path: Path, toml: str, key: str, fragment: str) -> None:
    err = load_error(make_project(tmp_path / "k", toml))
    assert_error(err, key, "missing required key", fragment)


@pytest.mark.parametrize(
    ("toml", "key", "fragments"),
    [
        (
            "[general]\nname = 3\n",
            "general.name",
            ("expected a string, got an integer", 'name = "3"'),
        ),
        (GENERAL + 'universal = "yes"\n', "general.universal", ("expected a boolean", "true")),
        (
            GENERAL + 'backends = "cuda"\n' + TORCH + CUDA_KERNEL,
            "general.backends",
            ("expected an array of strings, got a string", 'backends = ["cuda"]'),
        ),
        (
            GENERAL + TORCH + CUDA_KERNEL + "cuda-capabilities = [8.0]\n",
            "kernel.img2gray.cuda-capabilities",
            ("item 0 is a float", "quote"),
        ),
        (
            GENERAL + TORCH + CUDA_KERNEL + "depends = ['torch', '']\n",
            "kernel.img2gray.depends",
            ("empty string",),
        ),
        (
            GENERAL + "cuda-minver = 12.4\n" + TORCH + CUDA_KERNEL,
            "general.cuda-minver",
            ("expected a string, got a float", 'cuda-minver = "12.4"'),
        ),
        ('general = "x"\n', "general", ("expected a table",)),
        (GENERAL + "cuda = 12\n", "general.cuda", ("expected a table",)),
        (GENERAL + 'torch = ["x"]\n', "general.torch", ("unknown key", "belongs in the top level")),
        ('torch = "x"\n' + GENERAL, "torch", ("expected a table",)),
        (GENERAL + "[[kernel]]\n", "kernel", ("expected a table",)),
        ('kernel.img2gray = "cuda"\n' + GENERAL + TORCH, "kernel.img2gray", ("expected a table",)),
        (
            GENERAL + TORCH + '[kernel]\nbackend = "cuda"\n',
            "kernel.backend",
            ("[kernel.<id>]", "[kernel.img2gray]"),
        ),
        (
            GENERAL + TORCH + '[kernel."bad id"]\nbackend = "cuda"\n',
            "kernel.bad id",
            ("invalid kernel id",),
        ),
    ],
)
def test_wrong_types(tmp_path: Path, toml: str, key: str, fragments: tuple[str, ...]) -> None:
    assert_error(load_error(make_project(tmp_path / "k", toml)), key, *fragments)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("1kernel", "not give a valid Python package name"),
        ("my.kernel", "not give a valid Python package name"),
        ("my kernel", "not give a valid Python package name"),
        ("import", "keyword"),
        ("café", "ASCII"),
    ],
)
def test_invalid_names(tmp_path: Path, name: str, fragment: str) -> None:
    err = load_error(make_project(tmp_path / "k", f'[general]\nname = "{name}"\n', files=()))
    assert_error(err, "general.name", fragment)


# -- sources ----------------------------------------------------------------------------------


def test_missing_kernel_source(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL.replace("img2gray.cu", "missing.cu")
    )
    err = load_error(root)
    assert_error(err, "kernel.img2gray.src", "'csrc/missing.cu' does not exist")
    # deleted, as a header split away in a refactor: removing the entry is a fix too
    assert err.hint is not None and "remove 'csrc/missing.cu' from kernel.img2gray.src" in err.hint


def test_a_test_file_or_id_given_as_the_project_says_where_tests_go(tmp_path: Path) -> None:
    # `kernelwheel test tests/test_k.py` (pytest's habit, no --): the test file was read as the
    # project's build.toml, "invalid TOML: Expected '=' after a key"
    root = make_project(tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL)
    test = root / "tests" / "test_k.py"
    test.parent.mkdir()
    test.write_text("import torch\n\ndef test_one():\n    pass\n")
    for given in (test, Path(f"{test}::test_one"), root / "tests"):
        with pytest.raises(ProjectError) as caught:
            load_project(given)
        assert "TOML" not in str(caught.value), given
        assert caught.value.hint is not None and "kernelwheel test -- tests/" in caught.value.hint
    assert load_project(root / "build.toml").root == root.resolve()


def test_missing_source_suggests_close_name(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL.replace("img2gray.cu", "img2grey.cu")
    )
    assert_error(load_error(root), "kernel.img2gray.src", "did you mean 'csrc/img2gray.cu'?")


def test_missing_source_suggests_other_extension_only_for_same_stem(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL, files=DEFAULT_FILES[1:]
    )  # csrc/img2gray.cu not written yet; csrc/img2gray_cpu.cpp is no suggestion
    err = load_error(root)
    assert_error(err, "kernel.img2gray.src", "'csrc/img2gray.cu' does not exist")
    assert "did you mean" not in str(err)
    (root / "csrc" / "img2gray.cpp").write_text("", encoding="utf-8")
    assert_error(load_error(root), "kernel.img2gray.src", "did you mean 'csrc/img2gray.cpp'?")


def test_a_renamed_source_is_suggested_not_the_header_listed_beside_it(tmp_path: Path) -> None:
    # kernels-community rotary's rotary-cpu/rotary_cpu.cpp renamed to rotary_cpu_impl.cpp: the
    # fix offered was 'rotary-cpu/rotary_cpu.hpp', the header the same src already lists
    kernel = '[kernel.img2gray]\nbackend = "cpu"\nsrc = ["csrc/k.cpp", "csrc/k.hpp"]\n'
    files = (
        "csrc/k_impl.cpp",
        "csrc/k.hpp",
        "torch-ext/torch_binding.cpp",
        "torch-ext/torch_binding.h",
    )
    root = make_project(tmp_path / "k", GENERAL + TORCH + kernel, files=files)
    assert_error(load_error(root), "kernel.img2gray.src", "did you mean 'csrc/k_impl.cpp'?")
    (root / "csrc" / "k_impl.cpp").unlink()  # deleted, not renamed: the listed header is no fix
    err = load_error(root)
    assert (
        "did you mean" not in str(err)
        and err.hint is not None
        and "remove 'csrc/k.cpp'" in err.hint
    )


def test_missing_torch_source(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL, files=("csrc/img2gray.cu",))
    assert_error(load_error(root), "torch.src", "'torch-ext/torch_binding.cpp' does not exist")


def test_missing_include_dir(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", VALID + 'include = ["third_party/cutlass"]\n')
    assert_error(load_error(root), "kernel.img2gray.include", "'third_party/cutlass'")


def test_glob_is_not_expanded(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL.replace("img2gray.cu", "*.cu")
    )
    assert_error(load_error(root), "kernel.img2gray.src", "does not exist", "list each file")


def test_directory_as_source(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL.replace("img2gray.cu", ""))
    assert_error(load_error(root), "kernel.img2gray.src", "is not a file", "include")


@pytest.mark.parametrize("entry", ["../outside.cu", "csrc/../../outside.cu", ".."])
def test_source_escaping_root(tmp_path: Path, entry: str) -> None:
    (tmp_path / "outside.cu").write_text("", encoding="utf-8")
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL.replace("csrc/img2gray.cu", entry)
    )
    assert_error(load_error(root), "kernel.img2gray.src", "outside the project root")


def test_absolute_source(tmp_path: Path) -> None:
    outside = tmp_path / "outside.cu"
    outside.write_text("", encoding="utf-8")
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + CUDA_KERNEL.replace("csrc/img2gray.cu", str(outside))
    )
    assert_error(load_error(root), "kernel.img2gray.src", "absolute path", "relative")


def test_empty_kernel_src(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", GENERAL + TORCH + '[kernel.img2gray]\nbackend = "cuda"\nsrc = []\n'
    )
    assert_error(load_error(root), "kernel.img2gray.src", "lists no sources")


def test_kernels_need_torch_section(tmp_path: Path) -> None:
    err = load_error(make_project(tmp_path / "k", GENERAL + CUDA_KERNEL))
    assert_error(err, "torch.src", "needs a [torch] section with src", "torch_binding.cpp")


def test_kernels_need_torch_src(tmp_path: Path) -> None:
    err = load_error(
        make_project(tmp_path / "k", GENERAL + '[torch]\npyext = ["py"]\n' + CUDA_KERNEL)
    )
    assert_error(err, "torch.src", "[torch] section with src")


def test_missing_package_init(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", VALID, package=None)
    err = load_error(root)
    assert_error(err, "general.name", "torch-ext/img2gray/__init__.py does not exist", "create")


def test_missing_package_init_suggests_existing_package(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", VALID, package="img2grey")
    err = load_error(root)
    assert_error(err, "general.name", "img2grey")


def test_missing_package_init_for_hyphenated_name(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", '[general]\nname = "my-kernel"\n', package="my-kernel")
    assert_error(load_error(root), "general.name", "torch-ext/my_kernel/__init__.py")


# -- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "fragments"),
    [
        (
            GENERAL + 'backends = ["cuda", "gpu"]\n',
            "general.backends",
            ("unknown backend 'gpu'", "cann, cpu, cuda, metal, neuron, rocm, tpu, xpu"),
        ),
        (GENERAL + "backends = []\n", "general.backends", ("lists no backends",)),
        (
            GENERAL + TORCH + '[kernel.k]\nbackend = "CUDA"\nsrc = ["csrc/img2gray.cu"]\n',
            "kernel.k.backend",
            ("unknown backend 'CUDA'", "did you mean 'cuda'?"),
        ),
        (
            GENERAL + TORCH + '[kernel.k]\nbackend = "hip"\nsrc = ["csrc/img2gray.cu"]\n',
            "kernel.k.backend",
            ("valid backends: cpu, cuda, metal, rocm, xpu",),
        ),
    ],
)
def test_invalid_backends(tmp_path: Path, toml: str, key: str, fragments: tuple[str, ...]) -> None:
    assert_error(load_error(make_project(tmp_path / "k", toml)), key, *fragments)


@pytest.mark.parametrize(
    ("capability", "fragment"),
    [
        ("80", 'write it as "8.0"'),
        ("sm_80", 'write it as "8.0"'),
        ("sm_90a", 'write it as "9.0a"'),
        ("120", 'write it as "12.0"'),
        ("9", '"X.Y"'),
        ("0.5", '"X.Y"'),
        ("9.0+ptx", 'write it as "9.0+PTX"'),
        ("9.O", 'write it as "9.0"'),  # a letter O: the hint showed only the form
        ("9,0", 'write it as "9.0"'),
        ("O.9", '"X.Y"'),
        ("9.0a+PTX+PTX", '"X.Y"'),
        ("8.0b", '"X.Y"'),
        ("8.", '"X.Y"'),
    ],
)
def test_invalid_capabilities(tmp_path: Path, capability: str, fragment: str) -> None:
    root = make_project(tmp_path / "k", VALID + f'cuda-capabilities = ["8.0", "{capability}"]\n')
    err = load_error(root)
    assert_error(err, "kernel.img2gray.cuda-capabilities", repr(capability), fragment)


def test_empty_capabilities(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", VALID + "cuda-capabilities = []\n")
    assert_error(load_error(root), "kernel.img2gray.cuda-capabilities", "lists no capabilities")


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        (GENERAL + 'cuda-minver = "twelve"\n', "general.cuda-minver", "not a valid version"),
        (
            GENERAL + 'cuda-minver = "12.8"\ncuda-maxver = "12.4"\n',
            "general.cuda-minver",
            "greater than maximum",
        ),
        (
            GENERAL + '[general.cuda]\nminver = "13.0"\nmaxver = "12.9"\n',
            "general.cuda.minver",
            "greater than maximum",
        ),
        (GENERAL + '[general.cuda]\nmaxver = "x"\n', "general.cuda.maxver", "not a valid version"),
        (
            GENERAL + '[torch]\nminver = "2.10"\nmaxver = "2.9"\n',
            "torch.minver",
            "greater than maximum",
        ),
        (GENERAL + '[torch]\nmaxver = "2.x"\n', "torch.maxver", "not a valid version"),
        (VALID + 'cuda-minver = "latest"\n', "kernel.img2gray.cuda-minver", "not a valid version"),
        (GENERAL + 'version = "one"\n', "general.version", "PEP 440"),
        (GENERAL + 'version = "1.0+cu128"\n', "general.version", "local version"),
    ],
)
def test_bad_versions(tmp_path: Path, toml: str, key: str, fragment: str) -> None:
    assert_error(load_error(make_project(tmp_path / "k", toml)), key, fragment)


def test_both_cuda_bound_styles_is_an_error(tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "k", GENERAL + 'cuda-minver = "12.0"\n[general.cuda]\nmaxver = "12.8"\n'
    )
    assert_error(load_error(root), "general.cuda", "both", "keep one form")


@pytest.mark.parametrize("requirement", ["einops >=", "not a requirement!", "numpy; python >"])
def test_invalid_python_depends(tmp_path: Path, requirement: str) -> None:
    root = make_project(tmp_path / "k", GENERAL + f"python-depends = ['{requirement}']\n")
    err = load_error(root)
    assert_error(err, "general.python-depends", repr(requirement), "PEP 508")
    assert str(err).count("\n") == 1  # one message line, one fix line


def test_invalid_hub_repo_id(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", GENERAL + '[general.hub]\nrepo-id = "img2gray"\n')
    assert_error(load_error(root), "general.hub.repo-id", "<owner>/<name>")


def test_invalid_pyext(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", GENERAL + '[torch]\npyext = ["*.py"]\n')
    assert_error(load_error(root), "torch.pyext", "not a file suffix")


def test_universal_with_kernels(tmp_path: Path) -> None:
    root = make_project(tmp_path / "k", GENERAL + "universal = true\n" + TORCH + CUDA_KERNEL)
    assert_error(load_error(root), "general.universal", "[kernel.*]")


def test_error_is_a_kernelwheel_error_with_exit_code(tmp_path: Path) -> None:
    err = load_error(make_project(tmp_path / "k", ""))
    assert isinstance(err, ProjectError) and err.exit_code == 3


def test_public_types() -> None:
    assert [f.name for f in dataclasses.fields(KernelProject)] == [
        "root",
        "build_toml",
        "name",
        "package",
        "version",
        "backends",
        "cuda_minver",
        "cuda_maxver",
        "python_depends",
        "hub",
        "torch",
        "kernels",
        "edition",
        "api_version",
        "license",
        "upstream",
        "source",
        "kernel_depends",
        "backend_depends",
        "framework",
        "torch_noarch",
        "tvm_ffi",
    ]


# -- the project a folder lies in (find_project_root) -------------------------------------------


def test_the_project_is_found_from_any_of_its_subfolders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "img2gray", VALID)
    deep = root / "torch-ext" / "img2gray" / "sub"
    deep.mkdir(parents=True)
    assert find_project_root(deep) == root
    assert find_project_root(root) == root
    monkeypatch.chdir(root / "csrc")
    assert find_project_root() == root  # the current folder
    assert find_project_root(Path("..") / "torch-ext") == root  # relative to it
    assert load_project(find_project_root()).name == "img2gray"


def test_the_search_stops_at_the_git_repository_root(tmp_path: Path) -> None:
    # a build.toml around the checkout is another project's, never this checkout's
    make_project(tmp_path, VALID)
    repo = tmp_path / "checkout"
    (repo / ".git").mkdir(parents=True)
    start = repo / "docs" / "notes"
    start.mkdir(parents=True)
    with pytest.raises(ProjectError) as info:
        find_project_root(start)
    message = str(info.value)
    assert (
        f"no build.toml found in {start} or a folder above it, up to {repo}, the root of its "
        "git repository"
    ) in message
    assert "fix: run this in a kernel project" in message
    with pytest.raises(ProjectError, match=rf"found in {repo}, the root of its git repository"):
        find_project_root(repo)  # the first folder is the last: named once
    # a project in a subfolder of the checkout is found from below it
    inner = make_project(repo / "kernels" / "img2gray", VALID)
    (inner / "csrc" / "x").mkdir()
    assert find_project_root(inner / "csrc" / "x") == inner


def test_from_a_monorepos_root_the_projects_below_are_named(tmp_path: Path) -> None:
    # `kernelwheel test` at the root of a checkout holding kernels/einops and kernels/relu:
    # "no build.toml found", and which folders hold one was left to the author
    repo = tmp_path / "mono"
    (repo / ".git").mkdir(parents=True)
    for name in ("relu", "einops"):
        make_project(repo / "kernels" / name, VALID)
    make_project(repo / ".cache" / "old", VALID)  # a hidden folder's copy is none
    with pytest.raises(ProjectError) as info:
        find_project_root(repo)
    hint = info.value.hint or ""
    assert hint.endswith("or pass the project's folder: kernels/einops, kernels/relu"), hint
    with pytest.raises(ProjectError) as info:
        find_project_root(repo / "kernels")
    assert (info.value.hint or "").endswith("project's folder: einops, relu")


def test_outside_any_project_and_repository_the_search_ends_at_the_filesystem_root(
    tmp_path: Path,
) -> None:
    start = tmp_path / "a" / "b"
    start.mkdir(parents=True)
    if any((p / ".git").exists() or (p / "build.toml").exists() for p in start.parents):
        pytest.skip(f"{tmp_path} lies in a git repository or a kernel project")
    with pytest.raises(ProjectError, match=rf"in {start} or a folder above it, up to /, the "):
        find_project_root(start)
