"""A static PEP 503 index of a wheelhouse (docs/install.md): PyPI refuses local versions, so each
flavour gets its own index, as PyTorch's per-CUDA URLs, and each torch series and flavour one of
the closest kind of each release; every wheel passes the record rule first."""

from __future__ import annotations

import contextlib
import hashlib
import html
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from packaging.utils import InvalidWheelFilename
from packaging.version import Version

from .._util import DISK_FULL_HINT, disk_full, sha256_file, staging_dir
from ..errors import KernelwheelError, UsageError, VariantError, WheelError
from ..model.variant import Backend, BackendKind, TorchVersion, Variant, variant_of_wheel
from ..model.wheelname import WheelName, parse_wheel_name
from . import site
from .reader import escape_name, parse_metadata, read_metadata, verify_wheel
from .variants import VariantBuild, variants_json, write_variant_wheel

ALL = "all"
VARIANTS = "variants"  # torch<X.Y>/variants/: the CUDA builds as wheel variants (PEP 825)
# variants/: the per-torch CUDA and CPU builds of every torch series as torch-dimension variants
_VARIANT_KINDS = (BackendKind.CUDA.value, BackendKind.CPU.value)
FILES = "files"
_ANY = "*"  # a wheel for every flavour


@dataclass(frozen=True)
class IndexedWheel:
    path: Path
    filename: str
    project: str  # canonical name
    version: Version
    sha256: str
    metadata: bytes
    requires_python: str | None
    flavour: str | None  # backend token, _ANY, or None (only in all/)
    kind: str | None  # backend kind of a noarch wheel ("cuda"), else None
    variant: Variant | None = None  # the binary variant its local version names


@dataclass(frozen=True)
class IndexResult:
    output: Path
    flavours: Mapping[str, tuple[str, ...]]  # flavour -> wheel file names (incl. "all")
    unflavoured: tuple[tuple[str, str], ...]  # (wheel, why it is only in all/)
    sha256: Mapping[str, str]  # wheel file name -> the sha256 the pages list


def flavours_of(filename: str) -> tuple[str | None, str | None, str]:
    """(flavour, noarch kind, reason). flavour is a backend token (``cu130``), ``"*"`` for
    every flavour, or None for all/ only, with the reason."""
    try:
        label = parse_wheel_name(filename).label
        variant = variant_of_wheel(filename)
    except VariantError as exc:
        return None, None, exc.message
    except InvalidWheelFilename as exc:
        return None, None, f"not a wheel file name ({exc})"
    if label is not None:
        why = (
            f"a wheel variant (label {label}, PEP 825): only variant-aware installers read it; "
            "index the +local builds it came from with --wheel-variants instead"
        )
        return None, None, why
    if variant is None:
        return _ANY, None, "no local version: in every flavour"
    if variant.backend is None:
        return _ANY, None, "universal: in every flavour"
    if variant.noarch:
        return None, variant.backend.kind.value, "noarch"
    return variant.backend.token, None, "binary"


def _read(path: Path) -> IndexedWheel:
    try:
        name, version, _, _, _ = parse_wheel_name(path.name)
    except InvalidWheelFilename as exc:
        raise WheelError(f"{path}: not a wheel file name ({exc})") from None
    verify_wheel(path)  # the record and wheel rules: METADATA's Name and Version among them
    metadata = read_metadata(path)
    flavour, kind, _ = flavours_of(path.name)
    variant = variant_of_wheel(path.name) if flavour not in (None, _ANY) else None  # binary
    return IndexedWheel(
        path=path,
        filename=path.name,
        project=str(name),
        version=version,
        sha256=sha256_file(path),
        metadata=metadata,
        requires_python=parse_metadata(metadata).get("Requires-Python"),
        flavour=flavour,
        kind=kind,
        variant=variant,
    )


def scan(wheelhouse: Path) -> list[IndexedWheel]:
    if not wheelhouse.is_dir():
        raise UsageError(f"{wheelhouse}: no such folder", hint="pass the folder holding the wheels")
    wheels = [_read(p) for p in sorted(wheelhouse.glob("*.whl"))]
    if not wheels:
        raise UsageError(f"{wheelhouse}: holds no *.whl files", hint="run to-wheel or build first")
    first: dict[WheelName, str] = {}
    for w in wheels:  # img2gray-0.1-… and Img2Gray-0.1.0-…: one wheel to pip, listed twice
        name = parse_wheel_name(w.filename)
        if (other := first.setdefault(name, w.filename)) != w.filename:
            raise WheelError(
                f"{other} and {w.filename} are one wheel to pip (the same project, version and "
                "tags, spelled apart): installers would take either",
                hint=f"keep one of them in {wheelhouse}",
            )
    return wheels


def _assign(
    wheels: list[IndexedWheel],
) -> tuple[dict[str, list[IndexedWheel]], list[tuple[str, str]]]:
    binary = sorted({w.flavour for w in wheels if w.flavour is not None and w.flavour != _ANY})
    flavours: dict[str, list[IndexedWheel]] = {f: [] for f in binary}
    unflavoured: list[tuple[str, str]] = []
    for w in wheels:
        if w.flavour == _ANY:
            targets = list(flavours)
        elif w.flavour is not None:
            targets = [w.flavour]
        elif w.kind is not None:
            targets = [f for f in flavours if _kind(f) == w.kind] or [w.kind]
        else:
            unflavoured.append((w.filename, flavours_of(w.filename)[2]))
            targets = []
        for f in targets:
            flavours.setdefault(f, []).append(w)
    for f, members in flavours.items():
        # Local labels sort "cuda" < "torch2.14…" < "universal": a noarch wheel beside binary
        # builds of the same release would win or lose by spelling, not by fit. Where a flavour
        # has binary builds of a release, its noarch wheels of that release are left out.
        built = {(w.project, w.version.public) for w in members if w.flavour == f}
        flavours[f] = [
            w for w in members if w.flavour == f or (w.project, w.version.public) not in built
        ]
    flavours.update(_per_torch(wheels))
    flavours[ALL] = list(wheels)
    return flavours, unflavoured


def _per_torch(wheels: list[IndexedWheel]) -> dict[str, list[IndexedWheel]]:
    """``torch<X.Y>/<flavour>`` for every torch series and flavour a binary wheel names."""
    keys = sorted(
        {
            (w.variant.torch, w.flavour)
            for w in wheels
            if w.variant is not None and w.variant.torch is not None and w.flavour is not None
        }
    )
    indexes: dict[str, list[IndexedWheel]] = {}
    for torch, flavour in keys:
        fits = [(fit, w) for w in wheels if (fit := _torch_fit(w, torch, flavour)) is not None]
        # Of each release keep only the closest kind: local labels would otherwise rank a
        # stable-ABI, noarch or universal wheel above (or below) the exact build by spelling.
        best: dict[tuple[str, str], tuple[int, int]] = {}
        for fit, w in fits:
            key = (w.project, w.version.public)
            best[key] = min(fit, best.get(key, fit))
        indexes[f"torch{torch}/{flavour}"] = [
            w for fit, w in fits if fit == best[(w.project, w.version.public)]
        ]
    return indexes


def _variant_groups(flavours: Mapping[str, list[IndexedWheel]]) -> dict[str, list[IndexedWheel]]:
    """``torch<X.Y>/variants``: the CUDA builds of every ``torch<X.Y>/cu*`` index (the closest
    kind of each release, as there), to be published as wheel variants labelled by flavour."""
    groups: dict[str, list[IndexedWheel]] = {}
    for key, members in sorted(flavours.items()):
        series, _, flavour = key.partition("/")
        if not series.startswith("torch") or _kind(flavour) != BackendKind.CUDA.value:
            continue
        for w in members:
            if w.variant is not None and w.flavour == flavour:
                groups.setdefault(f"{series}/{VARIANTS}", []).append(w)
    torch_dimension = [
        w
        for key, members in sorted(flavours.items())
        if "/" not in key and _kind(key) in _VARIANT_KINDS
        for w in members
        if w.flavour == key and _one_torch(w.variant)
    ]
    if torch_dimension:
        groups[VARIANTS] = torch_dimension
    return groups


def _one_torch(variant: Variant | None) -> bool:
    """A build for exactly one torch series (not stable-ABI, tvm-ffi or noarch)."""
    return (
        variant is not None
        and variant.torch is not None
        and variant.backend is not None
        and not variant.stable_abi
        and variant.tvm_ffi is None
    )


def _torch_fit(w: IndexedWheel, torch: TorchVersion, flavour: str) -> tuple[int, int] | None:
    """How closely ``w`` fits torch ``torch`` with ``flavour``, lower is closer: (0, 0) exact
    build, (1, -floor) stable-ABI build with a floor at or below (the newest floor closest),
    (2, 0) tvm-ffi build of the flavour (it needs no torch), (3, 0) noarch build of the backend,
    (4, 0) for every torch; None: not in that index. The order ``kernelwheel install`` uses."""
    v = w.variant
    if v is not None and w.flavour == flavour:
        if v.tvm_ffi is not None:
            return 2, 0
        if v.torch is not None and not v.stable_abi and v.torch == torch:
            return 0, 0
        if v.torch is not None and v.stable_abi and v.torch <= torch:
            return 1, -(v.torch.major * 1000 + v.torch.minor)
        return None
    if w.kind is not None and w.kind == _kind(flavour):
        return 3, 0
    return (4, 0) if w.flavour == _ANY else None


def _kind(flavour: str) -> str:
    """The backend kind of a flavour (``cu130`` -> ``cuda``), by the variant model's parser."""
    try:
        return Backend.parse_token(flavour).kind.value
    except VariantError:
        return flavour


_HEAD = (
    "<!DOCTYPE html>\n<html>\n<head>\n"
    '<meta name="pypi:repository-version" content="1.0">\n<title>{title}</title>\n'
    "</head>\n<body>\n"
)
_TAIL = "</body>\n</html>\n"


def _page(title: str, links: Iterable[str]) -> bytes:
    body = "".join(f"{link}<br>\n" for link in links)
    return (_HEAD.format(title=html.escape(title)) + body + _TAIL).encode()


def _folders_page(title: str, names: Iterable[str]) -> bytes:
    return _page(title, (f'<a href="{n}/">{n}</a>' for n in sorted(names)))


def _by_project(wheels: Iterable[IndexedWheel]) -> dict[str, list[IndexedWheel]]:
    projects: dict[str, list[IndexedWheel]] = {}
    for w in wheels:
        projects.setdefault(w.project, []).append(w)
    return projects


def _file_link(w: IndexedWheel, up: str) -> str:
    href = f"{up}{FILES}/{quote(w.filename)}#sha256={w.sha256}"
    attrs = [f'href="{html.escape(href)}"']
    if w.requires_python:
        attrs.append(f'data-requires-python="{html.escape(w.requires_python)}"')
    meta = f"sha256={hashlib.sha256(w.metadata).hexdigest()}"
    attrs += [f'data-dist-info-metadata="{meta}"', f'data-core-metadata="{meta}"']
    return f"<a {' '.join(attrs)}>{html.escape(w.filename)}</a>"


def _link(href: str, text: str, sha256: str | None = None) -> str:
    target = f"{href}#sha256={sha256}" if sha256 else href
    return f'<a href="{html.escape(target)}">{html.escape(text)}</a>'


def _write_variants(root: Path, groups: Mapping[str, list[IndexedWheel]]) -> None:
    """Each group's variant wheels and ``<name>-<version>-variants.json`` beside its project
    page, which links both (PEP 825: the JSON on every page that links the variant wheels)."""
    for key, members in sorted(groups.items()):
        base = root / key
        projects = _by_project(members)
        for project, items in sorted(projects.items()):
            folder = base / project
            folder.mkdir(parents=True)
            builds: dict[str, list[VariantBuild]] = {}
            for w in sorted(items, key=lambda w: w.filename):
                assert w.variant is not None and w.variant.backend is not None
                torch = w.variant.torch if key == VARIANTS else None
                build = write_variant_wheel(w.path, folder, w.variant.backend, torch)
                same = [b for bs in builds.values() for b in bs if b.path == build.path]
                if same:
                    raise WheelError(
                        f"{w.filename} and {same[0].source} would both be {build.path.name}",
                        hint="keep one build per torch series, flavour and platform in the "
                        "wheelhouse (a second C++ ABI has no variant property)",
                    )
                builds.setdefault(str(w.version.public), []).append(build)
            links = []
            for version, group in sorted(builds.items()):
                name = f"{escape_name(project)}-{version}-variants.json"
                (folder / name).write_text(variants_json(group), encoding="utf-8")
                links.append(_link(name, name))
                links += [
                    _link(b.path.name, b.path.name, sha256_file(b.path))
                    for b in sorted(group, key=lambda b: b.path.name)
                ]
            (folder / "index.html").write_bytes(_page(f"Links for {project}", links))
        (base / "index.html").write_bytes(
            _folders_page(f"Simple index ({key}: wheel variants)", projects)
        )


def _series_pages(flavours: Iterable[str]) -> dict[str, bytes]:
    """``torch<X.Y>/index.html``: the flavour indexes of one torch series, the CUDA ones newest
    first, each with the CUDA driver it needs, for a reader choosing the URL by the machine's
    driver (a cuXY build needs a driver that supports CUDA X.Y or newer; kernelwheel install
    chooses so by itself: docs/install.md)."""
    by_series: dict[str, list[str]] = {}
    for key in flavours:
        series, _, flavour = key.partition("/")
        if flavour and series.startswith("torch"):
            by_series.setdefault(series, []).append(flavour)
    pages = {}
    for series, members in sorted(by_series.items()):

        def rank(flavour: str) -> tuple[int, int, str]:
            try:
                backend = Backend.parse_token(flavour)
            except VariantError:
                return (1, 0, flavour)
            if backend.kind is BackendKind.CUDA and backend.version is not None:
                return (0, -(backend.version[0] * 1000 + backend.version[1]), flavour)
            return (1, 0, flavour)

        lines = []
        for flavour in sorted(members, key=rank):
            link = f'<a href="{html.escape(flavour)}/">{html.escape(flavour)}/</a>'
            if flavour == VARIANTS:
                link += (
                    " the CUDA builds as wheel variants: uv --preview-features wheel-variants "
                    "picks by the driver"
                )
            elif rank(flavour)[0] == 0:
                cuda = Backend.parse_token(flavour).cuda_version
                link += (
                    f" needs a CUDA driver that supports CUDA {cuda} or newer, and a CUDA "
                    f"{cuda.split('.')[0]} torch"
                )
            lines.append(link)
        title = f"{series}: one index per flavour; take the newest CUDA one your driver supports"
        pages[series] = _page(title, lines)
    return pages


def _write_tree(
    root: Path,
    wheels: list[IndexedWheel],
    flavours: dict[str, list[IndexedWheel]],
    others: Iterable[str],
) -> None:
    """The flavour indexes; the root page lists them and ``others`` (written separately)."""
    files = root / FILES
    files.mkdir(parents=True)
    for w in wheels:
        shutil.copyfile(w.path, files / w.filename)
        if (copied := sha256_file(files / w.filename)) != w.sha256:  # rewritten meanwhile
            raise WheelError(
                f"{w.path}: changed while it was indexed (sha256 {w.sha256} when checked, "
                f"{copied} when copied); the pages would list a hash the file does not have",
                hint="index again once nothing writes into the wheelhouse",
            )
        (files / f"{w.filename}.metadata").write_bytes(w.metadata)
    for flavour, members in sorted(flavours.items()):
        projects = _by_project(members)
        base = root / flavour
        base.mkdir(parents=True)
        up = "../" * (flavour.count("/") + 2)  # from <flavour>/<project>/ back to the root
        (base / "index.html").write_bytes(_folders_page(f"Simple index ({flavour})", projects))
        for project, items in sorted(projects.items()):
            (base / project).mkdir()
            items.sort(key=lambda w: (w.version, w.filename))
            (base / project / "index.html").write_bytes(
                _page(f"Links for {project}", (_file_link(w, up) for w in items))
            )
    for series, page in _series_pages([*flavours, *others]).items():
        (root / series / "index.html").write_bytes(page)
    (root / "index.html").write_bytes(_folders_page("kernel wheel indexes", {*flavours, *others}))


def build_index(wheelhouse: Path, output: Path, *, wheel_variants: bool = False) -> IndexResult:
    """Write the index of every wheel in ``wheelhouse`` to ``output`` (docs/to-wheel.md, "The
    index"; ``wheel_variants``: docs/install.md, "Wheel variants"), every wheel through the
    record rule first. Only what an earlier index wrote there is replaced (:mod:`.site`)."""
    output = output.absolute()
    if wheelhouse.is_dir():
        site.refuse_input_inside(wheelhouse, output, what="wheelhouse")
    wheels = scan(wheelhouse)
    flavours, unflavoured = _assign(wheels)
    groups = _variant_groups(flavours) if wheel_variants else {}
    made = [p for p in (output, *output.parents) if not p.exists()]  # deepest first
    try:
        old = site.prepare(output)
        with staging_dir(output, "index") as staging:
            staging.chmod(0o755)
            _write_tree(staging, wheels, flavours, groups)
            _write_variants(staging, groups)
            site.refuse_conflicts(staging, output, old)
            site.swap_in(staging, output, old)
    except BaseException as exc:
        for folder in made:  # the folders made for it go, as the staged index did
            with contextlib.suppress(OSError):  # not empty: something else is there now
                folder.rmdir()
        if not isinstance(exc, OSError):
            raise
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else exc.filename
        raise KernelwheelError(
            f"cannot write the index into {output}: "
            + (f"{where}: " if where else "")
            + f"{exc.strerror or exc}",
            hint=DISK_FULL_HINT
            if disk_full(exc)
            else "check that --output is a folder you may write to, or pass another",
        ) from exc
    listed = {**flavours, **groups}
    return IndexResult(
        output,
        {f: tuple(sorted(w.filename for w in ws)) for f, ws in sorted(listed.items())},
        tuple(unflavoured),
        {w.filename: w.sha256 for w in wheels},
    )
