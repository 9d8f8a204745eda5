"""Reuse of an unchanged variant's compile: the key, the input fingerprints, the repair record."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from kernelwheel._util import sha256_file
from kernelwheel.builder.reuse import Reuse, build_key, include_search, repair_key
from kernelwheel.builder.stale import remove_shadowed
from kernelwheel.compile.compile_spec import CommandSpec, CommandUnit, CompileSpec
from kernelwheel.toolchain.envs import EnvInfo

ENV = EnvInfo(
    python=Path("/envs/x/bin/python"),
    python_version="3.11.7",
    machine="x86_64",
    purelib=Path("/envs/x/lib/python3.11/site-packages"),
    torch="2.13.0+cpu",
    cuda=None,
    hip=None,
    cxx11_abi=True,
)


def _spec(**kw: object) -> CompileSpec:
    base: dict[str, object] = dict(
        name="_img2gray_ab",
        sources=("/p/csrc/a.cpp",),
        include_dirs=("/stage/include",),
        define_macros=(("TORCH_EXTENSION_NAME", "_img2gray_ab"),),
        cxx_flags=("-O3",),
        nvcc_flags=(),
        cuda=False,
        cuda_home=None,
        build_temp="/stage/obj",
        build_lib="/stage/lib",
        jobs=2,
        requested_limited_api="0x03090000",
    )
    base.update(kw)
    return CompileSpec(**base)  # type: ignore[arg-type]


def test_key_covers_spec_environment_compilers_and_their_variables(tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text("# v1\n")
    tools = tmp_path / "bin"
    tools.mkdir()
    cxx = tools / "c++"
    cxx.write_text("#!/bin/sh\n")
    cxx.chmod(0o755)
    env_vars = {"PATH": str(tools)}
    key = build_key(_spec(), ENV, env_vars, worker)
    assert key == build_key(_spec(), ENV, dict(env_vars), worker)  # deterministic
    changed = [
        build_key(_spec(cxx_flags=("-O2",)), ENV, env_vars, worker),
        build_key(_spec(sources=("/p/csrc/b.cpp",)), ENV, env_vars, worker),
        build_key(_spec(), EnvInfo(**{**ENV.__dict__, "torch": "2.13.1+cpu"}), env_vars, worker),
        build_key(_spec(), ENV, {**env_vars, "CXXFLAGS": "-march=native"}, worker),
        build_key(_spec(), ENV, {**env_vars, "CXX": "clang++"}, worker),
    ]
    assert len({key, *changed}) == len(changed) + 1
    cxx.write_text("#!/bin/sh\n# another compiler\n")  # a new compiler binary at the same path
    assert build_key(_spec(), ENV, env_vars, worker) != key
    key = build_key(_spec(), ENV, env_vars, worker)
    worker.write_text("# v2\n")
    assert build_key(_spec(), ENV, env_vars, worker) != key


def test_key_ignores_how_the_compile_is_scheduled(tmp_path: Path) -> None:
    # A new unit-seconds record reorders the units and a memory reading changes the job count:
    # neither changes the shared object, so neither may turn an unchanged build into a rebuild.
    worker = tmp_path / "worker.py"
    worker.write_text("# v1\n")
    two = ("/p/csrc/a.cpp", "/p/csrc/b.cu")
    key = build_key(_spec(sources=two, nvcc_flags=("-O3", "--threads=4")), ENV, {}, worker)
    reordered = _spec(
        sources=two, schedule=tuple(reversed(two)), jobs=7, nvcc_flags=("-O3", "--threads=1")
    )
    assert build_key(reordered, ENV, {}, worker) == key
    assert build_key(_spec(sources=two, nvcc_flags=("-O2", "--threads=4")), ENV, {}, worker) != key


def _compiled(tmp_path: Path) -> tuple[Reuse, dict[str, object], Path, Path, Path]:
    project, system, lib = tmp_path / "project", tmp_path / "torch", tmp_path / "lib"
    for d in (project, system, lib):
        d.mkdir(parents=True)
    source, header, torch_header = project / "a.cpp", project / "a.h", system / "ATen.h"
    source.write_text('#include "a.h"\n')
    header.write_text("int f();\n")
    torch_header.write_text("// torch\n")
    so = lib / "_img2gray_ab.abi3.so"
    so.write_bytes(b"\x7fELF one build")
    result: dict[str, object] = {
        "shared_object": str(so),
        "py_limited_api": "0x03090000",
        "inputs": [str(source), str(header), str(torch_header)],
        "capabilities": [],
    }
    reuse = Reuse(tmp_path / "reuse" / "torch213-cxx11-cpu-x86_64-linux", (project,))
    assert reuse.store("K", result, [str(source)])
    return reuse, result, header, torch_header, so


def test_unchanged_inputs_give_the_stored_object(tmp_path: Path) -> None:
    reuse, result, _, _, so = _compiled(tmp_path)
    so.write_bytes(b"overwritten by a later build elsewhere")  # the entry keeps its own copy
    hit = reuse.lookup("K")
    assert hit is not None and hit["py_limited_api"] == "0x03090000" and "inputs" not in hit
    assert Path(str(hit["shared_object"])).read_bytes() == b"\x7fELF one build"
    assert reuse.lookup("another key") is None


def test_a_changed_project_file_is_seen_by_content(tmp_path: Path) -> None:
    reuse, _, header, _, _ = _compiled(tmp_path)
    st = header.stat()
    header.write_text("int g();\n")  # same size, and the old mtime put back: content decides
    os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert reuse.lookup("K") is None


def test_a_touched_project_file_with_the_same_content_still_hits(tmp_path: Path) -> None:
    reuse, _, header, _, _ = _compiled(tmp_path)
    header.write_text(header.read_text())
    os.utime(header, ns=(1, 1))
    assert reuse.lookup("K") is not None


def test_a_changed_toolchain_header_is_seen_by_size_and_mtime(tmp_path: Path) -> None:
    reuse, _, _, torch_header, _ = _compiled(tmp_path)
    os.utime(torch_header, ns=(1, 1))
    assert reuse.lookup("K") is None


def test_a_removed_input_or_a_damaged_entry_misses(tmp_path: Path) -> None:
    reuse, _, header, _, _ = _compiled(tmp_path)
    stored = next(reuse.folder.glob("*.so"))
    stored.write_bytes(b"damaged")
    assert reuse.lookup("K") is None
    reuse, _, header, _, _ = _compiled(tmp_path / "again")
    header.unlink()
    assert reuse.lookup("K") is None


def test_a_project_file_saved_while_the_compile_ran_stores_no_entry(tmp_path: Path) -> None:
    """The fingerprints are taken after the compile: a file saved meanwhile (even with an old
    mtime, as `cp -p` leaves it) would label the object compiled from its old content as the
    new one's, and the next build would reuse it."""
    reuse, result, header, _, _ = _compiled(tmp_path)
    started = time.time_ns()
    header.write_text("int g();\n")  # saved while the compiler ran
    os.utime(header, (1e9, 1e9))
    edited = Reuse(reuse.folder, (header.parent,), (header.parent,))
    assert not edited.store("K", result, [], started_ns=started)
    assert edited.lookup("K") is None and not edited.folder.exists()
    # nothing of the project changed since the compile began: stored
    assert edited.store("K", result, [], started_ns=time.time_ns() + 10**9)
    assert edited.lookup("K") is not None


def test_a_project_file_saved_right_before_the_compile_is_judged_by_its_bytes(
    tmp_path: Path,
) -> None:
    """Saved within the clock margin before the compile began, its ctime cannot tell that save
    from one during the compile: no entry was stored, so the next unchanged run linked again.
    Its digest taken before the compile decides."""
    reuse, result, header, _, _ = _compiled(tmp_path)
    edited = Reuse(reuse.folder, (header.parent,), (header.parent,))
    header.write_text("int h();\n")
    before = {str(p): sha256_file(p) for p in header.parent.iterdir()}
    started = time.time_ns()
    assert not edited.store("K", result, [], started_ns=started)  # unknown bytes: none
    assert edited.store("K", result, [], started_ns=started, before=before)
    assert edited.lookup("K") is not None
    other = {**before, str(header): "0" * 64}  # not the bytes it held before the compile
    assert not edited.store("K", result, [], started_ns=started, before=other)


def test_no_entry_without_a_deps_log(tmp_path: Path) -> None:
    reuse, result, _, _, _ = _compiled(tmp_path)
    assert not reuse.store("K", {**result, "inputs": None}, [])
    assert reuse.lookup("K") is None and not reuse.folder.exists()


def test_repair_record_matches_only_the_same_raw_wheel_and_key(tmp_path: Path) -> None:
    reuse, _, _, _, _ = _compiled(tmp_path)
    raw = tmp_path / "img2gray-0.1.0-cp39-abi3-linux_x86_64.whl"
    raw.write_bytes(b"raw wheel")
    repaired = tmp_path / "img2gray-0.1.0-cp39-abi3-manylinux_2_28_x86_64.whl"
    repaired.write_bytes(b"repaired wheel")
    key = repair_key("manylinux_2_28", False)
    reuse.keep_repaired(raw, key, repaired, "manylinux_2_28_x86_64", (), "log")
    hit = reuse.repaired(raw, key)
    assert hit is not None and hit[0].read_bytes() == b"repaired wheel"
    assert hit[1]["tag"] == "manylinux_2_28_x86_64"
    assert reuse.repaired(raw, repair_key("manylinux_2_28", True)) is None
    raw.write_bytes(b"another raw wheel")
    assert reuse.repaired(raw, key) is None


def _two_include_dirs(tmp_path: Path) -> tuple[Reuse, Path, Path, Path]:
    """A project with inc1/ and inc2/ on the include path (in that order), its source including
    "cfg.h", found in inc2/; and a torch header outside the listed folders."""
    project = tmp_path / "p"
    source = project / "csrc" / "k.cpp"
    inc1, inc2 = project / "inc1", project / "inc2"
    for folder in (source.parent, inc1, inc2):
        folder.mkdir(parents=True)
    source.write_text('#include "cfg.h"\n#include <ATen/core/Tensor.h>\n')
    (inc2 / "cfg.h").write_text("#define VALUE 2\n")
    torch_header = tmp_path / "torch" / "include" / "ATen" / "core" / "Tensor.h"
    torch_header.parent.mkdir(parents=True)
    torch_header.write_text("// torch\n")
    so = tmp_path / "stage" / "k.so"
    so.parent.mkdir()
    so.write_bytes(b"\x7fELF")
    reuse = Reuse(tmp_path / "reuse", (project,))
    inputs = [str(source), str(inc2 / "cfg.h"), str(torch_header)]
    result = {"shared_object": str(so), "inputs": inputs, "py_limited_api": "0x03090000"}
    assert reuse.store("K", result, [str(source)], [str(inc1), str(inc2)])
    assert reuse.lookup("K") is not None
    return reuse, source, inc1, inc2


def test_a_header_that_newly_shadows_another_on_the_include_path_misses(tmp_path: Path) -> None:
    """Issue 30: inc1/cfg.h added in front of inc2/cfg.h changes no input, yet the compile
    would pick it up: the entry must not be reused."""
    reuse, _, inc1, _ = _two_include_dirs(tmp_path)
    (inc1 / "cfg.h").write_text("#define VALUE 1\n")
    assert reuse.lookup("K") is None


def test_a_header_beside_the_source_shadows_for_quoted_includes(tmp_path: Path) -> None:
    reuse, source, _, _ = _two_include_dirs(tmp_path)
    (source.parent / "cfg.h").write_text("#define VALUE 3\n")
    assert reuse.lookup("K") is None


def test_a_project_header_that_shadows_torchs_misses(tmp_path: Path) -> None:
    reuse, _, inc1, _ = _two_include_dirs(tmp_path)
    shadow = inc1 / "ATen" / "core" / "Tensor.h"
    shadow.parent.mkdir(parents=True)
    shadow.write_text("// not torch\n")
    assert reuse.lookup("K") is None


def test_a_dev_object_that_read_a_now_shadowed_header_is_removed(tmp_path: Path) -> None:
    # dev, after an edit: the reuse entry missed for the new csrc/cfg.h in front of inc2/cfg.h,
    # then ninja, whose known inputs had not changed, said "nothing to compile" and kept the
    # object compiled from inc2/cfg.h
    reuse, source, inc1, inc2 = _two_include_dirs(tmp_path)
    assert reuse.appeared() == []
    (source.parent / "cfg.h").write_text("#define VALUE 3\n")
    assert reuse.appeared() == [str(source.parent / "cfg.h")]
    objects = tmp_path / "obj"
    objects.mkdir()
    k, other = objects / "k.o", objects / "other.o"
    for obj in (k, other):
        obj.write_bytes(b"")
    deps = {str(k): [str(source), str(inc2 / "cfg.h")], str(other): [str(inc2 / "x.h")]}
    remove_shadowed(deps, reuse.appeared())
    assert not k.exists() and other.exists()


def test_a_header_after_the_one_found_does_not_shadow(tmp_path: Path) -> None:
    reuse, _, _, inc2 = _two_include_dirs(tmp_path)
    later = inc2.parent / "inc3"
    later.mkdir()
    (later / "cfg.h").write_text("#define VALUE 4\n")  # not on the path: changes nothing
    (inc2 / "other.h").write_text("// not included\n")
    assert reuse.lookup("K") is not None


def test_a_dangling_link_or_a_linked_folder_shadows_too(tmp_path: Path) -> None:
    """The shadow check lists folders instead of testing each path: links count as they did."""
    reuse, _, inc1, _ = _two_include_dirs(tmp_path)
    (inc1 / "cfg.h").symlink_to(tmp_path / "nowhere.h")  # dangling: the compiler finds it
    assert reuse.lookup("K") is None
    (inc1 / "cfg.h").unlink()
    assert reuse.lookup("K") is not None
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "core").mkdir(parents=True)
    (elsewhere / "core" / "Tensor.h").write_text("// not torch\n")
    (inc1 / "ATen").symlink_to(elsewhere)  # a linked folder holding a shadowing header
    assert reuse.lookup("K") is None


def test_a_header_named_as_torchs_that_no_include_finds_first_does_not_miss(
    tmp_path: Path,
) -> None:
    """csrc/Exception.h, new, included by nothing, missed every unit that read torch's
    c10/util/Exception.h: torch's include folders were unknown (not in the spec), so 1-3 path
    suffixes were guessed in every listed folder. They are read from torch's build.ninja."""
    project, torch_include = tmp_path / "p", tmp_path / "torch" / "include"
    api = torch_include / "torch" / "csrc" / "api" / "include"
    source = project / "csrc" / "k.cpp"
    headers = [torch_include / "c10" / "util" / "Exception.h", api / "torch" / "all.h"]
    for path in (source, *headers):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// x\n")
    obj = tmp_path / "stage" / "obj"
    obj.mkdir(parents=True)
    flags = f"-O3 -I{project / 'inc'} '-I{torch_include}' -I {api} -isystem {tmp_path / 'sys'}"
    (obj / "build.ninja").write_text(f"cflags = {flags} -c\npost_cflags = -I/not/searched\n")
    spec = _spec(sources=(str(source),), include_dirs=(str(project / "inc"),), build_temp=str(obj))
    searched = include_search(spec)
    assert searched == [str(project / "inc"), str(torch_include), str(api), str(tmp_path / "sys")]
    so = tmp_path / "stage" / "k.so"
    so.write_bytes(b"\x7fELF")
    reuse = Reuse(tmp_path / "reuse", (project,))
    result = {"shared_object": str(so), "inputs": [str(source), *map(str, headers)]}
    assert reuse.store("K", result, [str(source)], searched)
    for rel in ("csrc/Exception.h", "inc/Exception.h", "inc/util/Exception.h", "csrc/all.h"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("// the author's\n")
        assert reuse.lookup("K") is not None, rel
    # found first, they shadow torch's: <c10/util/Exception.h>, <torch/all.h>
    for rel in ("inc/c10/util/Exception.h", "inc/torch/all.h"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("// the author's\n")
        assert reuse.lookup("K") is None, rel
        (project / rel).unlink()


def test_a_commands_spec_searches_its_units_folders_then_nvccs_toolkit() -> None:
    units = (
        CommandUnit("/p/a.cpp", "/o/a.o", ("c++", "-I/p/inc", "-isystem", "/s", "-I", "/t")),
        CommandUnit("/p/k.cu", "/o/k.o", ("nvcc", "-I/p/inc", "-Xcompiler=-fPIC", "-I/x")),
    )
    spec = CommandSpec(units, ("c++",), "/o/k.so", "/o", 1, cuda_home="/cuda")
    assert include_search(spec) == ["/p/inc", "/t", "/s", "/x", "/cuda/include"]


def test_a_remembered_digest_is_hashed_again_only_when_the_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernelwheel._util as util

    so, memo = tmp_path / "k.so", tmp_path / "k.so.sha256"
    so.write_bytes(b"\x7fELF one")
    hashed: list[Path] = []
    real = util.sha256_file
    monkeypatch.setattr(util, "sha256_file", lambda p: hashed.append(p) or real(p))
    first = util.sha256_remembered(so, memo)
    assert first == hashlib.sha256(b"\x7fELF one").hexdigest()
    assert util.sha256_remembered(so, memo) == first
    assert len(hashed) == 1  # the second answer came from the memo
    so.write_bytes(b"\x7fELF two")  # same size, another mtime
    os.utime(so, ns=(1, 1))
    assert util.sha256_remembered(so, memo) == hashlib.sha256(b"\x7fELF two").hexdigest()
    memo.write_text("junk")
    assert util.sha256_remembered(so, memo) == hashlib.sha256(b"\x7fELF two").hexdigest()
    assert len(hashed) == 3
