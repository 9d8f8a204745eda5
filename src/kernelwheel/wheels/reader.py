"""Reading wheels back: the dist-info folder, METADATA, and the whole wheel with RECORD verified;
one reader for every stage that looks inside a wheel (Hub export, index, lock files, repair)."""

from __future__ import annotations

import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from email.policy import compat32
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name
from packaging.version import InvalidVersion, Version

from .._util import disk_full
from ..errors import VariantError, WheelError
from ..model.names import name_warning, shadowing
from ..model.variant import variant_of_wheel
from ..model.wheelname import parse_wheel_name
from .record import Row, digest_hash, hashed_copy, parse_record

TOP_LEVEL = "top_level.txt"  # setuptools' list of a distribution's top-level names


def escape_name(name: str) -> str:
    """The distribution name as it appears in file names (PEP 427, normalised)."""
    return canonicalize_name(name).replace("-", "_")


def dist_info_dir(name: str, version: str) -> str:
    return f"{escape_name(name)}-{Version(version)}.dist-info"


def parse_metadata(data: bytes) -> Message:
    return Parser(policy=compat32).parsestr(data.decode("utf-8", "replace"))


def read_metadata(path: Path) -> bytes:
    """The METADATA file of the wheel at ``path``, as stored."""
    return _read_dist_info(path, "METADATA")


def read_record(path: Path) -> list[Row]:
    """The rows of the wheel's RECORD, as stored (:func:`verify_wheel` checks them)."""
    return parse_record(_read_dist_info(path, "RECORD"), where=str(path))


def dist_info_entries(names: Iterable[str], leaf: str) -> list[str]:
    """The ``<name>.dist-info/<leaf>`` entries at the top of a wheel's listing ``names``."""
    return [n for n in names if n.count("/") == 1 and n.endswith(f".dist-info/{leaf}")]


def _read_dist_info(path: Path, leaf: str) -> bytes:
    """``leaf`` of the one top-level ``*.dist-info`` folder, the one holding METADATA."""
    try:
        with zipfile.ZipFile(path) as zf:
            found = dist_info_entries(zf.namelist(), "METADATA")
            if len(found) != 1:
                raise WheelError(f"{path}: expected one *.dist-info/METADATA, found {found}")
            return zf.read(found[0].replace("/METADATA", f"/{leaf}"))
    except KeyError:
        raise WheelError(f"{path}: the wheel has no {leaf}", hint="rebuild the wheel") from None
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError) as exc:
        raise WheelError(f"{path}: cannot read the wheel ({exc})") from None


def extract_package(path: Path, prefix: str, dest: Path) -> dict[str, bytes]:
    """Unpack the members under ``prefix`` (``<package>/``) into ``dest``, streamed and hashed in
    one pass, each checked against its RECORD row: each file's path below ``prefix`` -> its raw
    sha256 digest. Raises WheelError naming the member that does not match; a full disk, the
    OSError naming the file of ``dest`` being written."""
    target = dest
    try:
        with zipfile.ZipFile(path) as zf:
            record_name = next(iter(dist_info_entries(zf.namelist(), "RECORD")), None)
            if record_name is None:
                raise WheelError(f"{path}: no .dist-info/RECORD", hint="rebuild the wheel")
            rows = {
                name: (digest, size)
                for name, digest, size in parse_record(zf.read(record_name), where=str(path))
            }
            digests: dict[str, bytes] = {}
            for info in zf.infolist():
                name = info.filename
                if not name.startswith(prefix) or info.is_dir():
                    continue
                if _unsafe(name) or is_symlink_entry(info):
                    raise WheelError(
                        f"{path}: {name} is not a plain file inside the wheel", hint="rebuild it"
                    )
                if name not in rows:
                    raise WheelError(f"{path}: {name} is not in RECORD", hint="rebuild the wheel")
                target = dest / name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("wb") as dst, zf.open(info) as src:
                    digest, size = hashed_copy(src, dst.write)
                if (digest_hash(digest), str(size)) != rows[name]:
                    raise WheelError(
                        f"{path}: {name} does not match its RECORD hash", hint="rebuild it"
                    )
                digests[name[len(prefix) :]] = digest
            return digests
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
        if isinstance(exc, OSError) and disk_full(exc):  # a write's: no fault of the wheel
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        raise WheelError(f"{path}: cannot read wheel: {exc}", hint="rebuild the wheel") from None


_SYMLINK = 0o120000


def is_symlink_entry(info: zipfile.ZipInfo) -> bool:
    """A zip entry that unpacks as a symbolic link (its mode, on Unix-made archives)."""
    return (info.external_attr >> 16) & 0o170000 == _SYMLINK


def _unsafe(name: str) -> bool:
    parts = name.split("/")
    return not name or name.startswith("/") or "\\" in name or ".." in parts or ":" in parts[0]


RECORD_RULE = "record"
WHEEL_RULE = "wheel"


@dataclass(frozen=True)
class IntegrityProblem:
    subject: str  # the archive path (or RECORD, or a METADATA field)
    cause: str
    fix: str
    rule: str = RECORD_RULE  # RECORD_RULE or WHEEL_RULE


# Zip bombs: a member is refused unread when it would unpack to more than MAX_RATIO times its
# compressed size (deflate reaches ~1000:1 on zeros; code, objects and CUDA fatbins stay well
# under 20:1) once past RATIO_FLOOR, or when the wheel would unpack to more than MAX_TOTAL.
# zipfile never yields more than a member's declared size, so the declared sizes bound the work.
MAX_RATIO = 100
RATIO_FLOOR = 1 << 20
MAX_TOTAL = 16 << 30
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError)


def bomb_cause(info: zipfile.ZipInfo) -> str | None:
    """Why ``info`` is refused unread as a zip bomb, or None."""
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        ratio = info.file_size / max(info.compress_size, 1)
        return (
            f"would unpack {info.compress_size} bytes to {info.file_size} "
            f"({ratio:.0f}:1, over the {MAX_RATIO}:1 cap): a zip bomb, not read"
        )
    return None


def _dist_info_problems(names: list[str], rebuild: str) -> list[IntegrityProblem]:
    """What pip refuses before it installs anything: not exactly one top-level ``.dist-info``
    folder, or one without METADATA or WHEEL."""
    folders = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
    if len(folders) != 1:
        cause = (
            "no .dist-info folder"
            if not folders
            else f"{len(folders)} .dist-info folders ({', '.join(folders)}): pip refuses it"
        )
        return [IntegrityProblem(folders[0] if folders else "*.dist-info", cause, rebuild)]
    needed = [f"{folders[0]}/{leaf}" for leaf in ("METADATA", "WHEEL")]
    missing = "missing: pip refuses the wheel without it"
    return [IntegrityProblem(n, missing, rebuild) for n in needed if n not in names]


def integrity_problems(zf: zipfile.ZipFile) -> list[IntegrityProblem]:
    """The record rule: what pip's installer relies on but does not check (one ``.dist-info``
    with METADATA, WHEEL and a RECORD every file matches; no duplicate, escaping or symlink
    entries; no zip bomb, refused unread). Empty when the wheel is sound."""
    rebuild = "rebuild or re-convert the wheel; do not edit wheels by hand"
    out: list[IntegrityProblem] = []

    def bad(subject: str, cause: str, fix: str = rebuild) -> None:
        out.append(IntegrityProblem(subject, cause, fix))

    infos = [i for i in zf.infolist() if not i.is_dir()]
    counts = Counter(info.filename for info in infos)
    for name, n in counts.items():
        if n > 1:
            bad(name, f"appears {n} times in the archive")
    bombs: dict[str, str] = {}
    for info in infos:
        if _unsafe(info.filename):
            bad(info.filename, "escapes the install folder (absolute or '..' path)")
        if is_symlink_entry(info):
            why = "is a symlink entry (pip writes it as a regular file holding the target)"
            bad(info.filename, why, "ship the file itself instead of a link")
        if (cause := bomb_cause(info)) is not None:
            bombs[info.filename] = cause
            bad(info.filename, cause)
    total = sum(i.file_size for i in infos)
    if total > MAX_TOTAL:
        bad("*", f"would unpack to {total} bytes, over the {MAX_TOTAL}-byte cap")
        return out
    out += _dist_info_problems(list(counts), rebuild)
    records = dist_info_entries(counts, "RECORD")
    if len(records) != 1:
        dist = sorted(n.split("/")[0] for n in counts if n.count("/") == 1 and ".dist-info/" in n)
        subject = records[0] if records else f"{dist[0] if dist else '*.dist-info'}/RECORD"
        bad(subject, "missing" if not records else f"{len(records)} RECORD files: {records}")
        return out
    record = records[0]
    if record in bombs:
        return out
    try:
        rows = parse_record(zf.read(record), where=record)
    except WheelError as exc:
        bad(record, exc.message)
        return out
    except _UNREADABLE as exc:
        bad(record, f"cannot be decompressed ({exc})")
        return out
    by_name = {i.filename: i for i in infos}
    listed: dict[str, int] = {}
    for path, digest, size in rows:
        listed[path] = listed.get(path, 0) + 1
        if listed[path] == 2:
            bad(path, f"listed {sum(1 for r in rows if r[0] == path)} times in RECORD")
        if path == record or path in bombs or listed[path] > 1:
            continue
        if path not in counts:
            bad(path, "listed in RECORD but not in the wheel")
            continue
        if not digest.startswith("sha256="):
            bad(path, f"RECORD gives no sha256 hash ({digest!r})")
            continue
        try:
            with zf.open(by_name[path]) as fh:
                raw, length = hashed_copy(fh)
        except _UNREADABLE as exc:
            bad(path, f"cannot be decompressed ({exc})")
            continue
        if digest_hash(raw) != digest:
            bad(path, "does not match its RECORD hash")
        elif size and size != str(length):
            bad(path, f"is {length} bytes, RECORD says {size}")
    for name in counts:
        if name not in listed:
            bad(name, "not listed in RECORD")
    return out


def verify_wheel(path: Path) -> None:
    """Raise WheelError naming every problem of the record and wheel rules: what ``install`` and
    ``index`` run before trusting a wheel."""
    _verify(path, lambda zf: integrity_problems(zf) + wheel_rule_problems(path.name, zf))


def verify_contents(path: Path) -> None:
    """:func:`verify_wheel` without the record rule, for a wheel just written (``to-wheel``)."""
    _verify(path, lambda zf: wheel_rule_problems(path.name, zf))


def _verify(path: Path, judge: Callable[[zipfile.ZipFile], list[IntegrityProblem]]) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            problems = judge(zf)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        if path.is_symlink() and not path.exists():  # a wheelhouse's link into a store, lost
            raise WheelError(
                f"{path}: a link to nowhere (-> {path.readlink()})",
                hint="restore its target, or remove the link",
            ) from None
        if isinstance(exc, FileNotFoundError):
            raise WheelError(f"{path}: no such wheel", hint="check the path") from None
        raise WheelError(
            f"{path}: not a readable zip archive ({exc})", hint="rebuild or download it again"
        ) from None
    if problems:
        shown = "\n".join(f"  {p.subject}: {p.cause}" for p in problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        rules = sorted({p.rule for p in problems}, reverse=True)
        named = f"{' and '.join(rules)} rule{'s' if len(rules) > 1 else ''}"
        raise WheelError(
            f"{path.name} fails the {named} (what pip relies on but does not check):\n"
            f"{shown}{more}",
            hint=f"{problems[0].fix}; `kernelwheel check {path.name}` lists every problem",
        )


# What a wheel's `.data/<scheme>/` installs where: only the two site-packages schemes are a
# kernel's; scripts, headers and data land outside it (bin/, include/, the prefix).
SITE_SCHEMES = ("purelib", "platlib")
_STARTUP_MODULES = ("sitecustomize", "usercustomize")  # run by `site` at every start
_LIBS = ".libs"  # auditwheel's folder of grafted libraries, <package>.libs/


def wheel_rule_problems(filename: str, wheel: zipfile.ZipFile) -> list[IntegrityProblem]:
    """The wheel rule: a kernel wheel installs its own package only, and its METADATA and torch
    requirement agree with its file name (docs/hardening.md)."""
    try:
        dist, version, _build, _tags, _label = parse_wheel_name(filename)
    except InvalidWheelFilename as exc:
        return [_wheel_problem(filename, f"is not a wheel file name ({exc})", "rename it")]
    names = [n for n in wheel.namelist() if not n.endswith("/")]
    info = [n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")]
    if len(set(info)) != 1:
        return []  # the record rule names this; nothing below can be judged without METADATA
    own, out = _own_names(dist, info[0], wheel)
    for name in names:
        if (cause := _member_cause(name, dist, own)) is not None:
            out.append(_wheel_problem(name, *cause))
    try:
        headers = parse_metadata(wheel.read(f"{info[0]}/METADATA"))
    except (KeyError, *_UNREADABLE):
        return out  # the record rule names it
    out += _metadata_problems(filename, dist, version, headers)
    return out


def _wheel_problem(subject: str, cause: str, fix: str) -> IntegrityProblem:
    return IntegrityProblem(subject, cause, fix, WHEEL_RULE)


def _own_names(
    dist: str, info: str, wheel: zipfile.ZipFile
) -> tuple[frozenset[str], list[IntegrityProblem]]:
    """The wheel's own top-level names, normalised: its distribution's, and top_level.txt's
    where that file declares others (to-wheel --name: dist ``relu-kernel``, package ``relu``)
    and they shadow no reserved module (torch, the standard library: data/names.toml)."""
    own = {canonicalize_name(dist)}
    out: list[IntegrityProblem] = []
    member = f"{info}/{TOP_LEVEL}"
    try:
        declared = wheel.read(member).decode("utf-8").split()
    except (KeyError, UnicodeDecodeError, *_UNREADABLE):  # KeyError: no top_level.txt
        declared = []
    rebuild = "a kernel wheel installs only its own package: rebuild it from its project"
    for top in declared:
        name = canonicalize_name(top)
        if name in own:
            continue
        if (reserved := shadowing(None, top)) is not None:
            why, fix = f"which would replace {reserved}", rebuild
        elif name_warning(top, top) is not None:
            why = (
                "the import name of a well-known PyPI distribution other than this wheel's: "
                "installing it would write over that distribution's files"
            )
            fix = rebuild + " (to-wheel --name names the distribution, not another one's package)"
        else:
            own.add(name)
            continue
        out.append(_wheel_problem(member, f"declares the top-level package {top!r}, {why}", fix))
    return frozenset(own), out


def _member_cause(name: str, dist: str, own: frozenset[str]) -> tuple[str, str] | None:
    """Why ``name`` may not be in the wheel (cause, fix), or None."""
    rebuild = "rebuild or re-convert the wheel from the kernel's own project; do not add files"
    parts = name.split("/")
    if parts[-1].endswith(".pth"):
        return "a .pth file: site runs its import lines at every interpreter start", rebuild
    top = parts[0]
    for suffix in (".dist-info", ".data"):
        if top.endswith(suffix):
            if canonicalize_name(top[: -len(suffix)].split("-")[0]) != canonicalize_name(dist):
                return f"a {suffix} folder of another distribution than {dist}", rebuild
            if suffix == ".dist-info":
                return None
            if len(parts) < 3 or parts[1] not in SITE_SCHEMES:
                return (
                    f"installs outside site-packages (.data/{parts[1] if len(parts) > 1 else ''}"
                    "): scripts, headers and data files are not a kernel's",
                    rebuild,
                )
            parts = parts[2:]
            top = parts[0]
    module = top.split(".")[0] if len(parts) == 1 else top
    if module in _STARTUP_MODULES:
        return f"a {module} module: site imports it at every interpreter start", rebuild
    if top.endswith(_LIBS) and len(parts) > 1:
        module = top[: -len(_LIBS)]
    if canonicalize_name(module) not in own:
        where = "file" if len(parts) == 1 else "package"
        return (
            f"a top-level {where} {module!r} that is not {dist}'s own: installing the wheel "
            f"would write into another distribution's files",
            rebuild,
        )
    return None


def _metadata_problems(
    filename: str, dist: str, version: Version, headers: Message
) -> list[IntegrityProblem]:
    stated_name, stated_version = headers.get("Name", ""), headers.get("Version", "")
    causes: dict[str, str | None] = {"Name": None, "Version": None}
    if canonicalize_name(stated_name) != dist:
        causes["Name"] = (
            f"is {stated_name!r}, the file name says {dist}: pip would record another "
            "distribution than the one it installs"
        )
    try:
        same = Version(stated_version) == version
    except InvalidVersion:
        same = False
    if not same:
        causes["Version"] = (
            f"is {stated_version!r}, the file name says {version}: pip refuses it "
            "('inconsistent version')"
        )
    causes["Requires-Dist"] = _torch_problem(filename, headers)
    fix = "rebuild or re-convert the wheel; the file name and METADATA must describe one wheel"
    return [_wheel_problem(f"METADATA {k}", c, fix) for k, c in causes.items() if c is not None]


def _torch_problem(filename: str, headers: Message) -> str | None:
    """How the torch requirement disagrees with a kernel local label's torch and flavour."""
    try:
        variant = variant_of_wheel(filename)
    except VariantError:
        return None  # no kernel label: another project's wheel says nothing of torch
    if variant is None or variant.torch is None:
        return None
    series, wanted = variant.torch, variant.torch_requirement()
    pins = []
    for text in headers.get_all("Requires-Dist") or ():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            return f"{text!r} is not a requirement"
        if canonicalize_name(req.name) == "torch":  # under a marker too: it may apply
            pins.append(req)
    if not pins:
        return None  # nothing to disagree with: install pins the torch it finds anyway
    shown = ", ".join(str(r) for r in pins)
    assert variant.backend is not None
    flavour = variant.backend.token
    for local in {s.version.partition("+")[2] for r in pins for s in r.specifier} - {""}:
        if local != flavour:
            return (
                f"{shown} asks for torch's {local} build, the label +{variant.local_version} "
                f"is a {flavour} build"
            )
    # Which releases it admits, its local parts aside (torch==2.14.1+cu130 pins 2.14.1).
    spec = SpecifierSet(",".join(str(s).partition("+")[0] for r in pins for s in r.specifier))
    major, minor = variant.torch.major, variant.torch.minor
    # A stable-ABI build may state a higher floor than its label's ABI version: the one its
    # shim imports need (abi/torch_floor); it must admit some release from its label's on.
    newer = range(minor, minor + 40) if variant.stable_abi else (minor,)
    own = any(
        spec.contains(f"{major}.{m}.{patch}", prereleases=True)
        for m in newer
        for patch in range(10)
    )
    earlier = minor > 0 and spec.contains(f"{major}.{minor - 1}.9", prereleases=True)
    if not own or earlier:
        return (
            f"{shown} does not pin the torch {series} the label +{variant.local_version} was "
            f"built for (it needs {wanted})"
        )
    if not variant.stable_abi and spec.contains(f"{major}.{minor + 1}.0", prereleases=True):
        return (
            f"{shown} admits torch {major}.{minor + 1}, but the label "
            f"+{variant.local_version} is a build for torch {series} only (it needs {wanted})"
        )
    return None
