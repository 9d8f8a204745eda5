"""Skip a variant's compile when nothing it is built from changed since its last build
(docs/build-bench.md): the shared object is kept with a manifest of the build key, each input's
fingerprint (content SHA-256 for the project's and the build's own files, size and mtime for the
rest, as make and ninja judge them) and the absent headers that would shadow an input."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path

from .. import __version__
from .._util import read_json_object, replace_dir, sha256_file, sha256_remembered, staging_dir
from ..compile.compile_spec import CommandSpec, CompileSpec, output_identity
from ..toolchain.envs import EnvInfo
from .stale import CLOCK_MARGIN_NS

FORMAT = 2  # 2: the absent headers that would shadow an input (include search order)
MANIFEST = "manifest.json"
SO_DIGEST = "shared-object.sha256"  # the stored shared object's digest, by its stat

# Environment variables compilers, nvcc or torch's extension builder read.
COMPILER_VARS = (
    "CC", "CXX", "LDSHARED", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CUDAHOSTCXX", "PYTORCH_NVCC", "TORCH_CUDA_ARCH_LIST",
    "CUDA_HOME", "ROCM_HOME", "SOURCE_DATE_EPOCH", "_GLIBCXX_USE_CXX11_ABI",
)  # fmt: skip
_TOOLS = ("c++", "g++", "gcc", "cc", "ld", "nvcc")


def _tools(env_vars: Mapping[str, str]) -> list[tuple[str, str, int, int]]:
    """Every compiler and linker PATH offers (a ccache masquerade link stands for the compiler
    after it, which is listed too): (name, real path, size, mtime)."""
    names = [*_TOOLS, *(w for var in ("CC", "CXX") for w in env_vars.get(var, "").split()[:1])]
    out: list[tuple[str, str, int, int]] = []
    for folder in env_vars.get("PATH", "").split(os.pathsep):
        for name in dict.fromkeys(names):
            path = Path(folder or ".", name) if not os.path.isabs(name) else Path(name)
            with suppress(OSError, RuntimeError):
                real = path.resolve(strict=True)
                st = real.stat()
                if real.name != "ccache" and os.access(real, os.X_OK):
                    out.append((name, str(real), st.st_size, st.st_mtime_ns))
    return sorted(set(out))


def build_key(
    spec: CompileSpec | CommandSpec,
    env: EnvInfo | tuple[object, ...],
    env_vars: Mapping[str, str],
    worker: Path,
) -> str:
    """The SHA-256 over everything besides the input files that decides what the compile gives.
    ``env``: a torch build's environment, or the facts of another kind's (a tvm-ffi build's
    interpreter, apache-tvm-ffi version and folders)."""
    if isinstance(env, EnvInfo):
        facts: list[object] = [str(env.python), env.python_version, env.machine, env.torch]
        facts += [env.cuda, env.hip, env.cxx11_abi]
    else:
        facts = [str(fact) for fact in env]
    data = {
        "format": FORMAT,
        "kernelwheel": __version__,
        "worker": sha256_file(worker),
        "spec": output_identity(spec.to_json()),
        "env": facts,
        "vars": {k: env_vars.get(k) for k in COMPILER_VARS},
        "tools": _tools(env_vars),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class Reuse:
    """The reuse entry of one variant: ``folder/manifest.json`` and the shared object beside it.
    ``content_roots``: files under these folders are fingerprinted by content; ``edited``: the
    folders (the project's) whose files an author may save while a compile reads them."""

    def __init__(
        self, folder: Path, content_roots: Sequence[Path], edited: Sequence[Path] = ()
    ) -> None:
        self.folder = folder
        self.content_roots = tuple(os.path.normpath(p) + os.sep for p in content_roots)
        self.edited = tuple(os.path.normpath(p) + os.sep for p in edited)

    def _edited_since(
        self, paths: Sequence[str], started_ns: int, before: Mapping[str, str | None]
    ) -> bool:
        """Whether one of ``paths`` under ``edited`` changed after ``started_ns`` (less a margin
        for the file system's coarse clock): by its ctime, which no tool sets back (``cp -p``,
        ``touch -d`` and ``git checkout`` set mtime only); within the margin, by its bytes
        against ``before`` (its digest before the compile). Its fingerprint, taken now, may then
        not be the content the compile read."""
        since = started_ns - CLOCK_MARGIN_NS
        for path in paths:
            if path.startswith(self.edited):
                try:
                    ctime = os.stat(path).st_ctime_ns
                    if ctime >= started_ns or (
                        ctime >= since and before.get(path, "") != sha256_file(Path(path))
                    ):
                        return True
                except OSError:
                    return True
        return False

    def _fingerprint(self, path: str) -> list[object] | None:
        try:
            if path.startswith(self.content_roots):
                return ["sha256", sha256_file(Path(path))]
            st = os.stat(path)
            return ["stat", st.st_size, st.st_mtime_ns]
        except OSError:
            return None

    def lookup(self, key: str) -> dict[str, object] | None:
        """The stored compile result when ``key`` and every input's fingerprint match."""
        manifest = _keyed(self.folder / MANIFEST, key)
        if manifest is None:
            return None
        inputs = manifest.get("inputs")
        result = manifest.get("result")
        if not isinstance(inputs, dict) or not isinstance(result, dict):
            return None
        if any(self._fingerprint(path) != known for path, known in inputs.items()):
            return None
        absent = manifest.get("absent")
        if not isinstance(absent, list) or _existing(map(str, absent)):
            return None  # a header now shadows one the last build used
        so = self.folder / str(manifest.get("shared_object"))
        digest = manifest.get("shared_object_sha256")
        if not so.is_file() or sha256_remembered(so, self.folder / SO_DIGEST) != digest:
            return None
        return {**result, "shared_object": str(so)}

    def appeared(self) -> list[str]:
        """The headers the last stored build found absent that exist now: each shadows one of
        its inputs on the include path (:func:`shadow_candidates`), a change ninja, judging
        the inputs it knows by their times, never sees."""
        return appeared(self.folder / MANIFEST)

    def store(
        self,
        key: str,
        result: Mapping[str, object],
        sources: Sequence[str],
        include_dirs: Sequence[str] = (),
        *,
        started_ns: int | None = None,
        before: Mapping[str, str | None] | None = None,
    ) -> bool:
        """Keep ``result`` (the worker's, naming the shared object and its inputs) for later
        builds; False (and any old entry removed) when its inputs are unknown, or one of the
        project's was saved after the compile began (``started_ns``: ``time.time_ns()``;
        ``before``: digests taken before it, which decide a save around its start).
        ``include_dirs``: the spec's include folders, in search order."""
        inputs = result.get("inputs")
        fingerprints: dict[str, object] = {}
        if isinstance(inputs, list) and inputs:
            paths = sorted({*map(str, inputs), *(os.path.normpath(s) for s in sources)})
            if started_ns is None or not self._edited_since(paths, started_ns, before or {}):
                fingerprints = {path: self._fingerprint(path) for path in paths}
        if not fingerprints or None in fingerprints.values():
            shutil.rmtree(self.folder, ignore_errors=True)
            return False
        so = Path(str(result["shared_object"]))
        kept = {k: v for k, v in result.items() if k not in ("shared_object", "inputs")}
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        with staging_dir(self.folder.parent, "reuse") as tmp:
            shutil.copy2(so, tmp / so.name)
            manifest = {
                "key": key,
                "inputs": fingerprints,
                "absent": absent_headers(fingerprints, sources, include_dirs),
                "result": kept,
                "shared_object": so.name,
                "shared_object_sha256": sha256_remembered(tmp / so.name, tmp / SO_DIGEST),
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
            replace_dir(tmp, self.folder)
        return True

    # --- repair: the same raw wheel, policy and auditwheel give the same repaired wheel --------

    def repaired(self, raw: Path, key: str) -> tuple[Path, dict[str, object]] | None:
        """The wheel an earlier repair made from these exact bytes under ``key``, and its record."""
        folder = self.folder / "repair"
        record = _keyed(folder / "repair.json", key)
        if record is None or record.get("raw_sha256") != sha256_file(raw):
            return None
        wheel = folder / str(record.get("wheel"))
        if not wheel.is_file() or sha256_file(wheel) != record.get("wheel_sha256"):
            return None
        return wheel, record

    def keep_repaired(
        self, raw: Path, key: str, wheel: Path, tag: str, grafted: Sequence[str], log: str
    ) -> None:
        """Remember ``wheel``, repaired from ``raw`` under ``key`` (only beside a stored
        compile: an entry describes one build of the variant)."""
        if not (self.folder / MANIFEST).is_file():
            return
        with staging_dir(self.folder, "repair") as tmp:
            shutil.copyfile(wheel, tmp / wheel.name)
            record = {
                "key": key,
                "raw_sha256": sha256_file(raw),
                "wheel": wheel.name,
                "wheel_sha256": sha256_file(tmp / wheel.name),
                "tag": tag,
                "grafted": list(grafted),
                "log": log,
            }
            (tmp / "repair.json").write_text(json.dumps(record, indent=1))
            replace_dir(tmp, self.folder / "repair")


def _keyed(path: Path, key: str) -> dict[str, object] | None:
    """The JSON object stored at ``path`` under ``key``; None when absent, unreadable or another."""
    record = read_json_object(path)
    return record if record.get("key") == key else None


_SUFFIXES = 3  # <ATen/core/Tensor.h>: the deepest include paths torch's headers use


def shadow_candidates(
    inputs: Sequence[str] | Mapping[str, object], include_dirs: Sequence[str]
) -> list[str]:
    """The paths that do not exist now and, if they appeared, would be found before one of
    ``inputs`` on the include path ``include_dirs`` (in search order): ``inc1/cfg.h`` added in
    front of ``inc2/cfg.h`` changes no input's fingerprint, yet changes the output."""
    dirs = [os.path.normpath(d) for d in include_dirs]
    found = set(inputs)
    candidates: set[str] = set()
    for path in found:
        # under each listed folder holding it (torch/include holds torch/csrc/api/include)
        homes = [index for index, folder in enumerate(dirs) if path.startswith(folder + os.sep)]
        for index in homes:
            rel = path[len(dirs[index]) + 1 :]
            candidates.update(os.path.join(d, rel) for d in dirs[:index])
        if not homes:  # found beyond the listed folders: each of them is searched first
            parts = path.split(os.sep)
            for depth in range(1, min(_SUFFIXES, len(parts) - 1) + 1):
                rel = os.path.join(*parts[-depth:])
                candidates.update(os.path.join(d, rel) for d in dirs)
    return sorted(candidates - found - _existing(candidates - found))


def absent_headers(
    inputs: Sequence[str] | Mapping[str, object],
    sources: Sequence[str],
    include_dirs: Sequence[str],
) -> list[str]:
    """:func:`shadow_candidates` of a compile of ``sources``: a quoted include looks beside
    the including source first, then in ``include_dirs``."""
    beside = dict.fromkeys(os.path.dirname(os.path.normpath(s)) for s in sources)
    return shadow_candidates(inputs, [*beside, *include_dirs])


def include_search(spec: CompileSpec | CommandSpec) -> list[str]:
    """The folders the compile's commands search for a header, in order: a torch build's from
    the build.ninja torch wrote (torch's and Python's folders after the spec's), a commands
    spec's from its units (nvcc's toolkit folder last); the spec's own where none is read."""
    if isinstance(spec, CommandSpec):
        commands = [list(unit.argv) for unit in spec.units]
        home = [f"-I{spec.cuda_home}/include"] if spec.cuda_home else []
        commands = [[*argv, *home] if argv[:1] == ["nvcc"] else argv for argv in commands]
    else:
        try:
            lines = (Path(spec.build_temp) / "build.ninja").read_text().splitlines()
            commands = [
                shlex.split(line.partition(" = ")[2])
                for line in lines
                if line.startswith(_NINJA_FLAGS)
            ]
        except (OSError, UnicodeDecodeError, ValueError):
            commands = []
    found = [os.path.join(spec.build_temp, f) for argv in commands for f in searched_folders(argv)]
    return list(dict.fromkeys(os.path.normpath(f) for f in found or spec.include_dirs))


_NINJA_FLAGS = ("cflags = ", "cuda_cflags = ")  # build.ninja's compile flags (torch's)


def searched_folders(argv: Sequence[str]) -> list[str]:
    """The include folders of one compiler command, as gcc and nvcc search them: the -I ones,
    then the -isystem ones, each in the command's order."""
    included: list[str] = []
    system: list[str] = []
    words = iter(argv)
    for word in words:
        for flag, folders in (("-I", included), ("-isystem", system)):
            if word.startswith(flag):
                folders.append(word[len(flag) :] or next(words, ""))
    return [folder for folder in (*included, *system) if folder]


def appeared(record: Path) -> list[str]:
    """The headers the ``absent`` list of the JSON object at ``record`` names that exist now."""
    absent = read_json_object(record).get("absent")
    return sorted(_existing(map(str, absent))) if isinstance(absent, list) else []


def _existing(paths: Iterable[str]) -> set[str]:
    """Those of ``paths`` that exist (links too): one listing per folder, not one lstat per
    path (a torch extension's include path makes about 10^5 candidates, 0.2 s of lstat)."""
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        folder, _, name = path.rpartition(os.sep)
        by_folder.setdefault(folder or os.sep, []).append(name)
    found: set[str] = set()
    for folder, names in by_folder.items():
        try:
            present = set(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:  # unreadable: one path at a time
            found.update(p for n in names if os.path.lexists(p := os.path.join(folder, n)))
            continue
        found.update(os.path.join(folder, n) for n in names if n in present)
    return found


def repair_key(policy: str, best_effort: bool) -> str:
    """What besides the raw wheel decides a repair: the policy, best effort, auditwheel's and
    kernelwheel's versions (policy data and the never-graft list)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        auditwheel = version("auditwheel")
    except PackageNotFoundError:
        auditwheel = None
    return json.dumps([FORMAT, __version__, auditwheel, policy, best_effort])
