"""The edit-rebuild loop and reproducibility across machines, for real (CPU, torch 2.13):

- an edit of one kernel source recompiles that source and the binding (the build id reaches only
  the units naming TORCH_EXTENSION_NAME), every other object comes from ccache;
- a second "machine" (another cache folder with an empty local ccache, the project at another
  path) hits every object in the remote storage of a redis-server the test starts, and its wheel
  is byte-identical;
- no cache, project, home or build-environment path is in the shared object.

The project's two kernel sources are plain C++ functions the binding wraps: they reach no torch
header, so they compile in a fraction of a second (cached on their preprocessed text,
compile.torch_free); the binding and kernelwheel's compat unit include torch.

A build through another interpreter path (a --python environment elsewhere) without any cache
gives the same bytes: test_build_img2gray.py::test_rebuild_is_byte_identical[cpu] proves it with
its one real compile, which this test no longer repeats (docs/testing.md).
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.builds import build_env, cache_dir
from support.redis import redis_server

from kernelwheel.cli import main

pytestmark = pytest.mark.integration

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
SOURCES = ("k0", "k1")

# The binding wraps the kernels' plain C++ functions for torch; it and kernelwheel's compat unit
# are the only units that include torch's headers.
BINDING = """\
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "registration.h"
#include "../csrc/kernels.h"

static void run(void (*kernel)(float *, const float *, int64_t), at::Tensor &out,
                at::Tensor const &x) {
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "edits: contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.sizes() == x.sizes(), "edits: float, same size");
  kernel(out.mutable_data_ptr<float>(), x.const_data_ptr<float>(), x.numel());
}
WRAPPERS
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
REGISTRATIONS}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""


def _project(root: Path) -> Path:
    """Two kernel sources of plain C++ (no torch header: each compiles in well under a second)
    and the binding."""
    srcs = ", ".join(f'"csrc/{k}.cpp"' for k in SOURCES)
    wrappers = "".join(
        f"static void {k}_op(at::Tensor &out, at::Tensor const &x) {{ run({k}, out, x); }}\n"
        for k in SOURCES
    )
    registrations = "".join(
        f'  ops.def("{k}(Tensor! out, Tensor x) -> ()");\n'
        f'  ops.impl("{k}", c10::DispatchKey::CPU, &{k}_op);\n'
        for k in SOURCES
    )
    files = {
        "build.toml": f'[general]\nname = "edits"\nversion = 1\nbackends = ["cpu"]\n\n'
        f'[torch]\nsrc = ["torch-ext/torch_binding.cpp", "csrc/kernels.h"]\n\n'
        f'[kernel.ops]\nbackend = "cpu"\nsrc = [{srcs}, "csrc/kernels.h"]\n',
        "csrc/kernels.h": "#pragma once\n#include <cstdint>\n\n"
        + "".join(f"void {k}(float *out, const float *x, int64_t n);\n" for k in SOURCES),
        "torch-ext/torch_binding.cpp": BINDING.replace("WRAPPERS", wrappers).replace(
            "REGISTRATIONS", registrations
        ),
        "torch-ext/edits/__init__.py": "from ._ops import ops\n",
    }
    for i, k in enumerate(SOURCES):
        files[f"csrc/{k}.cpp"] = (
            f'#include "kernels.h"\n\nvoid {k}(float *out, const float *x, int64_t n) {{\n'
            f"  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * {i + 2}.0f;\n}}\n"
        )
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _cache(path: Path) -> Path:
    """A cache folder of its own, with the shared build environments (and ccache tool) linked in:
    as on a machine where they are made already."""
    path.mkdir(parents=True)
    for kept in ("envs", "tools"):
        real = cache_dir() / kept
        real.mkdir(parents=True, exist_ok=True)
        (path / kept).symlink_to(real.resolve())
    return path


def _build(project: Path, cache: Path, out: Path, *extra: str) -> Path:
    code = main(["build", str(project), "--only", VARIANT, "--cache-dir", str(cache),
                 "--output-dir", str(out), "--version", "1.0.0", "-q", *extra])  # fmt: skip
    assert code == 0, (out / "logs" / f"{VARIANT}.log").read_text()[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


def _misses(cache: Path) -> list[str]:
    log = next((cache / "work").glob(f"*/{VARIANT}/ccache-stats.log")).read_text()
    misses, current = [], ""
    for line in log.splitlines():
        if line.startswith("# "):
            current = Path(line[2:].strip()).name
        elif line.strip() == "cache_miss":
            misses.append(current)
    return sorted(misses)


def _so(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".so")]
        return zf.read(name)


@pytest.fixture()
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path / "redis") as url:
        yield url


def test_an_edit_recompiles_that_source_and_a_second_machine_hits_the_remote_cache(
    tmp_path: Path, redis_url: str
) -> None:
    project = _project(tmp_path / "alice" / "kernels" / "edits")
    cache_a = _cache(tmp_path / "alice" / "cache")
    remote = ("--ccache-remote", redis_url)
    first = _build(project, cache_a, tmp_path / "out-a0", *remote)
    assert _misses(cache_a) == ["k0.cpp", "k1.cpp", "kernelwheel_compat.cpp", "torch_binding.cpp"]
    ninja = next((cache_a / "work").glob(f"*/{VARIANT}/obj/build.ninja")).read_text()
    with_id = [b for b in re.split(r"\n(?=build )", ninja) if "-DTORCH_EXTENSION_NAME=" in b]
    assert len(with_id) == 1 and "torch_binding.cpp" in with_id[0]  # the binding only

    k1 = project / "csrc" / "k1.cpp"
    k1.write_text(k1.read_text().replace("* 3.0f", "* 30.0f"))  # an edit of its code
    edited = _build(project, cache_a, tmp_path / "out-a1", *remote)
    assert _misses(cache_a) == ["k1.cpp", "torch_binding.cpp"]  # the rebuild list
    assert edited.name == first.name and _so(edited) != _so(first)

    # Machine B: another cache folder (empty local ccache), the project at another path.
    other = tmp_path / "bob" / "src" / "checkout"
    shutil.copytree(project, other)
    cache_b = _cache(tmp_path / "bob" / "kwcache")
    on_b = _build(other, cache_b, tmp_path / "out-b", *remote)
    assert _misses(cache_b) == []
    stats = next((cache_b / "work").glob(f"*/{VARIANT}/ccache-stats.log")).read_text()
    assert stats.count("remote_storage_hit") + stats.count("remote_storage_read_hit") >= 4
    assert on_b.read_bytes() == edited.read_bytes()

    # No path of either machine, nor the build environment's, is in the shared object.
    env = build_env(VARIANT).python.parent.parent
    text = _so(on_b)
    for path in {str(tmp_path), str(cache_dir()), os.path.expanduser("~"), str(env)}:
        assert path.encode() not in text, path
