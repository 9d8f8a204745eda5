"""`kernelwheel index --help` gives the per-torch index as docs/install.md does: as pip's only
index (``--index-url``), never beside PyPI, where a higher version of the same name would win."""

from __future__ import annotations

import argparse

from kernelwheel.cli import make_parser


def _index_help() -> str:
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return str(sub.choices["index"].format_help())


def test_the_per_torch_index_is_given_as_the_only_index() -> None:
    text = " ".join(_index_help().split())
    assert "--extra-index-url" not in text
    assert "plain 'pip install --index-url DIR/torch2.14/cu130/ PKG' gets the right build" in text
    assert "pip install --index-url http://127.0.0.1:8000/torch2.14/cu130/ img2gray" in text
