"""One type for where pip looks (builder/envs.PipSources): the options' sources, a build
environment's, a cross build target's and a tvm-ffi environment's, with one formatter of pip's
arguments."""

from __future__ import annotations

from kernelwheel.builder.cross import TargetSpec
from kernelwheel.builder.envs import EnvSpec, IndexOptions, PipSources, pip_install_args
from kernelwheel.model.variant import Arch

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_every_holder_gives_the_same_sources() -> None:
    env = EnvSpec("torch==2.14.1+cpu", (), "https://mirror/simple", (CPU_INDEX,), ("/w",))
    target = TargetSpec(
        Arch.AARCH64, "3.11", "torch==2.14.1", (), "https://mirror/simple", (CPU_INDEX,), ("/w",)
    )
    want = PipSources("https://mirror/simple", ("/w",), False, (CPU_INDEX,))
    assert env.pip_sources == target.pip_sources == want
    assert env.index_options == IndexOptions("https://mirror/simple", ("/w",), False)
    assert pip_install_args(want) == [
        "--index-url",
        "https://mirror/simple",
        "--extra-index-url",
        CPU_INDEX,
        "--find-links",
        "/w",
    ]


def test_no_index_keeps_only_the_find_links() -> None:
    sources = PipSources("https://mirror/simple", ("/w",), True, (CPU_INDEX,))
    assert pip_install_args(sources) == ["--no-index", "--find-links", "/w"]
