"""A tiny kernel project in kernel-builder's current format (edition 5), written by the tests:
one CPU op ``add_one(x) = x + 1``, a licence, a kernel card and a README. Small enough to
compile in seconds; real enough for kernels and pip to load."""

from __future__ import annotations

import textwrap
from pathlib import Path

NAME = "tiny-add"
PACKAGE = "tiny_add"
UPSTREAM = "https://example.org/team/tiny-add.git"
SOURCE = "git+https://example.org/team/tiny-add-kernel.git"
CARD = "# tiny-add\n\nAdds one, on the CPU.\n\nFrom a kernel card: Markdown — UTF-8.\n"
LICENSE = "Apache License, Version 2.0 (the full text would be here)\n"

BUILD_TOML = f"""\
[general]
name = "{NAME}"
version = {{version}}
edition = 5
license = "{{license}}"
upstream = "{UPSTREAM}"
source = "{SOURCE}"
backends = ["cpu"]
{{extra}}
[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.add_one]
backend = "cpu"
src = ["csrc/add_one.cpp"]
depends = ["torch"]
"""

BINDING = """\
#include <torch/library.h>

#include "registration.h"

at::Tensor add_one_cpu(at::Tensor const& x);

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("add_one(Tensor x) -> Tensor");
#if defined(CPU_KERNEL)
  ops.impl("add_one", c10::DispatchKey::CPU, &add_one_cpu);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""

KERNEL = """\
#include <ATen/core/Tensor.h>

at::Tensor add_one_cpu(at::Tensor const& x) { return x.add(1); }
"""

INIT = '''\
"""add_one(x) = x + 1."""

import torch

from ._ops import ops


def add_one(x: torch.Tensor) -> torch.Tensor:
    return ops.add_one(x)
'''


def write_tiny_kernel(
    root: Path,
    *,
    version: int = 1,
    license: str = "apache-2.0",
    extra_general: str = "",
    card: bool = True,
    readme: bool = True,
) -> Path:
    """Write the project into ``root`` (created) and return it."""
    files = {
        "build.toml": BUILD_TOML.format(version=version, license=license, extra=extra_general),
        "torch-ext/torch_binding.cpp": BINDING,
        f"torch-ext/{PACKAGE}/__init__.py": INIT,
        "csrc/add_one.cpp": KERNEL,
        "LICENSE": LICENSE,
    }
    if card:
        files["CARD.md"] = CARD
    if readme:
        files["README.md"] = "# tiny-add (the repository's README)\n"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root
