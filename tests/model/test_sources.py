"""One type for where pip looks (model/sources.PipSources): the options' sources, a build
environment's, a cross build target's, a tvm-ffi environment's and install's, with one writer
of pip's flags."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kernelwheel.compat.rules import Torch
from kernelwheel.install.probe import Target
from kernelwheel.install.service import pip_command
from kernelwheel.model.sources import PYPI, PipSources
from kernelwheel.model.variant import Arch
from kernelwheel.plan.options import Options
from kernelwheel.toolchain.cross import TargetSpec
from kernelwheel.toolchain.envs import EnvSpec

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
MIRROR = PipSources("https://mirror/simple", ("/w",), False, (CPU_INDEX,))


def test_pip_args_order_index_extra_indexes_then_find_links() -> None:
    assert MIRROR.pip_args() == [
        "--index-url",
        "https://mirror/simple",
        "--extra-index-url",
        CPU_INDEX,
        "--find-links",
        "/w",
    ]
    assert PipSources(extra_index_urls=(CPU_INDEX,)).pip_args() == ["--extra-index-url", CPU_INDEX]
    assert PipSources().pip_args() == []


def test_no_index_keeps_only_the_find_links_for_pip_but_not_for_install() -> None:
    offline = PipSources("https://mirror/simple", ("/w",), True, (CPU_INDEX,))
    assert offline.pip_args() == ["--no-index", "--find-links", "/w"]
    assert offline.asked == ()
    # install reads the indexes itself whatever --no-index says (it only keeps them from pip)
    assert offline.indexes == ("https://mirror/simple", CPU_INDEX)
    assert PipSources(extra_index_urls=(CPU_INDEX,)).asked == (PYPI, CPU_INDEX)


def test_the_options_environments_and_cross_targets_carry_the_same_sources() -> None:
    options = Options(index_url="https://mirror/simple", find_links=("/w",), no_index=True)
    assert options.pip_sources == PipSources("https://mirror/simple", ("/w",), True)
    target = TargetSpec(Arch.AARCH64, "3.11", "torch==2.14.1", (), MIRROR)
    assert target.sources == EnvSpec("torch==2.14.1", (), MIRROR).sources == MIRROR


def test_the_cache_keys_are_those_of_the_flat_fields_they_replace() -> None:
    """The environments and cross sysroots already cached stay valid: these digests are the
    ones the specs gave when they carried the four fields themselves."""
    packed = PipSources("https://mirror/simple", ("/w",), True, ("https://x/cpu",))
    env = EnvSpec("torch==2.14.1+cpu", ("a==1",), packed)
    assert env.digest("3.11") == "491afd9470968cfa"
    online = EnvSpec("torch==2.14.1+cpu", ("a==1",), replace(packed, no_index=False))
    assert online.digest("3.11") == "172d920b189f2677"
    target = TargetSpec(Arch.AARCH64, "3.11", "torch==2.14.1", ("a==1",), online.sources)
    assert target.digest() == "1167d41c0036c1b5"


def test_install_writes_the_same_flags_with_its_local_find_links_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    torch = Torch("2.13.0+cpu", "cpu", None, True)
    target = Target(tmp_path / "py", (3, 11), "cpython", "x86_64", torch, "2.13.0+cpu", (), True)
    sources = PipSources("https://i/simple", ("house", "https://h/links"), False, ("https://x/",))
    head = [str(tmp_path / "py"), "-m", "pip", "install", "--disable-pip-version-check"]
    flags = ["--index-url", "https://i/simple", "--extra-index-url", "https://x/"]
    flags += ["--find-links", str(tmp_path / "house"), "--find-links", "https://h/links"]
    pins = ["k @ file:///k.whl"]
    assert pip_command(target, pins, sources) == [*head, *flags, *pins, "torch==2.13.0+cpu"]
    offline = replace(sources, no_index=True)
    forced = ["--force-reinstall", "--no-deps", "--no-index"]
    forced += ["--find-links", str(tmp_path / "house"), "--find-links", "https://h/links"]
    assert pip_command(target, pins, offline, force=True) == [*head, *forced, *pins]
