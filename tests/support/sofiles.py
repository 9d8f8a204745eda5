"""Tiny real shared objects for Hub-layout test repos, compiled from a small C file.

Each is a limited-API Python extension ``<namespace>.abi3.so`` whose ``PyInit`` creates an empty
module and records that it ran, so tests can see the extension was really loaded. aarch64 objects
come from the cross compiler when there is one; otherwise an x86_64 object gets the aarch64
machine number in its header (enough for the ELF checks, never loaded).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sysconfig
from pathlib import Path

PY_INCLUDE = sysconfig.get_paths()["include"]

SOURCE = r"""
#define Py_LIMITED_API 0x03090000
#include <Python.h>
%(extra)s
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, 0, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL) {
        PyModule_AddStringConstant(m, "LOADED", "%(name)s");
    }
    %(call)s
    return m;
}
"""

# A symbol only glibc >= 2.36 has: makes an object that violates manylinux_2_28.
TOO_NEW = ("#include <stdlib.h>\n", "(void)arc4random();")

_EM_AARCH64 = 183


def compilers() -> dict[str, str | None]:
    return {
        "x86_64": shutil.which("gcc") or shutil.which("cc"),
        "aarch64": shutil.which("aarch64-linux-gnu-gcc"),
    }


def build_extension(
    cache: Path,
    name: str,
    *,
    arch: str = "x86_64",
    too_new_glibc: bool = False,
    pad: int = 0,
    code: tuple[str, str] = ("", ""),
    fatbin: bool = False,
    needed: tuple[str, ...] = (),
) -> bytes:
    """The bytes of ``<name>.abi3.so`` (cached under ``cache``). ``pad`` adds that many bytes of
    incompressible data in a non-loaded section, to make realistically sized objects. ``code``:
    C source put before the module (definitions) and into its init (calls; ``m`` is the
    module). ``fatbin``: the real CUDA device code of tests/fixtures/fatbin/add_one.o in a
    ``.nv_fatbin`` section, as nvcc puts it (not loaded: the object still imports without a
    GPU). ``needed``: sonames (``libcudart.so.12``) of stub libraries linked in, so the object
    really names them in DT_NEEDED (it then loads only where they are found)."""
    extra, call = TOO_NEW if too_new_glibc else code
    source = SOURCE % {"name": name, "extra": extra, "call": call}
    key = hashlib.sha256(repr((source, arch, pad, fatbin, needed)).encode()).hexdigest()[:16]
    out = cache / f"{name}-{arch}-{key}.so"
    if out.exists():
        return out.read_bytes()
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / f"{name}-{key}.c"
    src.write_text(source)
    cc = compilers()
    compiler = cc[arch] or cc["x86_64"]
    if compiler is None:
        raise RuntimeError("no C compiler (gcc) found")
    tmp = out.with_suffix(".tmp")
    cmd = [compiler, "-shared", "-fPIC", "-O1", f"-I{PY_INCLUDE}", "-o", str(tmp), str(src)]
    if needed:
        cmd += ["-Wl,--no-as-needed", f"-L{cache}"]
        cmd += [f"-l:{_stub_library(cache, compiler, soname)}" for soname in needed]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"compile failed: {' '.join(cmd)}\n{proc.stderr}")
    if fatbin:
        _add_section(tmp, ".nv_fatbin", _fatbin(cache), arch, cc)
    if pad:
        blob = cache / f"pad-{pad}.bin"
        if not blob.exists():
            blob.write_bytes(_noise(pad))
        cross = arch == "aarch64" and cc["aarch64"] is not None
        objcopy = shutil.which("aarch64-linux-gnu-objcopy" if cross else "objcopy")
        if objcopy is None:
            raise RuntimeError("objcopy not found (binutils)")
        subprocess.run(
            [objcopy, "--add-section", f".kwpad={blob}", str(tmp)], check=True, capture_output=True
        )
    data = bytearray(tmp.read_bytes())
    if arch == "aarch64" and cc["aarch64"] is None:
        data[18:20] = _EM_AARCH64.to_bytes(2, "little")
    out.write_bytes(bytes(data))
    tmp.unlink()
    return bytes(data)


FATBIN_OBJECT = Path(__file__).resolve().parent.parent / "fixtures" / "fatbin" / "add_one.o"


def _fatbin(cache: Path) -> Path:
    """The ``.nv_fatbin`` section of the real nvcc object FATBIN_OBJECT, as a file."""
    out = cache / "add_one.nv_fatbin"
    if not out.exists():
        objcopy = shutil.which("objcopy")
        if objcopy is None:
            raise RuntimeError("objcopy not found (binutils)")
        subprocess.run(
            [objcopy, "-O", "binary", "--only-section=.nv_fatbin", str(FATBIN_OBJECT), str(out)],
            check=True,
            capture_output=True,
        )
    return out


def _add_section(obj: Path, name: str, blob: Path, arch: str, cc: dict[str, str | None]) -> None:
    cross = arch == "aarch64" and cc["aarch64"] is not None
    objcopy = shutil.which("aarch64-linux-gnu-objcopy" if cross else "objcopy")
    if objcopy is None:
        raise RuntimeError("objcopy not found (binutils)")
    subprocess.run([objcopy, "--add-section", f"{name}={blob}", str(obj)], check=True)


def _stub_library(cache: Path, compiler: str, soname: str) -> str:
    """An empty shared library named ``soname`` in ``cache``, for a link to name it."""
    out = cache / soname
    if not out.exists():
        src = cache / "stub.c"
        src.write_text("int kernelwheel_test_stub;\n")
        subprocess.run(
            [compiler, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
            check=True,
            capture_output=True,
        )
    return soname


def _noise(size: int) -> bytes:
    out = bytearray()
    seed = b"kernelwheel-pad"
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(8, "little")).digest()
        counter += 1
    return bytes(out[:size])


def fake_macho() -> bytes:
    """Bytes that look like a Mach-O arm64 dylib header (darwin variants are never loaded)."""
    return bytes.fromhex("cffaedfe0c000001") + b"\0" * 56


def fake_pe() -> bytes:
    """Bytes that look like a PE file (windows variants are never loaded)."""
    return b"MZ" + b"\0" * 62
