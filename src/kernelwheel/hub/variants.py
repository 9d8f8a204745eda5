"""A Hub kernel's builds as the wheels ``to-wheel`` would make (``kernelwheel variants``,
docs/variants.md): ``build/`` listed, nothing downloaded, each folder the install ``Candidate``
to-wheel would write, so install's own selection judges it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from .._util import RUNNER, Runner
from ..errors import HubError, VariantError
from ..install.sources import Candidate
from ..model.variant import Variant
from ..wheels.reader import escape_name
from .convert import dist_name, wheel_tag
from .layout import plan
from .revision import RefKind, Resolution, VersionRequest
from .source import RepoSource, group_by_variant
from .towheel import open_source, resolve


@dataclass(frozen=True)
class HubBuilds:
    where: str  # "Hub repo org/name (…)" or "git clone /path"
    resolution: Resolution
    candidates: tuple[Candidate, ...]
    names: dict[str, str]  # wheel file name -> its build/ folder
    unmappable: tuple[tuple[str, str], ...]  # (folder, why it names no variant)


def split_source(text: str, what: str = "SOURCE") -> tuple[str, str | None]:
    """``org/name@1`` -> (``org/name``, ``1``); no ``@``, or a folder of that name (a clone in
    ``kernel@2``): (text, None). ``what``: the argument's name in the refusal."""
    repo, at, version = text.rpartition("@")
    if not at or Path(text).is_dir():
        return text, None
    if not repo or not version.strip():
        raise HubError(
            f"{what} {text!r}: nothing {'before' if not repo else 'after'} '@'",
            hint="e.g. kernels-community/relu@1 (branch v1) or kernels-community/relu@1.1.2",
        )
    return repo, version


def hub_builds(text: str, runner: Runner = RUNNER) -> HubBuilds:
    repo, version = split_source(text)
    src = open_source(repo, runner=runner)
    request = VersionRequest.parse(version if version is not None else _newest_major(src))
    resolution = resolve(src, request)
    folders = group_by_variant(src.list_build(resolution.commit))
    if not folders:
        raise HubError(
            f"{src.where}: build/ holds no variant folders at commit {resolution.commit}",
            hint="kernel repos keep each build in build/<variant>/",
        )
    base = Version(resolution.version)
    candidates, names, unmappable = [], {}, []
    for folder, files in folders.items():
        try:  # named as to-wheel names it, metadata.json aside (nothing is downloaded)
            variant = Variant.parse(folder)
            inner = [f.inner for f in files]
            package = plan(inner, metadata=None, repo_name=src.name, where=folder).package
        except VariantError as exc:
            unmappable.append((folder, f"cannot map the variant name: {exc}"))
            continue
        except HubError as exc:
            unmappable.append((folder, str(exc)))
            continue
        dist = escape_name(dist_name(None, src.name, package))
        filename = f"{dist}-{base}+{variant.local_version}-{wheel_tag(variant)}.whl"
        candidates.append(Candidate(filename, f"{src.where}: build/{folder}", None, src.where))
        names[filename] = folder
    return HubBuilds(src.where, resolution, tuple(candidates), names, tuple(unmappable))


def _newest_major(src: RepoSource) -> str:
    majors = [
        int(ref.name[1:])
        for ref in src.refs()
        if ref.kind in (RefKind.BRANCH, RefKind.CACHED) and re.fullmatch(r"v[0-9]+", ref.name)
    ]
    if not majors:
        raise HubError(
            f"{src.where} has no version branch (v1, v2, ...)",
            hint="name the version: SOURCE@1.1.2 (tag v1.1.2) or SOURCE@'>=1,<2'",
        )
    return str(max(majors))
