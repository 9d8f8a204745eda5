"""The stable-ABI torch floor, measured: real shared objects built here import libtorch shim
functions of different first releases (data/torch_shim_versions.tsv); the floor they set is
what the wheel's Requires-Dist states and what ``kernelwheel check`` reports beside the
declared one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.builds import CPU_VARIANT, CUDA_VARIANT, build_env
from support.sofiles import build_extension

from kernelwheel import cli
from kernelwheel.abi._elf import read_elf
from kernelwheel.abi.checker import check_shared_object, check_wheel
from kernelwheel.abi.torch_floor import (
    declared_floor,
    floor_of_files,
    load_shim_table,
    measure_floor,
    parse_table,
    shim_imports,
)
from kernelwheel.builder.wheelmeta import torch_requirement
from kernelwheel.model.variant import TorchVersion, Variant
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.reader import parse_metadata, read_metadata

ROOT = Path(__file__).resolve().parents[2]
STABLE = Variant.parse("torch-stable-abi210-cpu-x86_64-linux")

# Shim functions and the release torch's headers guard each with (2.14.1's headers).
SINCE = {
    "aoti_torch_get_numel": None,  # unguarded: predates the guards, sets no floor
    "torch_library_impl": TorchVersion(2, 10),
    "torch_from_blob": TorchVersion(2, 11),
    "torch_library_def_with_tags": TorchVersion(2, 12),
    "torch_new_stable_ivalue": TorchVersion(2, 13),
    "torch_has_storage": TorchVersion(2, 14),
}


def _so(tmp: Path, name: str, symbols: tuple[str, ...]) -> Path:
    """A real limited-API extension whose init calls ``symbols`` (left undefined: libtorch's)."""
    decls = "".join(f"extern int {s}(void);\n" for s in symbols)
    calls = "".join(f"(void){s}();" for s in symbols)
    data = build_extension(tmp / "cache", name, code=(decls, calls))
    out = tmp / f"{name}.abi3.so"
    out.write_bytes(data)
    return out


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("floor")
    return {
        "old": _so(tmp, "_old", ("aoti_torch_get_numel", "torch_library_impl")),
        "mixed": _so(
            tmp,
            "_mixed",
            ("aoti_torch_get_numel", "torch_library_impl", "torch_library_def_with_tags"),
        ),
        "newest": _so(tmp, "_newest", ("torch_from_blob", "torch_has_storage")),
        "none": _so(tmp, "_none", ()),
        "unknown": _so(tmp, "_unknown", ("torch_library_impl", "aoti_torch_kw_not_yet_in_torch")),
    }


def test_the_table_gives_each_function_its_first_release() -> None:
    table = load_shim_table()
    assert {name: table.since[name] for name in SINCE} == SINCE
    assert table.seen == ("2.13.0+cpu", "2.14.1+cu130")
    assert len(table.since) > 800


def test_a_table_line_that_is_not_one_is_refused() -> None:
    with pytest.raises(Exception, match=r"t\.tsv:2: expected name, since, source, header"):
        parse_table("# from torch 2.14.1;\nnot a line\n", source="t.tsv")
    with pytest.raises(Exception, match=r"t\.tsv:1: .*invalid torch version 'x'"):
        parse_table("torch_foo\tx\tguard\t-\n", source="t.tsv")


def test_the_imports_are_the_undefined_shim_functions(objects: dict[str, Path]) -> None:
    info = read_elf(objects["mixed"])
    assert shim_imports(info) == (
        "aoti_torch_get_numel",
        "torch_library_def_with_tags",
        "torch_library_impl",
    )
    assert shim_imports(read_elf(objects["none"])) == ()


@pytest.mark.parametrize(
    ("which", "floor", "setting"),
    [
        ("old", TorchVersion(2, 10), ("torch_library_impl",)),
        ("mixed", TorchVersion(2, 12), ("torch_library_def_with_tags",)),
        ("newest", TorchVersion(2, 14), ("torch_has_storage",)),
        ("none", None, ()),
    ],
)
def test_the_floor_of_a_real_object(
    objects: dict[str, Path], which: str, floor: TorchVersion | None, setting: tuple[str, ...]
) -> None:
    measured = floor_of_files([objects[which]])
    assert (measured.floor, measured.setting, measured.unknown) == (floor, setting, ())


def test_objects_together_take_the_newest_floor(objects: dict[str, Path]) -> None:
    measured = floor_of_files([objects["old"], objects["mixed"], objects["none"]])
    assert measured.floor == TorchVersion(2, 12)
    assert measured.setting == ("torch_library_def_with_tags",)


def test_an_import_missing_from_the_table_is_named_not_ignored(objects: dict[str, Path]) -> None:
    measured = floor_of_files([objects["unknown"]])
    assert measured.floor == TorchVersion(2, 10)
    assert measured.unknown == ("aoti_torch_kw_not_yet_in_torch",)
    assert "not in the shim table (torch 2.14.1+cu130 and older)" in measured.describe(
        load_shim_table()
    )
    # Unversioned functions alone set no floor.
    assert measure_floor(["aoti_torch_get_numel"]).floor is None


def test_the_declared_floor_is_read_from_requires_dist() -> None:
    assert declared_floor(["torch>=2.10"]) == ("torch>=2.10", TorchVersion(2, 10))
    assert declared_floor(["numpy", "torch==2.14.*"]) == ("torch==2.14.*", TorchVersion(2, 14))
    assert declared_floor(["torch>=2.9,<3", "torch>=2.11; python_version>'3'"])[1] == (
        TorchVersion(2, 11)
    )
    assert declared_floor(["torch"]) == ("torch", None)
    assert declared_floor(["numpy>=2"]) == (None, None)


def test_the_stable_requirement_is_the_higher_floor(objects: dict[str, Path]) -> None:
    raised = torch_requirement(STABLE, [objects["mixed"]])
    assert raised.requirement == "torch>=2.12"
    (warning,) = raised.warnings
    assert "declared torch>=2.10 is lower than the torch 2.12" in warning
    assert "torch_library_def_with_tags first appeared in torch 2.12" in warning
    kept = torch_requirement(STABLE, [objects["old"]])
    assert (kept.requirement, kept.warnings) == ("torch>=2.10", ())
    assert torch_requirement(STABLE, [objects["none"]]) == kept
    unknown = torch_requirement(STABLE, [objects["unknown"]])
    assert unknown.requirement == "torch>=2.10"
    assert "aoti_torch_kw_not_yet_in_torch: not in the libtorch shim table" in unknown.warnings[0]
    # A per-torch build pins its series whatever it imports.
    per_torch = Variant.parse("torch214-cxx11-cpu-x86_64-linux")
    assert torch_requirement(per_torch, [objects["newest"]]).requirement == "torch==2.14.*"


def _wheel(out: Path, so: Path, variant: Variant, requires: tuple[str, ...]) -> Path:
    """A stable-ABI kernel wheel as the pipeline writes it (the real writer)."""
    version = f"1.0.0+{variant.local_version}"
    spec = WheelSpec(
        name="kw-floor",
        version=version,
        tag=Tag("cp39", "abi3", "linux_x86_64"),
        files={"kw_floor/__init__.py": b"", f"kw_floor/{so.name}": so.read_bytes()},
        requires_dist=requires,
    )
    return write_wheel(spec, out)


def test_check_reports_the_declared_and_the_measured_floor(
    objects: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As the author declared it (what kernelwheel wrote before measuring): torch>=2.10.
    low = _wheel(tmp_path / "low", objects["mixed"], STABLE, ("torch>=2.10",))
    report = check_wheel(low)
    assert report.ok, report.summary()  # reported, not a violation
    assert (report.declared_torch, report.declared_floor) == ("torch>=2.10", TorchVersion(2, 10))
    assert report.measured_torch.floor == TorchVersion(2, 12)
    assert "torch_library_def_with_tags" in report.torch_floor_warning

    assert cli.main(["check", str(low)]) == 0
    out = capsys.readouterr().out
    assert "torch floor declared: torch>=2.10; measured: torch>=2.12" in out
    assert "! warning: the declared torch>=2.10 is lower than the torch 2.12" in out

    assert cli.main(["check", "--json", str(low)]) == 0
    floor = json.loads(capsys.readouterr().out)["reports"][0]["torch_floor"]
    assert floor["declared"] == "torch>=2.10" and floor["declared_floor"] == "2.10"
    assert floor["measured"]["floor"] == "2.12"
    assert floor["measured"]["set_by"] == ["torch_library_def_with_tags"]
    assert "lower than the torch 2.12" in floor["warning"]

    # What the build now writes: torch>=max(declared, measured). No warning; the wheel rule
    # accepts a stable-ABI floor above its label's ABI version.
    requirement = torch_requirement(STABLE, [objects["mixed"]]).requirement
    raised = _wheel(tmp_path / "raised", objects["mixed"], STABLE, (requirement,))
    assert parse_metadata(read_metadata(raised)).get_all("Requires-Dist") == ["torch>=2.12"]
    report = check_wheel(raised)
    assert report.ok, report.summary()
    assert report.declared_floor == TorchVersion(2, 12) and not report.torch_floor_warning


def test_check_on_a_wheel_without_shim_imports_measures_no_floor(
    objects: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path, objects["none"], STABLE, ("torch>=2.10",))
    report = check_wheel(wheel)
    assert report.measured_torch.floor is None and report.measured_torch.imports == ()
    assert not report.torch_floor_warning
    assert cli.main(["check", str(wheel)]) == 0
    assert "measured: no shim functions imported" in capsys.readouterr().out


def test_a_wheel_declaring_no_torch_is_warned(objects: dict[str, Path], tmp_path: Path) -> None:
    """torchao 0.18.0's failure: no torch requirement at all, shim functions of a newer torch."""
    wheel = _wheel(tmp_path, objects["newest"], STABLE, ())
    report = check_wheel(wheel, integrity=False)
    assert report.declared_torch is None
    assert report.torch_floor_warning.startswith(
        "the declared no torch floor is lower than the torch 2.14"
    )


def test_check_on_a_bare_object_reports_its_floor(
    objects: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    report = check_shared_object(objects["newest"], cxxabi=None)
    assert report.torch_floor is not None and report.torch_floor.floor == TorchVersion(2, 14)
    assert cli.main(["check", str(objects["newest"]), "--cxx-abi", "none"]) == 0
    out = capsys.readouterr().out
    assert "torch floor measured: torch>=2.14 (torch_has_storage)" in out


@pytest.mark.integration
def test_the_table_is_what_the_script_makes_from_the_torches(tmp_path: Path) -> None:
    """The package data is reproducible: the regeneration script, run on the torch 2.13.0 and
    2.14.1 environments the build tests provision (made here if no build has yet), writes the
    same table."""
    torches = [build_env(v).purelib / "torch" for v in (CPU_VARIANT, CUDA_VARIANT)]
    out = tmp_path / "table.tsv"
    script = ROOT / "scripts" / "regen_torch_shim_versions.py"
    subprocess.run(
        [sys.executable, str(script), *map(str, torches), "--output", str(out)],
        check=True,
        capture_output=True,
    )
    shipped = ROOT / "src" / "kernelwheel" / "data" / "torch_shim_versions.tsv"
    assert out.read_text() == shipped.read_text()
