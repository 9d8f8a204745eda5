"""Build Hub-layout kernel repos as real git repositories, the way the Hub holds them.

Binaries are committed as Git LFS pointers with the objects in ``.git/lfs/objects`` (what a clone
with git-lfs has), tags ``vX.Y.Z`` and branches ``vN`` as legacy and current repos use them. No
git-lfs install is needed: pointers are written directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .sofiles import build_extension, fake_macho, fake_pe

LFS_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")

# The seed's 13 variants (docs/to-wheel.md, side by side with kernels 0.11.3): torch 2.6/2.7 x
# CUDA 11.8-12.8 x cxx11/cxx98 x arch.
SEED_13 = (
    "torch26-cxx11-cu118-x86_64-linux",
    "torch26-cxx98-cu118-x86_64-linux",
    "torch26-cxx11-cu124-x86_64-linux",
    "torch26-cxx98-cu124-x86_64-linux",
    "torch26-cxx11-cu126-x86_64-linux",
    "torch26-cxx98-cu126-x86_64-linux",
    "torch26-cxx11-cu126-aarch64-linux",
    "torch26-cxx98-cu126-aarch64-linux",
    "torch27-cxx11-cu118-x86_64-linux",
    "torch27-cxx11-cu126-x86_64-linux",
    "torch27-cxx11-cu128-x86_64-linux",
    "torch27-cxx11-cu126-aarch64-linux",
    "torch27-cxx11-cu128-aarch64-linux",
)

# The variants kernels 0.11.3's to-wheel got wrong (docs/to-wheel.md), and the other Hub variant
# forms.
DEFECT_CASES = (
    "torch210-cxx11-cu130-x86_64-linux",
    "torch27-cxx11-cpu-x86_64-linux",
    "torch27-cxx11-rocm63-x86_64-linux",
    "torch-cuda",
    "torch28-metal-aarch64-darwin",
)
OTHER_FORMS = (
    "torch211-cu128-x86_64-windows",
    "torch213-cxx11-cpu-aarch64-linux",
    "torch29-cxx11-xpu20251-x86_64-linux",
    "torch-stable-abi29-cxx11-cu129-x86_64-linux",
    "torch214-cu130-x86_64-linux",
    "torch-universal",
)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "kw",
        "GIT_AUTHOR_EMAIL": "kw@example.invalid",
        "GIT_COMMITTER_NAME": "kw",
        "GIT_COMMITTER_EMAIL": "kw@example.invalid",
        "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
    }
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout.strip()


def namespace_for(package: str, variant: str, salt: str = "") -> str:
    return f"_{package}_{hashlib.sha256((variant + salt).encode()).hexdigest()[:7]}"


def ops_py(namespace: str) -> str:
    return (
        "import torch\n"
        f"from . import {namespace}\n"
        f"ops = torch.ops.{namespace}\n\n\n"
        "def add_op_namespace_prefix(op_name: str):\n"
        f'    return f"{namespace}::{{op_name}}"\n'
    )


INIT_PY = '''"""img2gray kernel (test fixture)."""

from __future__ import annotations

from ._ops import add_op_namespace_prefix, ops


def loaded():
    from . import _ops

    return getattr(_ops, "__name__", "")


__all__ = ["add_op_namespace_prefix", "loaded", "ops"]
'''

NOARCH_INIT = '''"""img2gray layers (noarch test fixture)."""

def img2gray_reference(pixels):
    return [(21 * r + 72 * g + 7 * b) // 100 for r, g, b in pixels]
'''

SHIM_INIT = (
    "import importlib.util, sys\nfrom pathlib import Path\n"
    "# loads the variant folder for older kernels releases\n"
)


@dataclass
class VariantFiles:
    """What one build/<variant>/ folder holds; ``files`` maps paths inside it to bytes."""

    name: str
    files: dict[str, bytes] = field(default_factory=dict)


def variant_files(
    name: str,
    *,
    layout: str = "nested",
    package: str = "img2gray",
    so_cache: Path,
    metadata: Mapping[str, object] | None = None,
    salt: str = "",
    too_new_glibc: bool = False,
    pad: int = 0,
    binary: tuple[str, bytes] | None = None,
) -> VariantFiles:
    """The files kernel-builder would upload for ``name`` in ``layout`` (nested or flat).
    ``binary`` (namespace, bytes) replaces the compiled test extension."""
    noarch = not name[5:6].isdigit() and not name.startswith(("torch-stable", "tvm-ffi"))
    out: dict[str, bytes] = {}
    if noarch:
        pkg_files = {"__init__.py": NOARCH_INIT.encode()}
    else:
        ns = namespace_for(package, name, salt) if binary is None else binary[0]
        if binary is not None:
            binary_, suffix = binary[1], ".abi3.so"
        elif name.endswith("-darwin"):
            binary_, suffix = fake_macho(), ".abi3.so"
        elif name.endswith("-windows"):
            binary_, suffix = fake_pe(), ".pyd"
        else:
            arch = "aarch64" if "-aarch64-" in name else "x86_64"
            binary_ = build_extension(so_cache, ns, arch=arch, too_new_glibc=too_new_glibc, pad=pad)
            suffix = ".abi3.so"
        pkg_files = {
            "__init__.py": INIT_PY.encode(),
            "_ops.py": ops_py(ns).encode(),
            f"{ns}{suffix}": binary_,
        }
    if layout == "nested":
        out.update({f"{package}/{k}": v for k, v in pkg_files.items()})
        if metadata is not None:
            out["metadata.json"] = json.dumps(metadata, indent=2).encode()
    else:
        out.update(pkg_files)
        out[f"{package}/__init__.py"] = SHIM_INIT.encode()
        meta = {"python-depends": []} if metadata is None else dict(metadata)
        out["metadata.json"] = json.dumps(meta, indent=2).encode()
    return VariantFiles(name, out)


class HubRepo:
    """A git repository in the Hub kernel layout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        git(root, "init", "-q", "-b", "main")
        (root / ".gitattributes").write_text(
            "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES)
        )
        (root / "README.md").write_text("---\nlicense: apache-2.0\ntags: [kernel]\n---\n")

    @property
    def lfs_dir(self) -> Path:
        return self.root / ".git" / "lfs" / "objects"

    def write_file(self, path: str, data: bytes, *, lfs: bool | None = None) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if lfs is None:
            lfs = path.endswith(LFS_SUFFIXES)
        if lfs:
            oid = hashlib.sha256(data).hexdigest()
            obj = self.lfs_dir / oid[:2] / oid[2:4] / oid
            obj.parent.mkdir(parents=True, exist_ok=True)
            obj.write_bytes(data)
            data = (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n"
            ).encode()
        if target.is_symlink():
            target.unlink()
        target.write_bytes(data)

    def symlink(self, path: str, target: str) -> None:
        link = self.root / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink(target, link)

    def set_variants(self, variants: Iterable[VariantFiles], *, clear: bool = True) -> None:
        if clear and (self.root / "build").exists():
            git(self.root, "rm", "-rq", "--ignore-unmatch", "build")
            subprocess.run(["rm", "-rf", str(self.root / "build")], check=True)
        for v in variants:
            for inner, data in v.files.items():
                self.write_file(f"build/{v.name}/{inner}", data)

    def commit(self, message: str) -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.root, "rev-parse", "HEAD")

    def tag(self, name: str, *, annotated: bool = False) -> None:
        if annotated:
            git(self.root, "tag", "-a", name, "-m", name)
        else:
            git(self.root, "tag", name)

    def branch(self, name: str, at: str = "HEAD") -> None:
        git(self.root, "branch", "-f", name, at)

    def checkout(self, name: str) -> None:
        git(self.root, "checkout", "-q", name)


def make_repo(
    root: Path,
    variants: Iterable[str],
    *,
    so_cache: Path,
    layout: str = "nested",
    package: str = "img2gray",
    metadata: Mapping[str, object] | None = None,
    tag: str | None = "v1.1.2",
    pad: int = 0,
) -> HubRepo:
    """A one-commit repo holding ``variants``, tagged ``tag``."""
    repo = HubRepo(root)
    repo.set_variants(
        variant_files(
            v, layout=layout, package=package, so_cache=so_cache, metadata=metadata, pad=pad
        )
        for v in variants
    )
    repo.commit("build")
    if tag:
        repo.tag(tag)
    return repo
