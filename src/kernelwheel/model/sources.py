"""Where pip looks: the one type for a build's options, its environments, a cross build's
target, a tvm-ffi environment and ``kernelwheel install``, and the one writer of pip's flags."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

PYPI = "https://pypi.org/simple"


def is_index_url(url: str) -> bool:
    """An http(s):// or file:// URL naming a place: pip ignores any other (a warning) and
    goes on with its other indexes."""
    parts = urlparse(url)
    return parts.scheme in ("http", "https", "file") and bool(parts.netloc or parts.path)


@dataclass(frozen=True)
class PipSources:
    """``--index-url`` (None: PyPI), ``--find-links``, ``--no-index``, and the
    ``--extra-index-url``s (a recipe's own index, or install's option). The field names are
    part of the environments' cache keys."""

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
        """The indexes pip asks: none with ``--no-index``, else the index (PyPI when none is
        named) and the extra ones."""
        return () if self.no_index else (self.index_url or PYPI, *self.extra_index_urls)

    def pip_args(self) -> list[str]:
        """pip's flags for these sources, for install and download alike: ``--no-index`` drops
        every index URL and keeps the find-links."""
        if self.no_index:
            args = ["--no-index"]
        else:
            args = ["--index-url", self.index_url] if self.index_url else []
            for url in self.extra_index_urls:
                args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        return args
