"""The import guard: Python source that refuses to load a build into a torch it was not made for.

Both producers of wheels embed it: ``kernelwheel build`` at the top of every ``_ops.py``
(:mod:`kernelwheel.builder.codegen`) and ``kernelwheel to-wheel`` as the
``_kernelwheel_guard`` module of a converted wheel (:mod:`kernelwheel.hub.guard`). It carries the
source of :mod:`.rules`, so the guard refuses by the very rules ``kernelwheel install`` selects
by.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass

from ..model.variant import Variant
from . import rules
from .builds import build_of


@dataclass(frozen=True)
class BuildStamp:
    """What the guard in ``_ops.py`` compares against the running torch."""

    dist_name: str
    version: str  # full version including the local part
    variant: Variant
    dev_of: str = ""  # a dev build's project folder: its refusal says to build again there


def rules_source() -> str:
    """The source of :mod:`kernelwheel.compat.rules`, the rules ``kernelwheel install`` selects
    by, for embedding: the guard runs the very same code."""
    source = inspect.getsource(rules)
    # Embedded as a raw triple-quoted string, which these would end or garble.
    assert "'''" not in source and not source.rstrip("\n").endswith("\\")
    return source


def guard_source(stamp: BuildStamp) -> str:
    """The guard: the rules module executed in its own namespace (so its names stay out of
    ``_ops``), then the build's facts checked against the running torch."""
    fields = dataclasses.asdict(build_of(stamp.variant))
    message = f'rules["refusal"]({stamp.dist_name!r}, {stamp.version!r}, build, running, found)'
    if stamp.dev_of:  # not pip's to mend: a dev build linked by a .pth (builder/dev)
        built = f"the dev build of {stamp.dist_name} ({stamp.dev_of}) was built for "
        fix = (
            f". Build it for this torch: kernelwheel dev {stamp.dev_of} with this Python's "
            "environment active (or --python), or delete the kernelwheel-dev-*.pth in its "
            "site-packages that links this build"
        )
        message = (
            f'{built!r} + rules["describe_build"](build) + ", but this Python runs " '
            f'+ running.describe() + "; mismatch in: " + ", ".join(found) + {fix!r}'
        )
    return f"""
_KW_RULES = r'''{rules_source()}'''


def _kw_check_torch():
    import torch

    rules = {{"__name__": __name__}}
    exec(compile(_KW_RULES, "<kernelwheel.compat.rules>", "exec"), rules)
    build = rules["Build"](**{fields!r})
    running = rules["torch_facts"](torch)
    found = rules["problems"](build, running)
    if found:
        raise ImportError(
            {message}
        )


_kw_check_torch()
"""
