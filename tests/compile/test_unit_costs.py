"""The longest-first schedule (compile/unit_costs): unit seconds read from a real ninja run's
log, kept per project with a decay, and the order they give, with estimates for units never
timed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelwheel.compile.unit_costs import (
    longest_first,
    read_costs,
    record_costs,
    store_path,
    unit_seconds,
)

NINJA = Path(sys.executable).with_name("ninja")  # the ninja wheel of the test extra


def _sources(root: Path, sizes: dict[str, int]) -> list[str]:
    out = []
    for name, size in sizes.items():
        path = root / "csrc" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"/" * size)
        out.append(str(path))
    return out


def test_unit_seconds_come_from_a_real_ninja_run(tmp_path: Path) -> None:
    temp = tmp_path / "obj dir"  # a space: ninja's escapes are undone
    temp.mkdir()
    slow, fast = tmp_path / "src" / "slow.cu", tmp_path / "src" / "fast.cpp"
    slow.parent.mkdir()
    slow.write_text("x")
    fast.write_text("x")
    esc = str(temp).replace(" ", "$ ")
    (temp / "build.ninja").write_text(
        "rule compile\n  command = sleep 0.05 && touch $out\n"
        "rule cuda_compile\n  command = sleep 0.6 && touch $out\n"
        "rule link\n  command = touch $out\n"
        f"build {esc}/slow.o: cuda_compile {slow}\n"
        f"build {esc}/fast.o: compile {fast}\n"
        f"build {esc}/k.so: link {esc}/slow.o {esc}/fast.o\n"
    )
    subprocess.run([NINJA, "-C", str(temp)], check=True, capture_output=True)
    took = unit_seconds(temp)
    assert set(took) == {str(slow), str(fast)}  # compile units only, not the link
    assert 0.55 <= took[str(slow)] < 5
    assert took[str(fast)] < took[str(slow)]
    # ninja recompiles one unit: its latest row counts, the other's stays
    os.utime(fast, (0, 10**10))
    subprocess.run([NINJA, "-C", str(temp)], check=True, capture_output=True)
    assert set(unit_seconds(temp)) == {str(slow), str(fast)}
    assert unit_seconds(tmp_path / "none") == {}


def test_records_merge_per_project_with_a_decay(tmp_path: Path) -> None:
    path = store_path(tmp_path / "cache", tmp_path / "proj")
    assert path != store_path(tmp_path / "cache", tmp_path / "other")
    assert read_costs(path) == {}
    record_costs(path, {"csrc/a.cu": 80.0, "csrc/b.cpp": 4.0})
    # a compiler-cache hit (0.2 s): half the old record stays; a slower compile replaces it
    record_costs(path, {"csrc/a.cu": 0.2, "csrc/b.cpp": 9.0})
    assert read_costs(path) == {"csrc/a.cu": 40.0, "csrc/b.cpp": 9.0}
    path.write_text('{"csrc/a.cu": "junk", "csrc/b.cpp": -1, "csrc/c.cu": 3, "d": true}')
    assert read_costs(path) == {"csrc/c.cu": 3.0}  # a damaged record only loses its entries
    path.write_text("not json")
    assert read_costs(path) == {}


def test_never_timed_cu_units_first_by_capabilities_times_size(tmp_path: Path) -> None:
    binding, small_cu, big_cu, host, compat = _sources(
        tmp_path,
        {"binding.cpp": 2000, "small.cu": 3000, "big.cu": 9000, "host.cpp": 50000, "c.cpp": 10},
    )
    order = longest_first(
        [binding, small_cu, big_cu, host, compat],
        {},
        root=tmp_path,
        capabilities=4,
        first=[binding],
        last=[compat],
    )
    # the binding leads, then .cu by size (x capabilities), the host unit, the compat source
    assert order == [binding, big_cu, small_cu, host, compat]


def test_recorded_seconds_order_every_unit_and_scale_the_untimed(tmp_path: Path) -> None:
    binding, a, b, new, compat = _sources(
        tmp_path, {"binding.cpp": 2000, "a.cu": 4000, "b.cu": 4000, "new.cu": 8000, "c.cpp": 10}
    )
    recorded = {"csrc/binding.cpp": 30.0, "csrc/a.cu": 10.0, "csrc/b.cu": 50.0}
    order = longest_first(
        [binding, a, b, new, compat],
        recorded,
        root=tmp_path,
        capabilities=2,
        first=[binding],
        last=[compat],
    )
    # seconds per estimate unit (size x 2 capabilities for a .cu): binding 30/2000, a 10/8000,
    # b 50/8000; their median (b's) makes new.cu (16000 units) 100 s: it leads, then b 50 s,
    # the binding 30 s, a 10 s; the compat source last.
    assert order == [new, b, binding, a, compat]


def test_ties_keep_the_sources_order(tmp_path: Path) -> None:
    one, two, three = _sources(tmp_path, {"1.cu": 5000, "2.cu": 5000, "3.cu": 5000})
    assert longest_first([two, three, one], {}, root=tmp_path, capabilities=1) == [two, three, one]
