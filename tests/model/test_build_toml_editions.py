"""build.toml editions 5, 4, 3 and the older forms: every key of the current schema is read, and
each edition's own rules hold. The projects are written here (small, made up)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.version import Version

from kernelwheel._toml import Located
from kernelwheel.errors import ProjectError
from kernelwheel.model.capability import parse_all
from kernelwheel.model.project import (
    Framework,
    KernelDependency,
    load_project,
)


def spdx_expression(license: str | None) -> str | None:
    """``license`` as a canonical SPDX expression, or None when it is not one (kernel-builder
    accepts any string; the Hub's ``other`` is common)."""
    if not license:
        return None
    try:
        return str(canonicalize_license_expression(license))
    except InvalidLicenseExpression:
        return None


FILES = (
    "torch-ext/torch_binding.cpp",
    "torch-ext/torch_binding.h",
    "csrc/op.cu",
    "csrc/op_cpu.cpp",
    "csrc/op_hip.cu",
    "csrc/op_sycl.cpp",
    "tvm-ffi-ext/binding.cpp",
)

V5 = """\
[general]
name = "fused-op"
version = 2
edition = 5
license = "apache-2.0"
upstream = "git+https://example.org/team/fused-op.git"
source = "git@example.org:team/fused-op-kernels"
backends = ["cpu", "cuda", "rocm", "xpu", "neuron", "tpu"]
python-depends = ["einops", "numpy>=1.26"]
kernel-depends = [{ repo-id = "kernels-community/relu", version = 1 }]

[general.cuda]
minver = "12.6"
maxver = "13.0"
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/helper", revision = "abc123" }]

[general.xpu]
python-depends = ["onednn"]

[general.neuron]
python-depends = ["nki"]

[general.tpu]
python-depends = ["einops"]

[general.hub]
repo-id = "org/fused-op"
branch = "v2"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
cxx-flags = ["-DFUSED=1"]
pyext = ["py", "json"]
minver = "2.10"

[torch.stable-abi]
cuda = "2.10"
rocm = "2.11"
metal = "2.10"

[kernel.op_cuda]
backend = "cuda"
depends = ["torch", "cutlass_3_8"]
src = ["csrc/op.cu"]
cuda-capabilities = ["8.0", "9.0a", "10.0f", "12.0+PTX"]
cuda-flags = ["--use_fast_math"]
cuda-minver = "12.8"

[kernel.op_cpu]
backend = "cpu"
depends = ["torch"]
src = ["csrc/op_cpu.cpp"]
cxx-flags = ["-mavx2"]

[kernel.op_rocm]
backend = "rocm"
depends = ["torch"]
src = ["csrc/op_hip.cu"]
rocm-archs = ["gfx90a", "gfx942"]
hip-flags = ["-O3"]

[kernel.op_xpu]
backend = "xpu"
depends = ["torch", "sycl_tla"]
src = ["csrc/op_sycl.cpp"]
sycl-flags = ["-fsycl"]
"""

V4 = """\
[general]
name = "fused-op"
version = 1
license = "MIT"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]
stable-abi = "2.10"

[kernel.op_cuda]
backend = "cuda"
depends = ["torch"]
src = ["csrc/op.cu"]
"""


def write(root: Path, build_toml: str, package: str = "fused_op", ext: str = "torch-ext") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "build.toml").write_text(textwrap.dedent(build_toml), encoding="utf-8")
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"// {rel}\n", encoding="utf-8")
    pkg = root / ext / package
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("from ._ops import ops\n", encoding="utf-8")
    return root


def error(tmp_path: Path, build_toml: str, **kw: str) -> str:
    with pytest.raises(ProjectError) as info:
        load_project(write(tmp_path / "k", build_toml, **kw))
    return str(info.value)


def test_edition_5_reads_every_key(tmp_path: Path) -> None:
    p = load_project(write(tmp_path / "k", V5))
    assert (p.edition, p.api_version, p.version) == (5, 2, None)
    assert p.framework is Framework.TORCH and not p.noarch
    assert p.license == "apache-2.0" and spdx_expression(p.license) == "Apache-2.0"
    assert p.upstream == "git+https://example.org/team/fused-op.git"
    assert p.source == "git@example.org:team/fused-op-kernels"
    assert p.backends == ("cpu", "cuda", "neuron", "rocm", "tpu", "xpu")
    assert p.python_depends == ("einops", "numpy>=1.26")
    # Backend names map to PyPI names; a backend's builds add its own to the general ones.
    assert p.python_depends_for("cuda") == ("einops", "numpy>=1.26", "nvidia-cutlass-dsl")
    assert p.python_depends_for("xpu")[-1] == "onednn-devel"
    assert p.python_depends_for("neuron")[-1] == "nki"
    assert p.python_depends_for("cpu") == p.python_depends
    assert p.kernel_depends == (KernelDependency("kernels-community/relu", 1, None),)
    assert p.kernel_depends_for("cuda")[-1] == KernelDependency("org/helper", None, "abc123")
    assert (p.cuda_minver, p.cuda_maxver) == (Version("12.6"), Version("13.0"))
    assert p.hub is not None and (p.hub.repo_id, p.hub.branch) == ("org/fused-op", "v2")
    assert p.torch is not None and p.torch.cxx_flags == ("-DFUSED=1",)
    assert p.torch.pyext == ("py", "json")
    # metal is in the table but not a backend of the project: ignored, as kernel-builder does.
    assert p.torch.stable_abi == (("cuda", Version("2.10")), ("rocm", Version("2.11")))
    assert p.stable_abi_for("cuda") == Version("2.10") and p.stable_abi_for("cpu") is None
    kernels = {k.id: k for k in p.kernels}
    assert kernels["op_cuda"].cuda_capabilities == parse_all(["8.0", "9.0a", "10.0f", "12.0+PTX"])
    assert kernels["op_cuda"].depends == ("torch", "cutlass_3_8")
    assert kernels["op_cuda"].cuda_minver == Version("12.8")
    assert kernels["op_rocm"].rocm_archs == ("gfx90a", "gfx942")
    assert kernels["op_rocm"].hip_flags == ("-O3",)
    assert kernels["op_xpu"].sycl_flags == ("-fsycl",)
    assert [k.id for k in p.kernels_for("cuda")] == ["op_cuda"]


def test_edition_4_stable_abi_string_covers_every_backend(tmp_path: Path) -> None:
    p = load_project(write(tmp_path / "k", V4))
    assert (p.edition, p.api_version, p.license) == (4, 1, "MIT")
    assert p.stable_abi_for("cuda") == p.stable_abi_for("cpu") == Version("2.10")


def test_edition_4_noarch_section(tmp_path: Path) -> None:
    toml = """\
    [general]
    name = "pure"
    version = 1
    license = "MIT"
    backends = ["cuda", "rocm"]

    [torch-noarch]
    pyext = ["py", "json"]
    cuda_capabilities = ["9.0"]
    rocm-archs = ["gfx942"]
    """
    p = load_project(write(tmp_path / "k", toml, package="pure"))
    assert p.edition == 4 and p.noarch and p.torch is None
    assert p.torch_noarch is not None
    assert p.torch_noarch.pyext == ("py", "json") and p.pyext == ("py", "json")
    assert p.torch_noarch.cuda_capabilities == parse_all(["9.0"])
    assert p.torch_noarch.rocm_archs == ("gfx942",)


def test_edition_3_without_framework_is_noarch(tmp_path: Path) -> None:
    toml = '[general]\nname = "pure"\nbackends = ["cuda"]\nversion = 1\n'
    p = load_project(write(tmp_path / "k", toml, package="pure"))
    assert (p.edition, p.framework, p.api_version, p.license) == (
        3,
        Framework.TORCH_NOARCH,
        1,
        None,
    )


def test_tvm_ffi_project_uses_its_own_folder(tmp_path: Path) -> None:
    toml = """\
    [general]
    name = "fused-op"
    version = 1
    edition = 5
    license = "MIT"
    backends = ["cuda"]
    python-depends = ["tvm-ffi"]

    [tvm-ffi]
    src = ["tvm-ffi-ext/binding.cpp"]
    cxx-flags = ["-O2"]

    [kernel.op]
    backend = "cuda"
    depends = []
    src = ["csrc/op.cu"]
    """
    p = load_project(write(tmp_path / "k", toml, ext="tvm-ffi-ext"))
    assert p.framework is Framework.TVM_FFI and p.torch is None
    assert p.tvm_ffi is not None and p.tvm_ffi.cxx_flags == ("-O2",)
    assert p.package_dir == p.root / "tvm-ffi-ext" / "fused_op"
    assert p.python_depends == ("apache-tvm-ffi",)
    assert p.root / "tvm-ffi-ext" / "binding.cpp" in p.source_files()


def test_older_forms_keep_their_string_version(tmp_path: Path) -> None:
    toml = V4.replace("version = 1", 'version = "0.3.1"').replace('stable-abi = "2.10"\n', "")
    p = load_project(write(tmp_path / "k", toml))
    assert (p.edition, p.version, p.api_version) == (2, "0.3.1", None)


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (("edition = 5", "edition = 4"), ("edition 4 is not a build.toml edition", "edition = 5")),
        (('license = "apache-2.0"\n', ""), ("general.license: missing required key", "SPDX")),
        (("version = 2\n", ""), ("general.version: missing required key", "API major")),
        (("version = 2", 'version = "2.1.0"'), ("expected an integer", "VERSION file")),
        (("version = 2", "version = -1"), ("at least 0",)),
        (('name = "fused-op"', 'name = "Fused_Op"'), ("uppercase", 'name = "fused-op"')),
        (('name = "fused-op"', 'name = "fused_op"'), ("'_'", 'name = "fused-op"')),
        (('name = "fused-op"', 'name = "fused-op-"'), ("end with a letter or digit",)),
        (('name = "fused-op"', 'name = "9op"'), ("start with a letter", 'name = "op"')),
        (("[general.tpu]", "[general.metal]"), ("general.metal", "unknown key")),
        (('cuda = "2.10"', 'cuda = "2.1"'), ("not a stable-ABI torch version", '"2.9" or later')),
        (('cuda = "2.10"', 'cuda = "yes"'), ("'yes' is not a stable-ABI", '"2.9" or later')),
        (
            (
                V5[V5.index("[torch.stable-abi]") : V5.index("\n\n[kernel.op_cuda]")],
                "stable-abi = true",
            ),
            ("expected a torch version string or a table, got a boolean", 'stable-abi = "2.10"'),
        ),
        (('cuda = "2.10"', 'gpu = "2.10"'), ("unknown backend 'gpu'",)),
        (('hip-flags = ["-O3"]', 'cuda-flags = ["-O3"]'), ("backend = 'cuda' kernels",)),
        (('"gfx90a", "gfx942"', '"gfx90a", "sm_90"'), ("invalid ROCm arch 'sm_90'", "gfx names")),
        (("version = 1 }", "version = 1, revision = 'x' }"), ("exactly one of version",)),
        ((", version = 1 }", " }"), ("exactly one of version",)),
        (('repo-id = "kernels-community/relu"', 'repo-id = "relu"'), ("not a Hub repository",)),
        (('"numpy>=1.26"', '"numpy >>> 1"'), ("'numpy >>> 1'", "PEP 508")),
        (('["nvidia-cutlass-dsl"]', '["nki"]'), ("'nki' is a neuron name", "[general.neuron]")),
        (('["einops", "numpy', '["einopz", "numpy'), ("did you mean 'einops'?",)),
        (('upstream = "git+https', 'upstream = "ftp'), ("not a git URL",)),
        (
            ('depends = ["torch"]\nsrc = ["csrc/op_cpu.cpp"]', 'src = ["csrc/op_cpu.cpp"]'),
            ("kernel.op_cpu.depends: missing required key", 'depends = ["torch"]'),
        ),
        (('backend = "cpu"', 'backend = "tpu"'), ("unknown backend 'tpu'", "cpu, cuda, metal")),
        (('backend = "cpu"', 'bakend = "cpu"'), ("op_cpu.bakend: unknown key", "mean 'backend'?")),
        (('"12.0+PTX"', '"12.0+ptx"'), ("invalid CUDA capability", 'write it as "12.0+PTX"')),
    ],
)
def test_edition_5_errors(
    tmp_path: Path, edit: tuple[str, str], fragments: tuple[str, ...]
) -> None:
    assert edit[0] in V5
    text = error(tmp_path, V5.replace(edit[0], edit[1], 1))
    assert "build.toml" in text
    for fragment in fragments:
        assert fragment in text, (fragment, text)


def test_one_framework_section(tmp_path: Path) -> None:
    text = error(tmp_path, V5 + '\n[torch-noarch]\npyext = ["py"]\n')
    assert "a project has one framework" in text and "torch-noarch" in text
    no_framework = V4.split("[torch]")[0]
    assert "no framework section" in error(
        tmp_path, no_framework.replace("[general]", "[general]\nedition = 5")
    )


def test_noarch_with_kernels_is_refused(tmp_path: Path) -> None:
    toml = V4.replace(
        '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\nstable-abi = "2.10"', "[torch-noarch]"
    )
    text = error(tmp_path, toml)
    assert "kernel.op_cuda" in text and "Python-only" in text


@pytest.mark.parametrize(
    ("build_toml", "fragments"),
    [
        # An edition-5 key in an edition-4 file says which edition to declare.
        (
            V4 + "[general.tpu]\npython-depends = []\n",
            ("general.tpu", "needs edition 5"),
        ),
        (
            V4.replace('stable-abi = "2.10"', 'stable-abi = { cuda = "2.10" }'),
            (
                "torch.stable-abi",
                "needs\nedition = 5",
            ),
        ),
        # The older forms are told how to move on.
        (
            V4.replace("version = 1", 'version = "1.0.0"')
            .replace('stable-abi = "2.10"\n', "")
            .replace("[torch]", "[tvm-ffi]"),
            ("tvm-ffi", "declare edition = 5"),
        ),
    ],
)
def test_keys_of_other_editions(
    tmp_path: Path, build_toml: str, fragments: tuple[str, ...]
) -> None:
    text = error(tmp_path, build_toml).replace("\n  fix: ", " ")
    for fragment in fragments:
        assert " ".join(fragment.split()) in " ".join(text.split()), (fragment, text)


def test_located_reader_names_file_key_and_fix(tmp_path: Path) -> None:
    table = Located({"jobs": "4", "sub": {"nmae": "x"}}, file="f.toml", prefix="tool.kw")
    with pytest.raises(ProjectError, match=r"f\.toml: tool\.kw\.jobs: expected an integer"):
        table.integer("jobs", hint="write jobs = 4")
    sub = table.table("sub")
    assert sub is not None and sub.prefix == "tool.kw.sub"
    with pytest.raises(ProjectError, match="did you mean 'name'"):
        sub.check_keys(("name",))
    assert table.string("missing") is None


def test_real_names_of_other_licenses_are_kept(tmp_path: Path) -> None:
    p = load_project(write(tmp_path / "k", V4.replace('"MIT"', '"other"')))
    assert p.license == "other" and spdx_expression(p.license) is None
