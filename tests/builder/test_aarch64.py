"""aarch64 cross builds of img2gray on an x86_64 machine, and the result run under qemu-user.

Default (integration): cross-build the CUDA 13.0 variant for torch 2.14 (one capability, so it
stays within a couple of minutes) and the torch 2.14 CPU variant; each wheel must be
manylinux_2_28_aarch64, hold an EM_AARCH64 shared object and pass the ABI check. They skip
with the reason when the cross compiler is missing (scripts/install-cross.sh) or, for the CPU
variant, when PyTorch's CPU index cannot be reached.

Opt-in (KERNELWHEEL_OPTIN=1 and the ``optin`` marker): build the torch 2.9.1 aarch64 CPU variant,
install it with pip into a Debian arm64 CPython 3.11 running under qemu-aarch64-static next to
PyPI's aarch64 torch 2.9.1 (a CPU build) and NumPy, and compare its op with a NumPy reference.
Every command and its output go to a log: $KERNELWHEEL_EVIDENCE_DIR/aarch64_qemu.log when that
variable is set (docs/evidence/ in the repository), else the test's temporary folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from support.builds import IMG2GRAY, cache_dir
from support.variants import TORCH29_CPU_AARCH64 as VARIANT_29
from support.wheelread import read_wheel

from kernelwheel._util import locked
from kernelwheel.abi._elf import read_elf
from kernelwheel.abi.checker import check_wheel
from kernelwheel.cli import main
from kernelwheel.toolchain.envs import EnvSpec, provision

pytestmark = pytest.mark.integration

CROSS_CXX = "aarch64-linux-gnu-g++"
QEMU = "qemu-aarch64-static"
INSTALL_HINT = "run: bash scripts/install-cross.sh (apt-get install g++-aarch64-linux-gnu)"

needs_x86_64 = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="cross builds to aarch64 are tested from x86_64"
)
needs_cross = pytest.mark.skipif(
    shutil.which(CROSS_CXX) is None, reason=f"no {CROSS_CXX} on PATH; {INSTALL_HINT}"
)


def _cli(*args: str) -> tuple[int, str]:
    """Run the kernelwheel CLI in-process; its exit code and output."""
    buf = StringIO()
    with redirect_stdout(buf), redirect_stderr(buf):
        code = main(list(args))
    return code, buf.getvalue()


def _build(project: Path, out: Path, variant: str, *extra: str) -> tuple[int, str]:
    """`kernelwheel build PROJECT --only VARIANT -o OUT -j 2 ...`."""
    return _cli("build", str(project), "--only", variant, "-o", str(out), "-j", "2", *extra)


def _elf_machines(wheel: Path, dest: Path) -> dict[str, str]:
    """e_machine of every shared object in the wheel, read with pyelftools."""
    contents = read_wheel(wheel)
    out: dict[str, str] = {}
    for name, data in contents.files.items():
        if name.endswith(".so"):
            path = dest / Path(name).name
            path.write_bytes(data)
            with path.open("rb") as fh:
                out[name] = str(ELFFile(fh)["e_machine"])
    return out


def _assert_aarch64_wheel(wheel: Path, tmp_path: Path, python_tag: str) -> None:
    assert wheel.name.endswith(f"-{python_tag}-abi3-manylinux_2_28_aarch64.whl"), wheel.name
    machines = _elf_machines(wheel, tmp_path)
    assert machines and set(machines.values()) == {"EM_AARCH64"}, machines
    report = check_wheel(wheel)
    assert report.ok, report.summary()
    assert report.policy == "manylinux_2_28_aarch64"


@needs_x86_64
@needs_cross
def test_cross_build_cuda_variant_for_aarch64(tmp_path: Path) -> None:
    """torch214-cxx11-cu130-aarch64-linux: nvcc (x86_64) with -ccbin aarch64-linux-gnu-g++,
    aarch64 torch and CUDA runtime from PyPI, repaired to manylinux_2_28_aarch64."""
    project = tmp_path / "img2gray"
    shutil.copytree(IMG2GRAY, project, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    toml = project / "build.toml"
    text = toml.read_text()
    # One capability keeps nvcc's device passes short; the host-side cross compile is the same.
    toml.write_text(
        text.replace('backend = "cuda"\n', 'backend = "cuda"\ncuda-capabilities = ["9.0"]\n', 1)
    )
    out = tmp_path / "wheelhouse"
    code, output = _build(project, out, "torch214-cxx11-cu130-aarch64-linux")
    assert code == 0, output
    assert "cross aarch64: aarch64-linux-gnu-g++" in output
    (wheel,) = out.glob("img2gray-*.whl")
    assert "+torch2.14.cu130.cxx11-" in wheel.name
    _assert_aarch64_wheel(wheel, tmp_path, "cp310")
    log = (out / "logs" / "torch214-cxx11-cu130-aarch64-linux.log").read_text()
    assert f"-ccbin {shutil.which(CROSS_CXX)}" in log
    assert "targets/aarch64-py" in log and "--plat auto" in log


@needs_x86_64
@needs_cross
def test_cross_build_cpu_variant_for_aarch64(tmp_path: Path) -> None:
    """torch214-cxx11-cpu-aarch64-linux: both torch builds (x86_64 for the build environment,
    aarch64 for the sysroot) are torch==2.14.1+cpu from PyTorch's CPU index."""
    out = tmp_path / "wheelhouse"
    code, output = _build(IMG2GRAY, out, "torch214-cxx11-cpu-aarch64-linux")
    # The preflight refuses it up front where PyTorch's index is unreachable ("cannot reach");
    # a reachable-but-failing fetch fails at environment time ("failed to").
    unreachable = "cannot reach" in output or "failed to" in output
    if code != 0 and "torch==2.14.1+cpu" in output and unreachable:
        pytest.skip(
            "torch==2.14.1+cpu (x86_64 build env / aarch64 sysroot) cannot be fetched: PyTorch's "
            "CPU index (download.pytorch.org) is unreachable from here and no --find-links "
            "folder holds it"
        )
    assert code == 0, output
    (wheel,) = out.glob("img2gray-*.whl")
    _assert_aarch64_wheel(wheel, tmp_path, "cp310")


# --- opt-in: the torch 2.9.1 aarch64 CPU wheel, run under qemu-user ---------------------------

OPTIN = os.environ.get("KERNELWHEEL_OPTIN") == "1"
# Debian 12 arm64 packages that make a working CPython 3.11 (plus libstdc++ for torch).
DEBIAN_PACKAGES = (
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libc6",
    "libgcc-s1",
    "libstdc++6",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libbz2-1.0",
    "liblzma5",
    "libzstd1",
    "libcrypt1",
    "libuuid1",
    "libsqlite3-0",
    "libssl3",
    "libncursesw6",
    "libtinfo6",
    "libreadline8",
    "libnsl2",
    "libtirpc3",
    "libgssapi-krb5-2",
    "libkrb5-3",
    "libk5crypto3",
    "libkrb5support0",
    "libcom-err2",
    "libkeyutils1",
    "libdb5.3",
)
# What the emulated Python gets from PyPI (aarch64 wheels; torch's pure-Python dependencies are
# listed because pip would evaluate torch's markers for x86_64 when resolving for another arch).
TARGET_WHEELS = (
    "torch==2.9.1",
    "numpy>=1.26,<2.4",
    "typing-extensions>=4.10",
    "sympy>=1.13.3",
    "mpmath>=1.1,<1.4",
    "filelock",
    "networkx>=2.5.1",
    "jinja2",
    "markupsafe>=2",
    "fsspec>=0.8.5",
    "pip>=24",
)

CHECK_OP = r"""
import platform, sys
import numpy as np, torch, img2gray
rng = np.random.default_rng(20260401)
for shape in [(1, 1, 3), (7, 13, 3), (480, 641, 3), (4, 33, 17, 3), (0, 5, 3)]:
    img = rng.integers(0, 256, size=shape, dtype=np.uint8)
    got = img2gray.img2gray(torch.from_numpy(img)).numpy()
    rgb = img.astype(np.int64)
    ref = (21 * rgb[..., 0] + 72 * rgb[..., 1] + 7 * rgb[..., 2]) // 100
    assert got.shape == shape[:-1], (got.shape, shape)
    assert np.array_equal(got, ref.astype(np.uint8)), shape
    print("shape", shape, "matches the NumPy reference")
print("machine", platform.machine(), "| python", sys.version.split()[0], "| torch",
      torch.__version__, "| numpy", np.__version__)
print("op", img2gray._ops.add_op_namespace_prefix("img2gray"), "devices",
      img2gray.supported_devices(), "| from", img2gray.__file__)
print("OK")
"""


class EvidenceLog:
    """Every command with its output and duration, in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def write(self, text: str) -> None:
        with open(self.path, "a") as fh:
            fh.write(text.rstrip("\n") + "\n")

    def section(self, title: str) -> None:
        self.write(f"\n=== {title}")

    def run(
        self,
        cmd: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        quiet: bool = False,
    ) -> str:
        """Run ``cmd``, log it with its output (``quiet``: the last lines only), return stdout."""
        start = time.monotonic()
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, env=env, cwd=cwd, check=False
        )
        elapsed = time.monotonic() - start
        # This machine's pip configuration names local index folders that hold only some
        # projects; pip's warning about each one is noise here.
        stderr = [line for line in proc.stderr.splitlines() if _PIP_NOISE not in line]
        stdout = proc.stdout.splitlines()
        if quiet and proc.returncode == 0 and len(stdout) > 4:
            stdout = [f"[{len(stdout) - 4} lines omitted]", *stdout[-4:]]
        shown = "\n".join([*stdout, *stderr])
        self.write(f"$ {' '.join(cmd)}\n{shown}\n[exit {proc.returncode}, {elapsed:.1f}s]")
        if proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc.stdout


_PIP_NOISE = "is ignored: it is neither a file nor a directory"


def _clean_pip_env() -> dict[str, str]:
    """pip in the emulated Python sees only what the test gives it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    return env


def _arm64_packages_available() -> bool:
    """apt can fetch arm64 packages (dpkg knows the foreign architecture)."""
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        return False
    proc = subprocess.run(
        ["dpkg", "--print-foreign-architectures"], capture_output=True, text=True, check=False
    )
    return "arm64" in proc.stdout.split()


def _aarch64_python(log: EvidenceLog) -> Path:
    """A Debian arm64 CPython 3.11 sysroot with aarch64 torch 2.9.1 and NumPy installed by its
    own pip under qemu (cached under the kernelwheel cache: installing torch emulated takes
    minutes). Returns the sysroot; its interpreter is <sysroot>/usr/bin/python3.11."""
    key = hashlib.sha256(json.dumps([DEBIAN_PACKAGES, TARGET_WHEELS]).encode()).hexdigest()[:12]
    root = cache_dir() / "emulation" / f"debian12-arm64-py3.11-{key}"
    sysroot, ready = root / "sysroot", root / ".ready"
    with locked(root.parent / f"{root.name}.lock"):
        if ready.is_file():
            log.section(f"aarch64 Python sysroot (cached): {sysroot}")
            log.write(ready.read_text())
            return sysroot
        if root.exists():
            shutil.rmtree(root)
        debs, wheels = root / "debs", root / "wheels"
        debs.mkdir(parents=True)
        wheels.mkdir()
        log.section(
            "aarch64 CPython 3.11 from Debian 12 arm64 packages (apt-get download; dpkg -x)"
        )
        log.run(["apt-get", "download", *(f"{p}:arm64" for p in DEBIAN_PACKAGES)], cwd=debs)
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg", "-x", str(deb), str(sysroot)], check=True)
        log.write("unpacked: " + " ".join(sorted(d.name for d in debs.glob("*.deb"))))
        python = sysroot / "usr" / "bin" / "python3.11"
        log.run(
            [
                QEMU,
                "-L",
                str(sysroot),
                str(python),
                "-c",
                "import platform, sys, ssl, ctypes; print(platform.machine(), sys.version)",
            ]
        )
        log.section("aarch64 wheels from PyPI (pip download --platform manylinux_2_28_aarch64)")
        log.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux_2_28_aarch64",
                "--platform",
                "manylinux2014_aarch64",
                "--implementation",
                "cp",
                "--python-version",
                "3.11",
                "--abi",
                "cp311",
                "-d",
                str(wheels),
                *TARGET_WHEELS,
            ],
            quiet=True,
        )
        log.write("wheels: " + " ".join(sorted(w.name for w in wheels.glob("*.whl"))))
        (pip_wheel,) = wheels.glob("pip-*.whl")
        log.section("install them with the emulated Python's own pip (into its dist-packages)")
        log.run(
            [
                QEMU,
                "-L",
                str(sysroot),
                str(python),
                f"{pip_wheel}/pip",
                "install",
                "--no-index",
                "--find-links",
                str(wheels),
                "--break-system-packages",
                "torch==2.9.1",
                "numpy",
            ],
            env=_clean_pip_env(),
            quiet=True,
        )
        shutil.rmtree(debs)
        ready.write_text(
            "debian packages: " + " ".join(DEBIAN_PACKAGES) + "\n"
            "wheels: " + " ".join(sorted(w.name for w in wheels.glob("*.whl"))) + "\n"
        )
        return sysroot


@pytest.mark.optin
@pytest.mark.skipif(not OPTIN, reason="opt-in: set KERNELWHEEL_OPTIN=1 (downloads ~5 GB, emulates)")
@needs_x86_64
@needs_cross
@pytest.mark.skipif(shutil.which(QEMU) is None, reason=f"no {QEMU}; {INSTALL_HINT}")
def test_aarch64_cpu_wheel_runs_under_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Compile for real (no compiler cache), so the log shows the cross compiler at work.
    monkeypatch.setenv("KERNELWHEEL_NO_CCACHE", "1")
    evidence_dir = os.environ.get("KERNELWHEEL_EVIDENCE_DIR")
    log = EvidenceLog(Path(evidence_dir or tmp_path) / "aarch64_qemu.log")
    log.write(
        f"kernelwheel aarch64 emulation test, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n"
        f"host: {platform.machine()} {platform.platform()}, python {platform.python_version()}"
    )
    log.run([CROSS_CXX, "--version"])
    log.run([QEMU, "--version"])
    if not _arm64_packages_available():
        pytest.skip(
            "no aarch64 Python: it comes from Debian's arm64 packages, which need "
            "`dpkg --add-architecture arm64 && apt-get update` (bash scripts/install-cross.sh "
            "--emulation)"
        )

    # The build's host environment: torch 2.9.1 for x86_64. The recipe's own choice is the CPU
    # build, torch==2.9.1+cpu from download.pytorch.org, which this machine cannot reach; PyPI's
    # x86_64 torch 2.9.1 (a CUDA 12.8 build) runs the same cpp_extension logic, and the headers
    # and libraries the kernel compiles against come from the aarch64 wheel either way.
    log.section("host build environment (x86_64): torch==2.9.1 from PyPI, passed as --python")
    host = provision(EnvSpec(torch_requirement="torch==2.9.1"), cache_dir())
    log.write(f"{host.python}: torch {host.torch} ({host.machine})")

    log.section(f"kernelwheel build kernels/img2gray --only {VARIANT_29}")
    out = tmp_path / "wheelhouse"
    start = time.monotonic()
    code, output = _build(IMG2GRAY, out, VARIANT_29, "--python", str(host.python))
    log.write(f"{output.rstrip()}\n[exit {code}, {time.monotonic() - start:.1f}s]")
    assert code == 0, output
    (wheel,) = out.glob("img2gray-*.whl")
    build_log = (out / "logs" / f"{VARIANT_29}.log").read_text().splitlines()
    log.write("build log (compile commands and repair):")
    log.write(
        "\n".join(line for line in build_log if line.startswith(("[", "$", "cross", "  target")))
    )

    log.section("wheel checks: tag, ELF machine and DT_NEEDED (pyelftools), kernelwheel check")
    _assert_aarch64_wheel(wheel, tmp_path, "cp39")
    log.write(f"{wheel.name}: e_machine {_elf_machines(wheel, tmp_path)}")
    for so in sorted(tmp_path.glob("*.so")):
        log.write(f"{so.name} needs {', '.join(read_elf(so).needed)}")
    log.write(_cli("check", str(wheel))[1])

    sysroot = _aarch64_python(log)
    python = sysroot / "usr" / "bin" / "python3.11"
    venv = tmp_path / "venv"
    qemu = [QEMU, "-L", str(sysroot)]
    log.section(
        "fresh venv in the emulated Python (system site: torch 2.9.1, numpy); pip install the wheel"
    )
    log.run(
        [*qemu, str(python), "-m", "venv", "--without-pip", "--system-site-packages", str(venv)]
    )
    (pip_wheel,) = (sysroot.parent / "wheels").glob("pip-*.whl")
    log.run(
        [
            *qemu,
            str(venv / "bin" / "python"),
            f"{pip_wheel}/pip",
            "install",
            "--no-index",
            "--find-links",
            str(out),
            f"img2gray=={wheel.name.split('-')[1]}",
        ],
        env=_clean_pip_env(),
    )
    log.section("run the CPU op under qemu-aarch64 and compare with NumPy")
    script = tmp_path / "check_op.py"
    script.write_text(CHECK_OP)
    result = log.run([*qemu, str(venv / "bin" / "python"), str(script)], env=_clean_pip_env())
    assert "machine aarch64" in result and "torch 2.9.1+cpu" in result
    assert result.strip().endswith("OK")
    log.section("PASSED")
