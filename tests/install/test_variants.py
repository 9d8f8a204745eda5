"""``kernelwheel variants SOURCE``: every build a wheelhouse, an index or a Hub kernel offers,
judged for a real (probed) interpreter by install's own selection: the proof lines of issue 41
item 2. The interpreters are venvs with a fake torch on their path (no pip run), the wheels are
written by kernelwheel's wheel writer, the index is served by a real HTTP server, the Hub by the
loopback Hub server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from support.gitrepo import HubRepo, variant_files
from support.http import http_server
from support.hubserver import GitBackedRepo, HubState, serve_as_hub
from support.installkit import isolate, kernel_wheel
from support.venvs import QuickVenv, fake_torch

from kernelwheel.cli import main
from kernelwheel.compat.gpus import Gpus
from kernelwheel.errors import HubError
from kernelwheel.hub.variants import split_source
from kernelwheel.install.installed import read_environment
from kernelwheel.install.probe import probe
from kernelwheel.install.sources import Candidate
from kernelwheel.install.variants import Status, explain
from kernelwheel.wheels.index import build_index

CPU_213 = "torch2.13.cpu.cxx11"
CU130_213 = "torch2.13.cu130.cxx11"
CPU_214 = "torch2.14.cpu.cxx11"
CU130_214 = "torch2.14.cu130.cxx11"
FOUR = (CPU_213, CU130_213, CPU_214, CU130_214)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)  # no active venv, KERNELWHEEL_CUDA_DRIVER=none


@pytest.fixture(scope="module")
def cpu_213(tmp_path_factory: pytest.TempPathFactory) -> QuickVenv:
    root = tmp_path_factory.mktemp("py213")
    return QuickVenv(root / "venv", layered=[fake_torch(root, "2.13.0+cpu", None)])


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    for local in FOUR:
        kernel_wheel(out, local)
    return out


def variants_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    capsys.readouterr()
    assert main(["variants", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def by_local(report: dict[str, object]) -> dict[str, dict[str, object]]:
    (project,) = report["projects"]  # type: ignore[misc]
    return {v["wheel"].split("+", 1)[1].split("-", 1)[0]: v for v in project["variants"]}


def assert_cpu_213_picked(report: dict[str, object]) -> None:
    builds = by_local(report)
    assert set(builds) == set(FOUR)
    assert builds[CPU_213]["status"] == "preferred" and builds[CPU_213]["reason"] is None
    for local in (CU130_213, CPU_214, CU130_214):
        assert builds[local]["status"] == "rejected" and not builds[local]["compatible"]
    assert "mismatch in torch version (built for torch 2.14)" in str(builds[CPU_214]["reason"])
    assert "backend (a cu130 build; this torch has no CUDA)" in str(builds[CU130_213]["reason"])
    both = str(builds[CU130_214]["reason"])
    assert "torch version" in both and "backend" in both
    (project,) = report["projects"]  # type: ignore[misc]
    assert project["preferred"] == "torch213-cxx11-cpu-x86_64-linux"
    # preferred first, then the rest
    assert [v["status"] for v in project["variants"]][0] == "preferred"


def test_wheelhouse_cpu_213_preferred_each_other_rejected_with_its_reason(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path
) -> None:
    report = variants_json(capsys, str(house), "--python", str(cpu_213.python))
    assert_cpu_213_picked(report)
    env = report["environment"]
    assert env["torch"] == "2.13.0+cpu" and env["torch_flavour"] == "cpu"  # type: ignore[index]
    assert report["source"] == str(house)


def test_json_shape_per_build(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path
) -> None:
    report = variants_json(capsys, str(house), "--python", str(cpu_213.python))
    assert set(report) == {"source", "environment", "projects"}
    assert set(report["environment"]) == {  # type: ignore[arg-type]
        "python", "python_tag", "machine", "torch", "torch_flavour", "cxx11_abi",
        "cuda_driver", "gpus", "gpus_source", "description",
    }  # fmt: skip
    (project,) = report["projects"]  # type: ignore[misc]
    assert project["project"] == "img2gray"
    for build in project["variants"]:
        assert set(build) == {
            "variant", "compatible", "preferred", "status", "reason", "wheel", "version",
            "location",
        }  # fmt: skip
        # kernels' own invariant: a reason exactly when not compatible (or compatible and lost)
        assert build["compatible"] == (build["status"] != "rejected")
        assert (build["reason"] is None) == build["preferred"]
        assert Path(build["location"]).is_file()


def test_reasons_are_installs_own(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path
) -> None:
    report = variants_json(capsys, str(house), "--python", str(cpu_213.python))
    capsys.readouterr()
    code = main(["install", "img2gray", "-f", str(house), "--python", str(cpu_213.python),
                 "--dry-run", "--json"])  # fmt: skip
    assert code == 0
    installed = json.loads(capsys.readouterr().out)
    (pkg,) = installed["packages"]
    builds = {v["wheel"]: v for v in report["projects"][0]["variants"]}  # type: ignore[index]
    assert builds[pkg["wheel"]]["status"] == "preferred"
    rejected = {r["wheel"]: r["reason"] for r in pkg["rejected"]}
    assert rejected == {w: b["reason"] for w, b in builds.items() if not b["preferred"]}


def test_compatible_builds_say_why_they_lost(tmp_path: Path, cpu_213: QuickVenv) -> None:
    """A release older than the newest fits too: compatible, with install's why-not line."""
    for version in ("0.1.0", "0.2.0"):
        kernel_wheel(tmp_path, CPU_213, version=version)
    target = probe(cpu_213.python)
    candidates = [Candidate(p.name, str(p), None, str(tmp_path)) for p in tmp_path.iterdir()]
    report = explain("here", candidates, target, Gpus((), "not asked"))
    (project,) = report.projects
    assert [(e.version, e.status) for e in project.entries] == [
        (f"0.2.0+{CPU_213}", Status.PREFERRED),
        (f"0.1.0+{CPU_213}", Status.COMPATIBLE),
    ]
    assert project.entries[1].reason == "compatible, but 0.2.0 is newer"


def test_human_table_preferred_first_then_rejected_with_reasons(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path
) -> None:
    capsys.readouterr()
    assert main(["variants", str(house), "--python", str(cpu_213.python)]) == 0
    out = capsys.readouterr().out
    assert "environment: torch 2.13.0+cpu (CPU, cxx11 ABI)" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  ") and "  " in line]
    statuses = [r[0] for r in rows if r and r[0] in ("preferred", "compatible", "rejected")]
    assert statuses == ["preferred", "rejected", "rejected", "rejected"]
    assert "torch213-cxx11-cpu-x86_64-linux" in out.split("rejected", 1)[0]
    assert "install picks img2gray-0.1.0+torch2.13.cpu.cxx11-" in out


def test_pep503_index_over_http(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path, tmp_path: Path
) -> None:
    """The index `kernelwheel index` writes, served by a real HTTP server: its root (projects
    followed), one project page and the site's root (its indexes followed) give the same
    verdicts as the folder."""
    build_index(house, tmp_path / "site")
    with http_server(tmp_path / "site") as url:
        root = variants_json(capsys, f"{url}/all/", "--python", str(cpu_213.python))
        page = variants_json(capsys, f"{url}/all/img2gray/", "--python", str(cpu_213.python))
        site = variants_json(capsys, f"{url}/", "--python", str(cpu_213.python))
    for report in (root, page, site):
        assert_cpu_213_picked(report)
        for build in report["projects"][0]["variants"]:  # type: ignore[index]
            assert build["location"].startswith(url)


def test_install_pointed_at_the_site_root_is_told_which_index_to_use(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path, tmp_path: Path
) -> None:
    """`variants` reads a site's root; `install --index-url` with it finds no project page
    there, and says which of the site's indexes to give instead."""
    build_index(house, tmp_path / "site")
    with http_server(tmp_path / "site") as url:
        capsys.readouterr()
        args = ["install", "img2gray", "--python", str(cpu_213.python), "--dry-run"]
        assert main([*args, "--index-url", f"{url}/"]) == 10
        err = capsys.readouterr().err
        assert f"no wheel of img2gray in {url}/img2gray/" in err
        assert f"fix: {url}/ is the root of a `kernelwheel index` site" in err
        assert f"pass --index-url {url}/all/" in err and f"{url}/torch2.13/cpu/" in err
        assert main([*args, "--index-url", f"{url}/all/"]) == 0
        assert main([*args, "--index-url", f"{url}/nothing/"]) == 10
        assert "kernelwheel index` site" not in capsys.readouterr().err


def test_one_wheel_file(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path
) -> None:
    (wheel,) = house.glob(f"*+{CPU_214}-*.whl")
    report = variants_json(capsys, str(wheel), "--python", str(cpu_213.python))
    (project,) = report["projects"]  # type: ignore[misc]
    (build,) = project["variants"]
    assert build["status"] == "rejected" and build["location"] == str(wheel)
    assert main(["variants", f"{wheel}.missing.whl", "--python", str(cpu_213.python)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_missing_folder_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, tmp_path: Path
) -> None:
    code = main(["variants", str(tmp_path / "nope/"), "--python", str(cpu_213.python)])
    assert code == 9  # not a folder, so read as a Hub id, which it is not
    assert "no such folder" in capsys.readouterr().err


def test_an_interpreter_without_torch_gets_each_torch_build_refused_saying_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, house: Path
) -> None:
    """It was refused whole ("has no usable torch"); each build is judged now: only tvm-ffi
    builds fit there, and every torch build says it requires torch."""
    bare = QuickVenv(tmp_path / "bare")
    assert main(["variants", str(house), "--python", str(bare.python)]) == 0
    out = capsys.readouterr().out
    assert "no torch, " in out and "no build fits this environment" in out
    assert "it requires torch, and this environment has none" in out


# -- Hub kernels ---------------------------------------------------------------------------------

HUB_FOLDERS = (
    "torch213-cxx11-cpu-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
)


@pytest.fixture(scope="module")
def hub_repo(tmp_path_factory: pytest.TempPathFactory) -> HubRepo:
    root = tmp_path_factory.mktemp("hubrepo")
    repo = HubRepo(root / "img2gray")
    binary = ("_img2gray_0123456", b"\x7fELF not compiled: variants never downloads it")
    files = [variant_files(n, so_cache=root, binary=binary) for n in HUB_FOLDERS]
    files.append(variant_files("torch213-cxx11-cpu-x86_64-linux", so_cache=root, binary=binary))
    files[-1].name = "torch213-nonsense-x86_64-linux"
    repo.set_variants(files)
    repo.commit("build")
    repo.branch("v1")
    return repo


@pytest.fixture
def hub(hub_repo: HubRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    state = HubState(repos={"kw/img2gray": GitBackedRepo(hub_repo.root)})
    with serve_as_hub(state, monkeypatch, tmp_path / "hf-cache"):
        yield state


def assert_hub_verdicts(report: dict[str, object]) -> None:
    (project,) = report["projects"]  # type: ignore[misc]
    builds = {v["variant"]: v for v in project["variants"]}
    assert set(builds) == {*HUB_FOLDERS, "torch213-nonsense-x86_64-linux"}
    assert project["preferred"] == "torch213-cxx11-cpu-x86_64-linux"
    assert builds["torch213-cxx11-cpu-x86_64-linux"]["wheel"] == (
        "img2gray-1+torch2.13.cpu.cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    )
    assert (
        "torch version (built for torch 2.14)"
        in builds["torch214-cxx11-cpu-x86_64-linux"]["reason"]
    )
    bad = builds["torch213-nonsense-x86_64-linux"]
    assert bad["status"] == "rejected" and bad["wheel"] is None
    assert bad["reason"].startswith("cannot map the variant name")
    assert [v["status"] for v in project["variants"]][-1] == "rejected"


def test_hub_kernel_on_the_loopback_hub(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, hub: HubState
) -> None:
    report = variants_json(capsys, "kw/img2gray@1", "--python", str(cpu_213.python))
    assert_hub_verdicts(report)
    assert str(report["source"]).startswith("Hub repo kw/img2gray")
    # only listed: no file under build/ was downloaded
    assert not [p for p in hub.requests("GET") if "/resolve/" in p]
    # no @VERSION: the newest vN branch
    assert_hub_verdicts(variants_json(capsys, "kw/img2gray", "--python", str(cpu_213.python)))


def test_hub_kernel_from_a_git_clone(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, hub_repo: HubRepo
) -> None:
    report = variants_json(capsys, f"{hub_repo.root}@1", "--python", str(cpu_213.python))
    assert_hub_verdicts(report)


def test_a_clone_named_otherwise_gives_the_wheels_to_wheel_writes(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, hub_repo: HubRepo, tmp_path: Path
) -> None:
    """The wheel is named by the package folder, as to-wheel names it, not by the clone's
    folder (here not even a valid project name, which used to list no build at all)."""
    clone = tmp_path / "my clone é"
    shutil.copytree(hub_repo.root, clone)
    report = variants_json(capsys, f"{clone}@1", "--python", str(cpu_213.python))
    assert_hub_verdicts(report)


def test_split_source(tmp_path: Path) -> None:
    assert split_source("org/name@1") == ("org/name", "1")
    (tmp_path / "kernel@2").mkdir()  # a clone's folder whose name holds an '@'
    assert split_source(f"{tmp_path}/kernel@2") == (f"{tmp_path}/kernel@2", None)
    assert split_source(f"{tmp_path}/kernel@2@1") == (f"{tmp_path}/kernel@2", "1")
    assert split_source("org/name") == ("org/name", None)
    with pytest.raises(HubError, match="nothing after '@'"):
        split_source("org/name@")


def test_an_index_root_is_followed_only_to_its_own_host(tmp_path: Path) -> None:
    """A root page's project links are read on its own host only: a link elsewhere is not
    fetched (the listing comes from the page given, not from wherever it points)."""
    from kernelwheel.install.sources import discover

    site = tmp_path / "site"
    (site / "img2gray").mkdir(parents=True)
    wheel = kernel_wheel(tmp_path, CPU_213)
    (site / "img2gray" / "index.html").write_text(f'<a href="../../{wheel.name}">w</a>')
    (site / "index.html").write_text(
        '<a href="img2gray/">img2gray</a><a href="http://other.invalid/simple/evil/">evil</a>'
    )
    found = discover(site.as_uri() + "/")
    assert [c.filename for c in found] == [wheel.name]
    assert unquote(found[0].location) == f"file://{wheel}"


def test_the_table_names_the_release_where_builds_of_several_are_listed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cpu_213: QuickVenv
) -> None:
    """Two releases of one variant read as two rows of one name before: which is which?"""
    for version in ("0.1.0", "0.2.0"):
        kernel_wheel(tmp_path, CPU_213, version=version)
    capsys.readouterr()
    assert main(["variants", str(tmp_path), "--python", str(cpu_213.python)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["preferred", "torch213-cxx11-cpu-x86_64-linux", "0.2.0"] in rows
    assert any(r[:3] == ["compatible", "torch213-cxx11-cpu-x86_64-linux", "0.1.0"] for r in rows)


def test_a_wheelhouse_of_links_into_a_store_installs_by_the_links_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cpu_213: QuickVenv
) -> None:
    """``img2gray-….whl -> ../store/<sha256>`` (a content-addressed store): install checked and
    pinned the store's file, whose name is no wheel name ("abc… fails the wheel rule", exit 7);
    variants showed the store's path."""
    wheel = kernel_wheel(tmp_path / "built", CPU_213)
    store = tmp_path / "store" / "0f1e2d3c"
    store.parent.mkdir()
    wheel.rename(store)
    house = tmp_path / "house"
    house.mkdir()
    (house / wheel.name).symlink_to(Path("..", "store", store.name))
    capsys.readouterr()
    code = main(["install", "img2gray", "-f", str(house), "--python", str(cpu_213.python),
                 "--dry-run", "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    (pkg,) = report["packages"]
    assert pkg["location"] == str(house / wheel.name)
    (command,) = report["commands"]
    assert any(arg.startswith(f"img2gray @ file://{house}/img2gray-0.1.0") for arg in command)
    listed = variants_json(capsys, str(house), "--python", str(cpu_213.python))
    (entry,) = listed["projects"][0]["variants"]  # type: ignore[index]
    assert entry["location"] == str(house / wheel.name)


def test_a_renamed_wheel_is_listed_as_rejected_not_left_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cpu_213: QuickVenv
) -> None:
    """A folder holding only ``img2gray-latest.whl`` said "no wheels found"."""
    kernel_wheel(tmp_path, CPU_213).rename(tmp_path / "img2gray-latest.whl")
    report = variants_json(capsys, str(tmp_path), "--python", str(cpu_213.python))
    (project,) = report["projects"]  # type: ignore[misc]
    (entry,) = project["variants"]
    assert project["project"] == "img2gray" and project["preferred"] is None
    assert entry["wheel"] == "img2gray-latest.whl" and entry["status"] == "rejected"
    assert entry["version"] is None
    assert entry["reason"].startswith("not a wheel file name")


def test_a_project_named_twice_is_one_requirement_as_pip_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cpu_213: QuickVenv
) -> None:
    """``install img2gray img2gray==0.1.0``: before, two choices (0.2.0 and 0.1.0), two pins of
    one project for pip, and a read-back that had to fail after pip ran."""
    for version in ("0.1.0", "0.2.0"):
        kernel_wheel(tmp_path, CPU_213, version=version)
    capsys.readouterr()
    code = main(["install", "img2gray", "Img2Gray==0.1.0", "-f", str(tmp_path),
                 "--python", str(cpu_213.python), "--dry-run", "--json"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    (pkg,) = report["packages"]
    assert pkg["wheel"] == f"img2gray-0.1.0+{CPU_213}-cp310-abi3-linux_x86_64.whl"
    (command,) = report["commands"]
    assert [arg for arg in command if arg.startswith("img2gray @")] == [
        f"img2gray @ {(tmp_path / pkg['wheel']).as_uri()}#sha256={pkg['sha256']}"
    ]


def test_the_target_is_probed_as_it_is_not_as_the_current_folder_would_shadow_it(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cpu_213: QuickVenv,
    house: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``python -c`` puts the current folder first on sys.path: run from a PyTorch checkout (a
    ``torch/`` there) install said the venv had "no usable torch" and told the user to reinstall
    it; a ``*.dist-info`` there was read as the installed build."""
    here = tmp_path / "pytorch-checkout"
    (here / "torch").mkdir(parents=True)
    (here / "torch" / "__init__.py").write_text("raise ImportError('the source tree')\n")
    (here / "img2gray-9.9.9.dist-info").mkdir()
    (here / "img2gray-9.9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: img2gray\nVersion: 9.9.9\n"
    )
    monkeypatch.chdir(here)
    assert read_environment(cpu_213.python, ["img2gray"]).builds == {"img2gray": None}
    capsys.readouterr()
    code = main(["install", "img2gray", "-f", str(house), "--python", str(cpu_213.python),
                 "--dry-run", "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    (pkg,) = json.loads(capsys.readouterr().out)["packages"]
    assert pkg["action"] == "install" and pkg["previous"] is None  # no 9.9.9 "installed"
    report = variants_json(capsys, str(house), "--python", str(cpu_213.python))
    assert report["projects"][0]["preferred"] == "torch213-cxx11-cpu-x86_64-linux"  # type: ignore[index]


def test_a_variant_filter_that_leaves_out_the_fitting_build_says_so(
    capsys: pytest.CaptureFixture[str], cpu_213: QuickVenv, house: Path, tmp_path: Path
) -> None:
    """Before, the fix said to build or download the variant for this torch, which the source
    holds: it was the --variant given that left it out."""
    capsys.readouterr()
    code = main(["install", "img2gray", "-f", str(house), "--python", str(cpu_213.python),
                 "--variant", "torch214-*", "--dry-run"])  # fmt: skip
    assert code == 10
    err = capsys.readouterr().err
    assert "is not selected by --variant" in err
    assert (
        "fix: --variant 'torch214-*' leaves out what fits this environment "
        "(torch213-cxx11-cpu-x86_64-linux): pass --variant torch213-cxx11-cpu-x86_64-linux, or "
        "leave --variant out"
    ) in err
    only_214 = tmp_path / "only-214"
    kernel_wheel(only_214, CPU_214)  # nothing fits, filter or not: the fix is the build
    code = main(["install", "img2gray", "-f", str(only_214), "--python", str(cpu_213.python),
                 "--variant", "torch214-*", "--dry-run"])  # fmt: skip
    assert code == 10 and "fix: build or download the variant" in capsys.readouterr().err


def test_a_source_that_is_nothing_names_every_kind_variants_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped wheelhouse: before, the fix named only a Hub id or a git clone (to-wheel's)."""
    for source in ("wheelhose", str(tmp_path / "wheelhose")):
        assert main(["variants", source]) == 9
        err = capsys.readouterr().err
        assert "fix: give a wheelhouse folder, a wheel, an index or page URL" in err, err
