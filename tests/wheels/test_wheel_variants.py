"""``kernelwheel index --wheel-variants``: a kernel's CUDA builds as PEP 825 variant wheels.

The wheels are small real wheels made by kernelwheel's wheel writer: a pure-Python package that
says which flavour it is (``FLAVOUR``), named like kernel builds (``+torch2.14.cu126.cxx11``),
each carrying a real nvcc object (sm_80 and sm_90 cubins, compute_90 PTX; see
tests/fixtures/fatbin/README.md) so ``sm_arch`` is read from a real fatbin. This machine builds
only cu130, so the cu126 and cu132 builds are these stand-ins; what is proven is the format and
the choice, not a CUDA 12.6 compile.

Against the index served by ``python -m http.server`` on 127.0.0.1, uv 0.13.9 with
``--preview-features wheel-variants`` (its NVIDIA provider built in) installs the cu126 build
for a CUDA 12.6 driver, cu130 for 13.0 and cu132 for 13.2, and nothing for an 11.8 driver or a
GPU no build has code for; plain pip and uv without the preview see no wheel and install
nothing. variantlib 0.2.2, the format's reference implementation, validates what is written.
The transcript goes to ``$KERNELWHEEL_EVIDENCE`` when set (docs/evidence/wheel_variants_uv.log).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.tags import Tag
from support.http import http_server
from support.installkit import UV, isolated_env
from support.venvs import QuickVenv, pip_command
from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from kernelwheel.cli import main
from kernelwheel.errors import WheelError
from kernelwheel.model.variant import Backend
from kernelwheel.wheels import WheelSpec, write_wheel
from kernelwheel.wheels.fatbin import sm_archs
from kernelwheel.wheels.reader import verify_wheel
from kernelwheel.wheels.variants import cuda_properties, write_variant_wheel

FLAVOURS = ("cu126", "cu130", "cu132")
OBJECT = Path(__file__).parents[1] / "fixtures" / "fatbin" / "add_one.o"
TAG = Tag("cp310", "abi3", "manylinux_2_28_x86_64")
SM = ["80_real", "90_real", "90_virtual"]


def _build(out: Path, local: str, flavour: str) -> Path:
    files = {
        "img2gray/__init__.py": f"FLAVOUR = {flavour!r}\n".encode(),
        "img2gray/_add_one.abi3.so": OBJECT.read_bytes(),  # never loaded: its fatbin is read
    }
    return write_wheel(WheelSpec("img2gray", f"0.1.0+{local}", TAG, files), out)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("variants")
    house = root / "wh"
    for flavour in FLAVOURS:
        _build(house, f"torch2.14.{flavour}.cxx11", flavour)
    _build(house, "torch2.14.cpu.cxx11", "cpu")  # not CUDA: not a variant
    out = root / "site"
    assert main(["index", str(house), "-o", str(out), "--wheel-variants"]) == 0
    return out


def test_the_fixture_object_carries_real_device_code() -> None:
    with OBJECT.open("rb") as fh:
        real, virtual = sm_archs(fh)
    assert (sorted(real), sorted(virtual)) == ([80, 90], [90])


def test_variant_wheels_and_variants_json_are_what_variantlib_reads(site: Path) -> None:
    folder = site / "torch2.14" / "variants" / "img2gray"
    wheels = sorted(folder.glob("*.whl"))
    assert [w.name for w in wheels] == [
        f"img2gray-0.1.0-cp310-abi3-manylinux_2_28_x86_64-{f}.whl" for f in FLAVOURS
    ]
    expected = {
        "cu126": ("12.6", "13"),
        "cu130": ("13.0", "14"),
        "cu132": ("13.2", "14"),
    }
    for wheel in wheels:
        match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(wheel.name)
        assert match is not None and match.group("ver") == "0.1.0"
        label = match.group("variant_label")
        verify_wheel(wheel)  # the record rule holds for what was rewritten
        with zipfile.ZipFile(wheel) as zf:
            info = VariantDistInfo(zf.read("img2gray-0.1.0.dist-info/variant.json"), label)
            metadata = zf.read("img2gray-0.1.0.dist-info/METADATA").decode()
            assert f"FLAVOUR = {label!r}" in zf.read("img2gray/__init__.py").decode()
        assert "\nVersion: 0.1.0\n" in metadata
        props = {(p.feature, p.value) for p in info.variant_desc.properties}
        lower, upper = expected[label]
        assert props == {
            ("cuda_version_lower_bound", lower),
            ("cuda_version_upper_bound", upper),
            *(("sm_arch", v) for v in SM),
        }
        assert {p.namespace for p in info.variant_desc.properties} == {"nvidia"}
    index_json = json.loads((folder / "img2gray-0.1.0-variants.json").read_text())
    merged = VariantsJson(index_json)  # variantlib's validation of the index file
    assert sorted(merged.variants) == list(FLAVOURS)
    assert index_json["providers"]["nvidia"]["plugin-api"] == (
        "nvidia_variant_provider.plugin:NvidiaVariantPlugin"
    )
    page = (folder / "index.html").read_text()
    assert 'href="img2gray-0.1.0-variants.json"' in page and page.count("#sha256=") == 3
    root = (site / "index.html").read_text()
    assert 'href="torch2.14/variants/"' in root and 'href="cu126/"' in root


class _Transcript:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def run(
        self, cmd: list[str], env: dict[str, str], note: str
    ) -> subprocess.CompletedProcess[str]:
        shown = {k: v for k, v in env.items() if k.startswith("NV_VARIANT")}
        prefix = " ".join(f"{k}={v}" for k, v in sorted(shown.items()))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        self.lines += [f"## {note}", f"$ {prefix} {shlex.join(cmd)}".replace("$  ", "$ ")]
        self.lines += [line for line in (proc.stdout + proc.stderr).splitlines() if line]
        self.lines += [f"(exit {proc.returncode})", ""]
        return proc

    def note(self, line: str) -> None:
        self.lines.insert(len(self.lines) - 1, line)  # before the blank line closing the run


@pytest.fixture(scope="module")
def transcript(site: Path) -> Iterator[_Transcript]:
    log = _Transcript()
    folder = site / "torch2.14" / "variants" / "img2gray"
    log.lines += ["## the variant index (kernelwheel index WH -o SITE --wheel-variants)"]
    log.lines += [f"SITE/{p.relative_to(site)}" for p in sorted(folder.iterdir())]
    log.lines += ["", "## img2gray-0.1.0-variants.json"]
    log.lines += (folder / "img2gray-0.1.0-variants.json").read_text().splitlines() + [""]
    yield log
    target = os.environ.get("KERNELWHEEL_EVIDENCE")
    if target:
        version = subprocess.run([str(UV), "--version"], capture_output=True, text=True).stdout
        head = [
            "# kernelwheel index --wheel-variants, installed by uv and pip (tests/wheels/"
            "test_wheel_variants.py)",
            f"# {version.strip()}; pip {_pip_version()}; served by python -m http.server",
            "",
        ]
        Path(target).write_text("\n".join(head + log.lines) + "\n")


def _pip_version() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True
    )
    return proc.stdout.split()[1]


def _flavour(venv: QuickVenv) -> str | None:
    proc = venv.run("-c", "import img2gray; print(img2gray.FLAVOUR)", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _uv(venv: QuickVenv, url: str, *extra: str) -> list[str]:
    return [
        str(UV), "pip", "install", "--python", str(venv.python), "--no-cache",
        "--index-url", url, *extra, "img2gray",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("driver", "sm", "flavour"),
    [
        ("12.6", "9.0", "cu126"),
        ("13.0", "9.0", "cu130"),
        ("13.2", "9.0", "cu132"),
        ("13.2", "8.6", "cu132"),  # sm_80 code runs on an 8.6 GPU
        ("11.8", "9.0", None),  # no build for a CUDA 11 driver
        ("13.2", "7.5", None),  # no build has code for a 7.5 GPU
    ],
)
def test_uv_picks_the_build_for_the_driver(
    site: Path, tmp_path: Path, transcript: _Transcript, driver: str, sm: str, flavour: str | None
) -> None:
    venv = QuickVenv(tmp_path / "venv")
    env = dict(
        isolated_env(),
        NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION=driver,
        NV_VARIANT_PROVIDER_FORCE_SM_ARCH=sm,
    )
    with http_server(site) as url:
        cmd = _uv(venv, f"{url}/torch2.14/variants/", "--preview-features", "wheel-variants")
        proc = transcript.run(cmd, env, f"uv, driver CUDA {driver}, GPU sm {sm}")
    assert (proc.returncode == 0) == (flavour is not None), proc.stderr
    if flavour is None:
        assert "only unsupported wheel variants" in proc.stderr
    got = _flavour(venv)
    transcript.note(f"-> import img2gray; img2gray.FLAVOUR: {got or 'nothing installed'}")
    assert got == flavour


def test_installers_without_variant_support_install_nothing(
    site: Path, tmp_path: Path, transcript: _Transcript
) -> None:
    """Plain pip (and uv without the preview) on the same index: no wheel, nothing installed,
    so never a wrong build."""
    env = dict(isolated_env(), NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION="13.0")
    with http_server(site) as url:
        pip_venv = QuickVenv(tmp_path / "pip")
        cmd = pip_command(pip_venv.python, "--index-url", f"{url}/torch2.14/variants/", "img2gray")
        pip = transcript.run(cmd, env, "plain pip, same index")
        uv_venv = QuickVenv(tmp_path / "uv")
        uv = transcript.run(
            _uv(uv_venv, f"{url}/torch2.14/variants/"), env, "uv without the preview feature"
        )
    transcript.lines += [f"-> installed: pip {_flavour(pip_venv)}, uv {_flavour(uv_venv)}"]
    assert pip.returncode != 0 and "No matching distribution found for img2gray" in pip.stderr
    assert uv.returncode != 0
    assert _flavour(pip_venv) is None and _flavour(uv_venv) is None


def test_a_build_without_device_code_gets_only_the_bounds(tmp_path: Path) -> None:
    """No fatbin (no ``.so``, or one that is not ELF): no sm_arch property, so no GPU rule."""
    files = {"img2gray/__init__.py": b"", "img2gray/_x.abi3.so": b"not an ELF object"}
    wheel = write_wheel(WheelSpec("img2gray", "0.2.0+torch2.14.cu128.cxx11", TAG, files), tmp_path)
    built = write_variant_wheel(wheel, tmp_path, Backend.parse_token("cu128"))
    assert built.path.name == "img2gray-0.2.0-cp310-abi3-manylinux_2_28_x86_64-cu128.whl"
    info = VariantDistInfo(built.dist_info_json, built.label)
    assert [(p.namespace, p.feature, p.value) for p in info.variant_desc.properties] == [
        ("nvidia", "cuda_version_lower_bound", "12.8"),
        ("nvidia", "cuda_version_upper_bound", "13"),
    ]
    with pytest.raises(WheelError, match="not a CUDA flavour"):
        cuda_properties(Backend.parse_token("rocm63"))
