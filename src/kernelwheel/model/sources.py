"""Where pip looks, for every build, environment and install, and the one writer of pip's flags."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

PYPI = "https://pypi.org/simple"


def is_index_url(url: str) -> bool:
    """An http(s):// or file:// URL naming a place: pip ignores any other."""
    parts = urlparse(url)
    return parts.scheme in ("http", "https", "file") and bool(parts.netloc or parts.path)


@dataclass(frozen=True)
class PipSources:
    """pip's index options (``index_url`` None: PyPI). The field names are part of the
    environments' cache keys."""

    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    extra_index_urls: tuple[str, ...] = ()

    @property
    def indexes(self) -> tuple[str, ...]:
        """The index URLs named, ``--no-index`` or not (install reads them itself)."""
        return ((self.index_url,) if self.index_url else ()) + self.extra_index_urls

    @property
    def asked(self) -> tuple[str, ...]:
        return () if self.no_index else (self.index_url or PYPI, *self.extra_index_urls)

    def pip_args(self) -> list[str]:
        if self.no_index:
            args = ["--no-index"]
        else:
            args = ["--index-url", self.index_url] if self.index_url else []
            for url in self.extra_index_urls:
                args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        return args
