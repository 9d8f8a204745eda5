"""Build options, one row each of ``data/options.toml``, from defaults, ``[tool.kernelwheel]``,
``KERNELWHEEL_*`` variables and flags, lowest first (docs/options.md); a layer replaces, never
merges. :func:`resolve_options` gives a frozen :class:`Options` remembering each value's layer."""

from __future__ import annotations

import difflib
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from packaging.version import InvalidVersion, Version

from .._toml import Located, parse_toml, read_toml
from .._util import EMPTY_PATH, redact
from ..abi.policy import normalize_policy
from ..compat import interpreter
from ..errors import KernelwheelError, UsageError, VariantError
from ..model.capability import CudaCapability, parse_all
from ..model.sources import PipSources, is_index_url
from ..model.variant import Arch, LocalVersionStyle
from .selector import Selector, expand_braces

PYPROJECT = "pyproject.toml"
TOOL_TABLE = "tool.kernelwheel"
ARCH_KEYWORDS = ("all", "auto", "native")
ALL_CAPABILITIES = "all"  # cuda-capabilities: the full list, even for a default build
DEFAULT_CACHE_DIR = Path("~/.cache/kernelwheel").expanduser()
FATBIN_COMPRESSION_MODES = ("default", "size", "speed", "balance", "none")  # nvcc --compress-mode
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
# ccache's remote storage back ends (docs/compiler-cache.md)
_REMOTE_SCHEMES = ("redis://", "redis+unix:", "http://", "file:")
_DEP_NAME = re.compile(r"[a-z][a-z0-9_-]*")
# Sub-tables of [tool.kernelwheel] that belong to other commands, not to build options.
_OTHER_COMMANDS_KEYS = ("dependencies",)

_Fail = Callable[[str, str], Exception]
_Converter = Callable[[Any, _Fail, Path], Any]
_T = TypeVar("_T")


class LocalHeaders(NamedTuple):
    """One ``cutlass-path`` entry: a local CUTLASS checkout (or install prefix), for the
    dependency it names (``cutlass_3_9=DIR``) or, unnamed, for every CUTLASS dependency."""

    dependency: str | None
    path: Path

    def describe(self) -> str:
        return f"{self.dependency}={self.path}" if self.dependency else str(self.path)


@dataclass(frozen=True)
class Options:
    """Resolved options, one field per row of ``data/options.toml`` (None: what the row's
    ``default`` describes, found later); ``sources``: option -> the layer that set it."""

    build: tuple[str, ...] = ("*",)
    skip: tuple[str, ...] = ()
    archs: tuple[str, ...] = ("all",)
    only: str | None = None
    recipes: Path | None = None
    output_dir: Path = Path("wheelhouse")
    cache_dir: Path = DEFAULT_CACHE_DIR
    no_ccache: bool = False
    keep_intermediates: bool = False
    ccache_remote: str | None = None
    jobs: int | None = None  # see resolve_jobs
    python: Path | None = None
    cuda_home: Path | None = None
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    plat: str = "manylinux_2_28"
    repair: bool = True
    best_effort: bool = False
    abi_remedies: bool = True
    load_check: bool = True
    hub_layout: Path | None = None
    local_version_style: LocalVersionStyle = LocalVersionStyle.DOTTED
    fatbin_compression: str = "default"
    cuda_capabilities: tuple[CudaCapability, ...] | None = None  # (): "all", the full list always
    cutlass_path: tuple[LocalHeaders, ...] = ()
    with_cpu_kernels: bool = False
    allow_fixed_op_namespaces: bool = False
    nvcc_threads: int | None = None
    memory_per_thread: int | None = None  # MiB; None: measured or estimated per unit
    variant_jobs: int | None = None  # None: compile.compile_rules.variants_at_once
    version: str | None = None  # None: plan.versioning finds it
    sources: tuple[tuple[str, str], ...] = field(default=())

    def source(self, name: str) -> str:
        """The layer that set option ``name``: a flag, an env var, the TOML key, or 'default'."""
        return dict(self.sources).get(name, "default")

    def selector(self) -> Selector:
        """The variant selector, its messages naming where build/skip/only came from."""
        return Selector(
            build=self.build,
            skip=self.skip,
            only=self.only,
            build_label=dict(self.sources).get("build", "build"),
            skip_label=dict(self.sources).get("skip", "skip"),
        )

    def preamble(self) -> tuple[str, ...]:
        """The options set above their defaults (``no-ccache = true  (KERNELWHEEL_NO_CCACHE)``),
        which a build prints first and writes atop each variant's log, as cibuildwheel does."""
        return tuple(
            f"{o.name.replace('_', '-')} = {_show(getattr(self, o.name))}  ({self.source(o.name)})"
            for o in OPTIONS
            if self.source(o.name) != "default"
        )

    def selects_anything(self) -> bool:
        """Whether any layer narrowed the selection (else a build picks the default variant)."""
        return self.only is not None or any(
            self.source(name) != "default" for name in ("build", "skip", "archs")
        )

    def arch_filter(self, host: Arch | None = None) -> tuple[Arch, ...] | None:
        """The arches to plan for, None for all (and with ``--only``)."""
        if self.only is not None or "all" in self.archs:
            return None
        arches = ((host or Arch.host()) if a in ("auto", "native") else Arch(a) for a in self.archs)
        return tuple(dict.fromkeys(arches))

    def manylinux(self) -> str | None:
        """The policy to repair to, None when repair is off."""
        return self.plat if self.repair else None

    @property
    def pip_sources(self) -> PipSources:
        """Where pip looks for every environment and download of the build."""
        return PipSources(self.index_url, self.find_links, self.no_index)


DEFAULT_OPTIONS = Options()


def resolve_jobs(jobs: int | None) -> int:
    """``--jobs`` in every command: how many CPUs kernelwheel keeps busy; None (auto): all."""
    if jobs is not None:
        return jobs
    try:  # the CPUs this process may use (its affinity), not the machine's count
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_command_option(name: str, flag_value: Any) -> Any:
    """One option of a command without a kernel project (to-wheel, lock, download): the flag,
    else its variable, else the default."""
    option = _BY_NAME[name]
    if flag_value is not None:
        return _convert(option, flag_value, option.flag)
    if option.env and os.environ.get(option.env, "").strip():
        return _convert(option, os.environ[option.env], option.env)
    return getattr(DEFAULT_OPTIONS, name)


# --- value converters: (raw TOML/env/CLI value, fail, base folder) -> value -----------------


def _relayed(fail: _Fail, error: type[KernelwheelError], call: Callable[..., _T], *args: Any) -> _T:
    """``call(*args)``, an ``error`` it raises said as the option's."""
    try:
        return call(*args)
    except error as exc:
        raise fail(exc.message, exc.hint or "") from None


def _words(raw: Any, fail: _Fail, example: str, separators: str = "") -> list[str]:
    """The words of a string or a list of strings, split at blanks and ``separators``."""
    if isinstance(raw, str):
        raw = [raw]
    elif not isinstance(raw, Sequence) or not all(isinstance(item, str) for item in raw):
        raise fail(f"expected a string or a list of strings, got {raw!r}", f"e.g. {example}")
    blanks = {ord(c): " " for c in separators}
    return [word for text in raw for word in text.translate(blanks).split()]


def _patterns(raw: Any, fail: _Fail, base: Path, *, allow_empty: bool = False) -> tuple[str, ...]:
    items = _words(raw, fail, "'torch2{13,14}-*'")
    if not items and not allow_empty:
        raise fail("lists no pattern", "give at least one glob, e.g. 'torch214-*' (or '*')")
    for pattern in items:
        _relayed(fail, UsageError, expand_braces, pattern)
    return tuple(items)


def _archs(raw: Any, fail: _Fail, base: Path) -> tuple[str, ...]:
    items = _words(raw, fail, "'x86_64 aarch64'", ",")
    if not items:
        raise fail("lists no arch", "use all, auto, or x86_64/aarch64")
    valid = (*ARCH_KEYWORDS, *(a.value for a in Arch))
    for item in items:
        if item not in valid:
            close = difflib.get_close_matches(item.lower(), valid, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise fail(f"unknown arch {item!r}", hint + f"use one of: {', '.join(valid)}")
    return tuple(dict.fromkeys(items))


def _one_word(raw: Any, fail: _Fail, base: Path, *, what: str, example: str) -> str:
    if not isinstance(raw, str) or not raw.strip() or len(raw.split()) != 1:
        raise fail(f"expected one {what}, got {raw!r}", f"e.g. {example}")
    return raw.strip()


def _url(raw: Any, fail: _Fail, base: Path) -> str:
    """An index URL: pip ignores one without a scheme (a warning), and installs from the rest."""
    url = _one_word(raw, fail, base, what="URL", example="https://pypi.org/simple")
    if not is_index_url(url):
        raise fail(f"{url!r} is no index URL", "e.g. https://pypi.org/simple or file:///srv/simple")
    return url


def _path(raw: Any, fail: _Fail, base: Path) -> Path:
    if isinstance(raw, Path):
        return raw
    if isinstance(raw, str) and not raw.strip():
        raise fail(EMPTY_PATH, "give a path, e.g. 'wheelhouse'")
    if not isinstance(raw, str):
        raise fail(f"expected a path, got {raw!r}", "e.g. 'wheelhouse'")
    path = Path(raw).expanduser()
    return path if path.is_absolute() else base / path


def _cuda_home(raw: Any, fail: _Fail, base: Path) -> Path:
    path = _path(raw, fail, base)
    if not (path / "bin" / "nvcc").is_file():  # else 'no nvcc found', the value unnamed
        raise fail(f"{path} holds no bin/nvcc", "give a CUDA toolkit folder, e.g. /usr/local/cuda")
    return path


def _interpreter_path(raw: Any, fail: _Fail, base: Path) -> Path:
    """``python``: a path, or a bare name looked up on PATH (``python3``), as pip and uv do."""
    if isinstance(raw, Path):
        return raw
    if isinstance(raw, str) and not raw.strip():
        raise fail(EMPTY_PATH, "e.g. python3 or .venv/bin/python")
    if not isinstance(raw, str):
        raise fail(f"expected an interpreter, got {raw!r}", "e.g. python3 or .venv/bin/python")
    return _relayed(fail, UsageError, interpreter.locate, raw.strip(), base)


def _positive_or_auto(raw: Any, fail: _Fail, base: Path, *, example: str) -> int | None:
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit():  # not "²"
        value = int(raw)
    if value is None or value < 1:
        raise fail(f"expected a positive integer or 'auto', got {raw!r}", f"e.g. {example} or auto")
    return value


def _bool(raw: Any, fail: _Fail, base: Path) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    raise fail(f"expected true or false, got {raw!r}", "use true/false (or 1/0 in the environment)")


def _links(raw: Any, fail: _Fail, base: Path) -> tuple[str, ...]:
    """Folders or URLs; a relative folder is relative to the layer's base folder."""
    items = _words(raw, fail, "'./wheels'")
    return tuple(i if "://" in i else str(_path(i, fail, base)) for i in items)


def _remote_storage(raw: Any, fail: _Fail, base: Path) -> str | None:
    """ccache's remote storage URLs (``|attribute=value`` parts allowed); an empty string turns
    a lower layer's setting off."""
    if not isinstance(raw, str):
        raise fail(f"expected a storage URL, got {raw!r}", "e.g. redis://cache.example:6379")
    urls = raw.split()
    for url in urls:
        problem = (
            _storage_url_problem(url.split("|", 1)[0])
            if url.startswith(_REMOTE_SCHEMES)
            else "is no ccache remote storage URL"
        )
        if problem is not None:
            raise fail(
                f"{url!r} {problem}",
                "use redis://HOST[:PORT], redis+unix:/SOCKET, http://HOST[:PORT]/PATH or "
                "file:/FOLDER, the port 1-65535 (https is not one of ccache's storage back ends: "
                "put a TLS proxy in front)",
            )
    return " ".join(urls) or None


def _storage_url_problem(url: str) -> str | None:
    """What is wrong with one storage URL of a scheme ccache knows (its ``|attributes`` cut
    off), None when ccache can use it."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": an unclosed [
        return f"is no URL ({exc})"
    if parts.scheme in ("redis+unix", "file"):
        if not parts.path.startswith("/"):  # ccache: relative to each compile's own folder
            return "names no absolute path" if parts.path else "names no path"
        return None if parts.path.strip("/") else "names no path"
    if not parts.hostname:
        return "names no host"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        shown = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        return f"has port {shown!r}: a port is a number from 1 to 65535"
    if not parts.hostname.isascii():
        return "names a host that is not ASCII (give its punycode, xn--...)"
    return None


def _plat(raw: Any, fail: _Fail, base: Path) -> str:
    if not isinstance(raw, str):
        raise fail(f"expected a manylinux policy, got {raw!r}", "e.g. manylinux_2_28")
    _relayed(fail, UsageError, normalize_policy, raw)  # now, not when the first is repaired
    return raw.strip()


def _choice(
    raw: Any, fail: _Fail, base: Path, *, what: str, choices: Sequence[str], note: str = ""
) -> str:
    value = raw.strip().lower() if isinstance(raw, str) else raw
    if value not in choices:
        raise fail(f"unknown {what} {raw!r}", f"use one of: {', '.join(choices)}{note}")
    return str(value)


def _style(raw: Any, fail: _Fail, base: Path) -> LocalVersionStyle:
    styles = [s.value for s in LocalVersionStyle]
    return LocalVersionStyle(_choice(raw, fail, base, what="local version style", choices=styles))


def _capabilities(raw: Any, fail: _Fail, base: Path) -> tuple[CudaCapability, ...]:
    """A list of capabilities, or ``all``: () (the full list, also for a default build)."""
    items = _words(raw, fail, "'9.0 10.0+PTX'", ",;")
    if not items:
        raise fail("lists no capability", "e.g. 9.0 or '8.0 9.0 10.0+PTX', or all")
    if ALL_CAPABILITIES in (item.lower() for item in items):
        if len(items) > 1:
            raise fail(
                f"gives {ALL_CAPABILITIES!r} with other capabilities",
                "give all alone (every capability of the list) or only capabilities",
            )
        return ()
    return tuple(dict.fromkeys(_relayed(fail, VariantError, parse_all, items)))


def _cutlass_paths(raw: Any, fail: _Fail, base: Path) -> tuple[LocalHeaders, ...]:
    """``[NAME=]DIR`` items: a CUTLASS checkout for dependency NAME, or (no NAME) for all."""
    out: list[LocalHeaders] = []
    for item in _words(raw, fail, "'/src/cutlass' or 'cutlass_3_9=/src/cutlass-3.9.2'"):
        name, sep, rest = item.partition("=")
        named = bool(sep) and _DEP_NAME.fullmatch(name) is not None
        entry = LocalHeaders(name if named else None, _path(rest if named else item, fail, base))
        _check_cutlass_tree(entry, fail)
        if any(e.dependency == entry.dependency for e in out):
            which = f"{entry.dependency}=" if entry.dependency else "a checkout without NAME="
            raise fail(
                f"gives {which} twice",
                "give one checkout per dependency (NAME=DIR), and at most one for all of them",
            )
        out.append(entry)
    if not out:
        raise fail("names no folder", "e.g. /src/cutlass or cutlass_3_9=/src/cutlass-3.9.2")
    return tuple(out)


def _check_cutlass_tree(entry: LocalHeaders, fail: _Fail) -> None:
    path = entry.path
    if (path / "include" / "cutlass" / "cutlass.h").is_file():
        return
    problem = "not a CUTLASS checkout (no include/cutlass/cutlass.h)"
    if (path / "cutlass" / "cutlass.h").is_file():
        hint = f"pass the folder above it, {path.parent} (the checkout, not its include/)"
    elif not path.exists():
        problem = "no such folder"
        hint = "clone the release: git clone --branch vX.Y.Z https://github.com/NVIDIA/cutlass DIR"
    else:
        hint = "pass a CUTLASS source checkout or install prefix (it holds include/cutlass/)"
    raise fail(f"{entry.describe()}: {problem}", hint)


def _version(raw: Any, fail: _Fail, base: Path) -> str:
    """A version (its major is checked against build.toml's general.version by plan.versioning,
    which knows the project)."""
    text = raw.strip() if isinstance(raw, str) else raw
    if not isinstance(text, str) or not text:
        raise fail(f"expected a version string, got {raw!r}", 'e.g. "1.2.0"')
    checked_version(text, fail, "e.g. 1.2.0 or 1.2.0rc1")
    return text


def checked_version(text: str, fail: _Fail, invalid_hint: str) -> Version:
    """``text`` as a PEP 440 version without a local part (kernelwheel appends one per variant)."""
    try:
        version = Version(text)
    except InvalidVersion:
        raise fail(f"{text!r} is not a PEP 440 version", invalid_hint) from None
    if version.local is not None:
        raise fail(
            f"{text!r} has a local version part ('+{version.local}')",
            f"drop it ({version.public}): kernelwheel appends +torch<X>.<Y>.<backend>... per "
            "variant",
        )
    return version


def _show(value: object) -> str:
    """An option's value as the preamble shows it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, LocalHeaders):  # a NamedTuple: before tuple
        return value.describe()
    if isinstance(value, tuple):
        return " ".join(_show(v) for v in value) or "(none)"
    if isinstance(value, Enum):
        return str(value.value)
    return "auto" if value is None else redact(str(value))  # a URL's password


@dataclass(frozen=True)
class OptionDef:
    """One row of ``data/options.toml`` (default and help in markdown). None for ``toml``/``env``:
    that layer has none; for ``metavar``: an on/off flag."""

    name: str
    convert: _Converter
    toml: str | None
    env: str | None
    flag: str
    group: str
    default: str
    help: str
    metavar: str | None = None
    short: str | None = None
    repeat: bool = False

    @property
    def negated(self) -> bool:
        """An on/off option its flag clears (``--no-repair``), rather than sets."""
        return self.metavar is None and self.flag.startswith("--no-") and self.name[:3] != "no_"


_CONVERTERS: dict[str, _Converter] = {
    "patterns": _patterns, "skip": partial(_patterns, allow_empty=True), "archs": _archs,
    "only": partial(_one_word, what="variant name", example="torch214-cxx11-cu130-x86_64-linux"),
    "path": _path, "bool": _bool, "remote_storage": _remote_storage, "cuda_home": _cuda_home,
    "jobs": partial(_positive_or_auto, example="4"),
    "mib": partial(_positive_or_auto, example="4096 (MiB)"),
    "url": _url,
    "interpreter_path": _interpreter_path, "links": _links, "plat": _plat, "style": _style,
    "fatbin_compression": partial(
        _choice, what="fatbin compression", choices=FATBIN_COMPRESSION_MODES,
        note=" (nvcc --compress-mode)",
    ),
    "capabilities": _capabilities, "cutlass_paths": _cutlass_paths, "version": _version,
}  # fmt: skip
_ROW_KEYS = tuple(f.name for f in fields(OptionDef) if f.name not in ("name", "group"))


def _load_options(text: str, where: str) -> tuple[OptionDef, ...]:
    """The options table ``text`` read from ``where``, checked: a bad row names its key."""
    top = Located(parse_toml(text, file=where), file=where)
    hint = "each option is a [SECTION.NAME] table"
    sections = [(title, top.required_table(title, hint)) for title in top.keys()]
    return tuple(
        _option(name, title, section.required_table(name, hint))
        for title, section in sections
        for name in section.keys()
    )


def _option(name: str, group: str, row: Located) -> OptionDef:
    row.check_keys(_ROW_KEYS)
    dashed, metavar = name.replace("_", "-"), row.string("metavar")
    known = f"use one of: {', '.join(_CONVERTERS)}"
    convert = row.string("convert") or ("bool" if metavar is None else name)
    if convert not in _CONVERTERS:
        raise row.error(f"no converter {convert!r}", "convert", known)
    option = OptionDef(
        name,
        _CONVERTERS[convert],
        toml=None if row.boolean("toml") is False else dashed,
        env=None if row.boolean("env") is False else f"KERNELWHEEL_{name.upper()}",
        flag=row.string("flag") or f"--{dashed}",
        group=group,
        default=row.string("default", nonempty=True) or "",
        help=row.required_string("help", "what the option does", nonempty=True),
        metavar=metavar,
        short=row.string("short"),
        repeat=row.boolean("repeat") or False,
    )
    if option.default:
        return option
    return replace(option, default="none" if metavar else f"`{str(option.negated).lower()}`")


_DATA = resources.files("kernelwheel") / "data"
OPTIONS: tuple[OptionDef, ...] = _load_options(
    _DATA.joinpath("options.toml").read_text("utf-8"), "kernelwheel/data/options.toml"
)
_BY_NAME = {o.name: o for o in OPTIONS}
_BY_TOML = {o.toml: o for o in OPTIONS if o.toml is not None}
ENV_VARS: tuple[str, ...] = tuple(o.env for o in OPTIONS if o.env)


# The other KERNELWHEEL_* variables kernelwheel knows
_VARIABLES = parse_toml(_DATA.joinpath("variables.toml").read_text("utf-8"), file="variables.toml")
OTHER_VARS: tuple[str, ...] = tuple(_VARIABLES["variables"])
_PREFIX = "KERNELWHEEL_"
_MAX_UNKNOWN = 10  # an environment exported wholesale by a CI still leaves a readable screen


def unknown_variables(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A warning for each ``KERNELWHEEL_*`` variable of ``environ`` (default ``os.environ``)
    that no option, no other known variable and no test uses (a misspelt name is otherwise
    ignored without a word), naming the closest known name."""
    env = os.environ if environ is None else environ
    known = {*ENV_VARS, *OTHER_VARS}
    tails = [k.removeprefix(_PREFIX) for k in sorted(known)]
    found = []
    unknown = sorted(n for n in env if n.startswith(_PREFIX) and n not in known and env[n])
    for name in unknown[:_MAX_UNKNOWN]:
        close = difflib.get_close_matches(name.removeprefix(_PREFIX).upper(), tails, n=1)
        fix = (
            f"did you mean {_PREFIX}{close[0]}?"
            if close
            else "docs/options.md lists the variables of the build options"
        )
        # a name of terminal control codes is shown escaped, not played on the terminal
        shown = name if name.isprintable() else ascii(name)
        found.append(f"{shown} is no variable kernelwheel reads, and is ignored: {fix}")
    if len(unknown) > _MAX_UNKNOWN:
        more = len(unknown) - _MAX_UNKNOWN
        found.append(f"and {more} more {_PREFIX}* variables kernelwheel does not read, ignored")
    return tuple(found)


def resolve_options(
    project_dir: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, Any] | None = None,
) -> Options:
    """The options from ``project_dir``'s ``pyproject.toml``, ``env`` (default ``os.environ``)
    and the parsed flags ``cli`` (None or an empty list: not given)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if project_dir is not None and (pyproject := Path(project_dir) / PYPROJECT).is_file():
        _from_pyproject(pyproject, values, sources)

    environ = os.environ if env is None else env
    for option in OPTIONS:
        if option.env and environ.get(option.env, "").strip():
            values[option.name] = _convert(option, environ[option.env], option.env)
            sources[option.name] = option.env

    for name, raw in (cli or {}).items():
        flag = _BY_NAME.get(name)
        if flag is None:
            raise UsageError(f"unknown option {name!r}", hint=f"known: {', '.join(_BY_NAME)}")
        if raw is None or (isinstance(raw, (list, tuple)) and not raw):
            continue
        values[name] = _convert(flag, raw, flag.flag)
        sources[name] = flag.flag

    if values.get("only") is not None:
        for ignored in ("build", "skip", "archs"):
            values.pop(ignored, None)
            sources.pop(ignored, None)
    return Options(**values, sources=tuple(sorted(sources.items())))


def _from_pyproject(pyproject: Path, values: dict[str, Any], sources: dict[str, str]) -> None:
    """Each ``[tool.kernelwheel]`` option's value into ``values``, its key into ``sources``."""
    tool = Located(read_toml(pyproject), file=pyproject).table("tool")
    table = tool.table("kernelwheel") if tool is not None else None
    if table is None:
        return
    only = "--only is a command-line flag only; remove it and pass --only to the command"
    table.check_keys(
        (*_BY_TOML, *_OTHER_COMMANDS_KEYS), explain=lambda key: only if key == "only" else None
    )
    for key in table.keys():
        option = _BY_TOML.get(key)
        if option is not None:  # else read by another command (kernelwheel lock / download)
            fail = partial(_located_error, table, key)  # errors name the file and key
            values[option.name] = option.convert(table.data[key], fail, pyproject.parent)
            sources[option.name] = f"[{TOOL_TABLE}] {key}"


def _located_error(table: Located, key: str, message: str, hint: str) -> Exception:
    return table.error(message, key, hint)


def _usage_error(label: str, message: str, hint: str) -> Exception:
    return UsageError(f"{label}: {message}", hint=hint)


def _convert(option: OptionDef, raw: Any, label: str) -> Any:
    """Check and convert one value from the environment or the command line."""
    return option.convert(raw, partial(_usage_error, label), Path.cwd())
