"""``kernelwheel install`` against real pip and real uv, on fake torch distributions.

For every scenario of issue 12, the plain ``pip install``/``uv pip install`` a user would type is
run first and what it did is asserted (the evidence that selection must be explicit); then
``kernelwheel install`` on the same sources, which must choose the build for the installed torch
and leave torch as it was. Every no-match case asserts that torch is unchanged and nothing was
installed.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.http import http_server
from support.installkit import (
    installed,
    isolate,
    isolated_env,
    kernel_wheel,
    plain_install,
    torch_wheel,
)
from support.installkit import venv_with_torch as make_venv
from support.tamper import rewrite
from support.venvs import QuickVenv

from kernelwheel.cli import main
from kernelwheel.wheels.index import build_index

# Real pip and uv installs into fresh venvs: seconds each (pytest -m 'not slow' skips them).
pytestmark = pytest.mark.slow

TOOLS = ["pip", "uv"]
CPU_213 = "torch2.13.cpu.cxx11"
CPU_214 = "torch2.14.cpu.cxx11"
CU130_214 = "torch2.14.cu130.cxx11"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)  # kernelwheel's own pip run must not see this machine's config


@pytest.fixture(scope="module")
def torches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("torches")
    return {
        "2.13.0+cpu": torch_wheel(out, "2.13.0+cpu", None),
        "2.14.1+cpu": torch_wheel(out, "2.14.1+cpu", None),
        "2.14.1+cu130": torch_wheel(out, "2.14.1+cu130", "13.0"),
        "2.14.1+cu130-cxx98": torch_wheel(out / "cxx98", "2.14.1+cu130", "13.0", cxx11=False),
        "2.10.0+cu130": torch_wheel(out, "2.10.0+cu130", "13.0"),
    }


def wheelhouse(root: Path, *locals_: str | None, torch: Path | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for local in locals_:
        kernel_wheel(root, local)
    if torch is not None:  # an index holding torch is reachable
        (root / torch.name).write_bytes(torch.read_bytes())
    return root


def kw(venv: QuickVenv, *args: str) -> int:
    return main(["install", "--python", str(venv.python), *args])


def assert_untouched(venv: QuickVenv, torch: str) -> None:
    dists = installed(venv)
    assert dists.get("torch") == torch
    assert "img2gray" not in dists and set(dists) == {"torch"}


# -- the scenarios: plain pip/uv do the wrong thing, kernelwheel install the right one ----------


@pytest.mark.parametrize("tool", TOOLS)
def test_torch_213_with_a_newer_torch_reachable(
    tool: str, tmp_path: Path, torches: dict[str, Path]
) -> None:
    house = wheelhouse(tmp_path / "wh", CPU_213, CPU_214, torch=torches["2.14.1+cpu"])
    plain = make_venv(tmp_path / "plain", torches["2.13.0+cpu"])
    proc = plain_install(tool, plain, "--find-links", str(house), "img2gray")
    assert proc.returncode == 0, proc.stderr
    # Evidence: the torch 2.14 build wins and the user's torch is replaced by 2.14.1.
    assert installed(plain) == {"torch": "2.14.1+cpu", "img2gray": f"0.1.0+{CPU_214}"}

    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    assert kw(venv, "img2gray", "--find-links", str(house), "--no-index") == 0
    assert installed(venv) == {"torch": "2.13.0+cpu", "img2gray": f"0.1.0+{CPU_213}"}
    assert "CPU" in venv.run("-c", "import img2gray, torch; print('CPU')").stdout  # guard passes


@pytest.mark.parametrize("tool", TOOLS)
def test_cpu_torch_with_cuda_and_cpu_builds(
    tool: str, tmp_path: Path, torches: dict[str, Path]
) -> None:
    house = wheelhouse(tmp_path / "wh", CU130_214, CPU_214)
    plain = make_venv(tmp_path / "plain", torches["2.14.1+cpu"])
    proc = plain_install(tool, plain, "--find-links", str(house), "img2gray")
    assert proc.returncode == 0, proc.stderr
    # Evidence: the flavour is in no requirement and "cu130" sorts above "cpu".
    assert installed(plain) == {"torch": "2.14.1+cpu", "img2gray": f"0.1.0+{CU130_214}"}
    refused = plain.run("-c", "import img2gray", check=False)
    assert "kernelwheel install 'img2gray==0.1.0'" in refused.stderr  # the guard catches it

    venv = make_venv(tmp_path / "kw", torches["2.14.1+cpu"])
    assert kw(venv, "img2gray", "-f", str(house), "--no-index") == 0
    assert installed(venv) == {"torch": "2.14.1+cpu", "img2gray": f"0.1.0+{CPU_214}"}
    venv.run("-c", "import img2gray")


@pytest.mark.parametrize("tool", TOOLS)
def test_universal_beside_binary_builds(
    tool: str, tmp_path: Path, torches: dict[str, Path]
) -> None:
    house = wheelhouse(tmp_path / "wh", "universal", CU130_214, CPU_214)
    plain = make_venv(tmp_path / "plain", torches["2.14.1+cu130"])
    assert plain_install(tool, plain, "-f", str(house), "img2gray").returncode == 0
    assert installed(plain)["img2gray"] == "0.1.0+universal"  # evidence: it sorts highest

    venv = make_venv(tmp_path / "kw", torches["2.14.1+cu130"])
    assert kw(venv, "img2gray", "-f", str(house), "--no-index") == 0
    assert installed(venv) == {"torch": "2.14.1+cu130", "img2gray": f"0.1.0+{CU130_214}"}


@pytest.fixture
def site(tmp_path: Path, torches: dict[str, Path]) -> Iterator[tuple[str, Path]]:
    """``kernelwheel index`` of a wheelhouse of every flavour, served over loopback HTTP."""
    house = wheelhouse(tmp_path / "wh", CPU_213, CPU_214, CU130_214, "torch2.14.cu128.cxx11")
    out = tmp_path / "site"
    build_index(house, out)
    with http_server(out) as url:
        yield url, out


@pytest.mark.parametrize("tool", TOOLS)
def test_flavour_index_in_a_fresh_venv_and_kernelwheel_from_an_index(
    tool: str, tmp_path: Path, torches: dict[str, Path], site: tuple[str, Path]
) -> None:
    url, _ = site
    fresh = make_venv(tmp_path / "fresh", None)
    proc = plain_install(tool, fresh, "--index-url", f"{url}/cu130/", "img2gray")
    assert proc.returncode != 0 and "torch" in (proc.stdout + proc.stderr)  # not on that index
    assert installed(fresh) == {}
    # kernelwheel install refuses a venv without torch instead of guessing one.
    assert kw(fresh, "img2gray", "--index-url", f"{url}/all/") == 10
    assert installed(fresh) == {}

    venv = make_venv(tmp_path / "kw", torches["2.14.1+cu130"])
    assert kw(venv, "img2gray", "--index-url", f"{url}/all/") == 0
    assert installed(venv) == {"torch": "2.14.1+cu130", "img2gray": f"0.1.0+{CU130_214}"}


def test_json_names_the_chosen_url_hash_and_variant(
    tmp_path: Path,
    torches: dict[str, Path],
    site: tuple[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, out = site
    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    assert kw(venv, "img2gray", "-i", f"{url}/all/", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    (pkg,) = report["packages"]
    wheel = f"img2gray-0.1.0+{CPU_213}-cp310-abi3-linux_x86_64.whl"
    assert report["status"] == "installed" and pkg["wheel"] == wheel
    assert pkg["variant"] == CPU_213 and pkg["location"].startswith(f"{url}/files/")
    import hashlib

    assert pkg["sha256"] == hashlib.sha256((out / "files" / wheel).read_bytes()).hexdigest()
    assert pkg["pin"] == f"img2gray @ {pkg['location']}#sha256={pkg['sha256']}"
    assert {r["wheel"] for r in pkg["rejected"]} == {
        f"img2gray-0.1.0+{label}-cp310-abi3-linux_x86_64.whl"
        for label in (CPU_214, CU130_214, "torch2.14.cu128.cxx11")
    }
    assert report["commands"][-1][-1] == "torch==2.13.0+cpu"
    assert installed(venv) == {"torch": "2.13.0+cpu", "img2gray": f"0.1.0+{CPU_213}"}


def test_dry_run_prints_the_pinned_command_and_it_works(
    tmp_path: Path, torches: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    house = wheelhouse(tmp_path / "wh", CPU_213, CPU_214, torch=torches["2.14.1+cpu"])
    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    assert kw(venv, "img2gray==0.1.0", "-f", str(house), "--no-index", "--dry-run") == 0
    out = capsys.readouterr().out
    assert installed(venv) == {"torch": "2.13.0+cpu"}  # a dry run installs nothing
    command = out.strip().splitlines()[-1]
    wheel = house / f"img2gray-0.1.0+{CPU_213}-cp310-abi3-linux_x86_64.whl"
    args = shlex.split(command)
    assert f"img2gray @ {wheel.as_uri()}#sha256=" in command
    assert args[-1] == "torch==2.13.0+cpu" and "--no-index" in args
    proc = subprocess.run(args, capture_output=True, text=True, env=isolated_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    assert installed(venv) == {"torch": "2.13.0+cpu", "img2gray": f"0.1.0+{CPU_213}"}


def test_both_local_version_spellings_are_read(tmp_path: Path, torches: dict[str, Path]) -> None:
    """Compact labels sort torch214 above torch210 (and dotted ones beside them): selection
    reads the torch minor, never the order."""
    house = wheelhouse(
        tmp_path / "wh", "torch214cu130cxx11", "torch210cu130cxx11", "torch2.9.cu130.cxx11"
    )
    venv = make_venv(tmp_path / "kw", torches["2.10.0+cu130"])
    assert kw(venv, "img2gray", "-f", str(house), "--no-index") == 0
    assert installed(venv)["img2gray"] == "0.1.0+torch210cu130cxx11"
    venv.run("-c", "import img2gray")


# -- no match: non-zero, the environment, every candidate with its reason, nothing installed ----


@pytest.mark.parametrize(
    ("torch", "labels", "reasons"),
    [
        (
            "2.13.0+cpu",
            (CU130_214, "torch2.13.cu130.cxx11"),
            ("torch version (built for torch 2.14)", "backend (a cu130 build; this torch"),
        ),
        (  # a CUDA 12 build under a CUDA 13 torch
            "2.14.1+cu130",
            ("torch2.14.cu128.cxx11",),
            ("CUDA major version (built with CUDA 12.8)",),
        ),
        ("2.14.1+cu130-cxx98", (CU130_214,), ("C++ ABI (built cxx11)",)),
    ],
)
def test_no_match_lists_every_refusal_and_installs_nothing(
    tmp_path: Path,
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    torch: str,
    labels: tuple[str, ...],
    reasons: tuple[str, ...],
) -> None:
    house = wheelhouse(tmp_path / "wh", *labels, torch=torches["2.14.1+cpu"])
    venv = make_venv(tmp_path / "kw", torches[torch])
    version = torch.split("-")[0]
    assert kw(venv, "img2gray", "-f", str(house), "--no-index") == 10
    err = capsys.readouterr().err
    assert "Traceback" not in err
    abi = "cxx98" if torch.endswith("cxx98") else "cxx11"
    assert f"no fitting build for this environment: torch {version} (" in err
    assert f"{abi} ABI), x86_64, cp3" in err
    for label in labels:
        assert f"  img2gray-0.1.0+{label}-cp310-abi3-linux_x86_64.whl: built for " in err
    for reason in reasons:
        assert reason in err
    assert "nothing was installed" in err
    assert_untouched(venv, version)


def test_no_match_in_json_and_with_a_second_package_that_fits(
    tmp_path: Path, torches: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    house = wheelhouse(tmp_path / "wh", CU130_214)
    kernel_wheel(house, CPU_213, name="relu")  # relu fits, img2gray does not: neither goes in
    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    assert kw(venv, "relu", "img2gray", "-f", str(house), "--no-index", "--json") == 10
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "no-match"
    assert report["environment"]["torch"] == "2.13.0+cpu"
    assert report["environment"]["torch_flavour"] == "cpu"
    relu, img2gray = report["packages"]
    assert relu["wheel"] == f"relu-0.1.0+{CPU_213}-cp310-abi3-linux_x86_64.whl"
    assert img2gray["wheel"] is None and len(img2gray["rejected"]) == 1
    assert "torch version" in img2gray["rejected"][0]["reason"]
    dists = installed(venv)
    assert dists == {"torch": "2.13.0+cpu"}


def test_no_wheel_of_the_package_and_wrong_version(
    tmp_path: Path, torches: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    house = wheelhouse(tmp_path / "wh", CPU_213)
    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    assert kw(venv, "relu", "-f", str(house), "--index-url", house.as_uri()) == 10
    # where it looked: a site's root given for one of its indexes shows as <root>/relu/
    assert f"relu: no wheel of relu in {house}, {house.as_uri()}/relu/" in capsys.readouterr().err
    assert kw(venv, "img2gray==0.2.0", "-f", str(house), "--no-index") == 10
    assert "version 0.1.0+torch2.13.cpu.cxx11 is not ==0.2.0" in capsys.readouterr().err
    assert_untouched(venv, "2.13.0+cpu")


# -- bad input: a clear error naming the value and the fix, no traceback -----------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["img2gray==", "-f", "{house}"], "invalid requirement 'img2gray=='"),
        (["img2gray", "-f", "{house}/missing"], "missing: does not exist"),
        (["img2gray", "-i", "ftp://example.org/simple"], "is not an http(s):// or file:// URL"),
        (["img2gray", "-f", "http://127.0.0.1:9/wheels/"], "http://127.0.0.1:9/wheels/: cannot"),
        (["img2gray"], "no source of wheels given"),
        (["img2gray", "-f", "{house}", "--python", "{house}/nopython"], "cannot run --python"),
    ],
)
def test_bad_input_is_named_with_the_fix(
    tmp_path: Path,
    torches: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    house = wheelhouse(tmp_path / "wh", CPU_213)
    venv = make_venv(tmp_path / "kw", torches["2.13.0+cpu"])
    filled = [a.format(house=house) for a in args]
    code = main(
        ["install", *filled]
        if "--python" in filled
        else ["install", "--python", str(venv.python), *filled]
    )
    err = capsys.readouterr().err
    assert code in (2, 10) and message in err and "fix: " in err and "Traceback" not in err
    assert_untouched(venv, "2.13.0+cpu")


def test_variant_globs_narrow_the_candidates(
    tmp_path: Path, torches: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """--variant speaks the selector language of build/to-wheel/download: under a CUDA torch the
    CPU build is taken when asked for, and a glob that leaves nothing installs nothing."""
    house = wheelhouse(tmp_path / "wh", CU130_214, CPU_214)
    venv = make_venv(tmp_path / "kw", torches["2.14.1+cu130"])
    assert kw(venv, "img2gray", "-f", str(house), "--no-index", "--variant", "*-cpu-*") == 0
    assert installed(venv) == {"torch": "2.14.1+cu130", "img2gray": f"0.1.0+{CPU_214}"}

    fresh = make_venv(tmp_path / "none", torches["2.14.1+cu130"])
    code = kw(fresh, "img2gray", "-f", str(house), "--no-index", "--variant", "torch213-*")
    assert code == 10
    assert_untouched(fresh, "2.14.1+cu130")
    out = capsys.readouterr()
    assert "torch214-cxx11-cpu-x86_64-linux is not selected by --variant" in out.out + out.err


# -- issue 30: integrity before trust --------------------------------------------------------


def test_a_wheel_whose_files_do_not_match_record_is_not_installed(
    tmp_path: Path, torches: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``install`` installed a wheel whose files do not match its RECORD (pip does not check).
    Evidence first: plain pip installs the tampered file. kernelwheel install refuses it, from
    a folder and from an index (whose listed sha256 is of the tampered bytes), before pip runs."""
    house = wheelhouse(tmp_path / "wh", CPU_214)
    wheel = next(house.glob("*.whl"))
    rewrite(wheel, replace={"img2gray/__init__.py": b"print('not what RECORD says')\n"})
    plain = make_venv(tmp_path / "plain", torches["2.14.1+cpu"])
    proc = plain_install("pip", plain, "--find-links", str(house), "img2gray")
    assert proc.returncode == 0, proc.stderr
    assert installed(plain)["img2gray"] == f"0.1.0+{CPU_214}"  # pip took it

    venv = make_venv(tmp_path / "kw", torches["2.14.1+cpu"])
    assert kw(venv, "img2gray", "-f", str(house), "--no-index") == 7
    err = capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["install", "--help"])
    assert "7 the chosen wheel is unreadable" in capsys.readouterr().out  # the code is documented
    assert "img2gray/__init__.py: does not match its RECORD hash" in err
    assert_untouched(venv, "2.14.1+cpu")

    served = tmp_path / "served"  # an index of it, made by hand: kernelwheel index refuses it
    (served / "img2gray").mkdir(parents=True)
    shutil.copy(wheel, served / "img2gray" / wheel.name)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    link = f'<a href="{wheel.name}#sha256={digest}">{wheel.name}</a>'
    (served / "img2gray" / "index.html").write_text(f"<html><body>{link}</body></html>")
    with http_server(served) as url:
        assert kw(venv, "img2gray", "--index-url", f"{url}/") == 7
    assert "does not match its RECORD hash" in capsys.readouterr().err
    assert_untouched(venv, "2.14.1+cpu")


def test_a_file_that_changed_after_the_index_was_written_is_refused(
    tmp_path: Path,
    torches: dict[str, Path],
    site: tuple[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, out = site
    wheel = next((out / "files").glob(f"*{CPU_214}*.whl"))
    rewrite(wheel, replace={"img2gray/__init__.py": b"x = 1\n"})
    venv = make_venv(tmp_path / "kw", torches["2.14.1+cpu"])
    assert kw(venv, "img2gray", "--index-url", f"{url}/all/") == 10
    assert "the index" in capsys.readouterr().err
    assert_untouched(venv, "2.14.1+cpu")
