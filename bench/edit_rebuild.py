"""The edit-rebuild loop and the shared compiler cache, measured (issue 31).

    python bench/edit_rebuild.py edit --variant torch213-cxx11-cpu-x86_64-linux [--files 24] \\
        [--cuda-capabilities 9.0] [--python PY --cuda-home DIR] [--out FILE]
    python bench/edit_rebuild.py remote --variant torch213-cxx11-cpu-x86_64-linux \\
        --remote redis://127.0.0.1:PORT [--out FILE]

``edit``: a generated project of ``--files`` kernel sources (each includes torch, as kernels do;
``.cu`` for a CUDA variant) and the binding is built cold in a fresh cache folder; then one
source gets a line added and the project is built again. Printed: the rebuild's compile step
and whole build, the objects ccache missed (the rebuild list), and the reference: that source's
own compile (its command from build.ninja, run alone without ccache) plus the link (the
extension's link command from the log, run alone; the better of ``--reference-runs``):
goal rebuild compile <= 1.2 x reference.

``remote``: a relu-sized project (one kernel source and the binding) is built by "machine A"
(cache folder A, project at path A, ccache's remote storage ``--remote``), then by "machine B"
(another cache folder, a copy of the project at another path, an empty local ccache, the same
remote storage). Printed: B's hits (remote ones), the CPU B's compilers used against A's (the
share of compile CPU the remote cache saved) and whether the two wheels are byte-identical.

The build environments are linked in from the real cache (``KERNELWHEEL_CACHE_DIR`` or
~/.cache/kernelwheel), never written to. The machine's load is printed before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def project(root: Path, files: int, cuda: bool, name: str = "many_ops") -> Path:
    """``files`` kernel sources, op_NN(out, x) = x * (NN + 1), each including torch, and the
    binding registering them all."""
    p = root / name
    suffix = "cu" if cuda else "cpp"
    names = [f"op_{i:02d}" for i in range(files)]
    srcs = ", ".join(f'"csrc/{n}.{suffix}"' for n in names)
    backend = "cuda" if cuda else "cpu"
    _write(p, "build.toml", f"""[general]
name = "{name.replace('_', '-')}"
version = 1
backends = ["{backend}"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/ops.h"]

[kernel.ops]
backend = "{backend}"
depends = ["torch"]
src = [{srcs}, "torch-ext/ops.h"]
""")
    decls = "\n".join(f"void {n}(torch::Tensor &out, torch::Tensor const &x);" for n in names)
    _write(p, "torch-ext/ops.h", f"#pragma once\n#include <torch/all.h>\n{decls}\n")
    device = "torch::kCUDA" if cuda else "torch::kCPU"
    regs = "\n".join(f'  ops.def("{n}(Tensor! out, Tensor x) -> ()");\n'
                     f'  ops.impl("{n}", {device}, &{n});' for n in names)
    _write(p, "torch-ext/torch_binding.cpp", f"""#include <torch/library.h>
#include "registration.h"
#include "ops.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {{
{regs}
}}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
""")
    for i, n in enumerate(names):
        if cuda:
            body = f"""#include <ATen/cuda/CUDAContext.h>
#include "../torch-ext/ops.h"

template <typename T>
__global__ void {n}_kernel(T *out, const T *in, int64_t count) {{
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    out[i] = in[i] * static_cast<T>({i + 1});
}}

void {n}(torch::Tensor &out, torch::Tensor const &x) {{
  const int64_t count = x.numel();
  const int blocks = static_cast<int>(std::min<int64_t>((count + 255) / 256, 65535));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "{n}", [&] {{
    {n}_kernel<scalar_t><<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), count);
  }});
}}
"""
        else:
            body = f"""#include "../torch-ext/ops.h"

void {n}(torch::Tensor &out, torch::Tensor const &x) {{
  TORCH_CHECK(out.sizes() == x.sizes(), "{n}: out and x differ in shape");
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "{n}", [&] {{
    auto *o = out.data_ptr<scalar_t>();
    const auto *in = x.data_ptr<scalar_t>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] * static_cast<scalar_t>({i + 1});
  }});
}}
"""
        _write(p, f"csrc/{n}.{suffix}", body)
    _write(p, f"torch-ext/{name}/__init__.py", "from ._ops import ops\n")
    return p


def real_cache() -> Path:
    return Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()


def fresh_cache(path: Path) -> Path:
    """A cache folder with the real cache's environments (and toolkits, probes) linked in."""
    path.mkdir(parents=True)
    for kept in ("envs", "toolkits", "interpreters", "tools"):
        real = real_cache() / kept
        if real.is_dir():
            (path / kept).symlink_to(real.resolve())
    return path


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def build(project_dir: Path, cache: Path, out: Path, args: argparse.Namespace,
          extra: list[str] = ()) -> dict[str, object]:
    """One build; wall seconds, the compile step's seconds, CPU of the children, the log."""
    cmd = [sys.executable, "-m", "kernelwheel", "build", str(project_dir), "--only",
           args.variant, "--cache-dir", str(cache), "--output-dir", str(out), "--version",
           "1.0.0", "--json", *extra]
    if args.python:
        cmd += ["--python", args.python]
    if args.cuda_home:
        cmd += ["--cuda-home", args.cuda_home]
    if args.cuda_capabilities:
        cmd += ["--cuda-capabilities", args.cuda_capabilities]
    before = os.times()
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    log = (out / "logs" / f"{args.variant}.log").read_text()
    report = json.loads(proc.stdout)
    # the step lines on stderr: "  ✓ VARIANT: compile (12.3s)  detail"
    steps = {m[0]: float(m[1]) for m in re.findall(r": (\w[\w ]*) \((\d+\.\d)s\)", proc.stderr)}
    wheel = Path(str(report["wheels"][0]["path"]))
    return {
        "wall": wall,
        "cpu": (after.children_user - before.children_user)
        + (after.children_system - before.children_system),
        "compile": steps.get("compile"),
        "cache": (re.findall(r"ccache \d+/\d+ hit[^\n]*", proc.stderr + log) or ["?"])[-1],
        "log": log,
        "wheel": wheel,
        "report": report,
    }


def stage_of(cache: Path, variant: str) -> Path:
    return next((cache / "work").glob(f"*/{variant}"))


def rebuild_list(stage: Path) -> list[str]:
    """The sources ccache missed in the last build (its stats log: one block per compile)."""
    misses: list[str] = []
    current = None
    for line in (stage / "ccache-stats.log").read_text().splitlines():
        if line.startswith("# "):
            current = line[2:].strip()
        elif line.strip() == "cache_miss" and current:
            misses.append(Path(current).name)
    return sorted(set(misses))


def ninja_tool(args: argparse.Namespace) -> str:
    """ninja: on PATH, beside the --python interpreter, or in a build environment."""
    beside = [Path(args.python).parent / "ninja"] if args.python else []
    envs = sorted(real_cache().glob("envs/*/bin/ninja"))
    for candidate in [shutil.which("ninja"), *beside, *envs]:
        if candidate and Path(candidate).exists():
            return str(candidate)
    raise SystemExit("no ninja found")


def timed(cmd: str, cwd: Path, args: argparse.Namespace) -> float:
    """One run of a compiler command, without ccache (the toolkit's bin on PATH for nvcc)."""
    path = os.environ.get("PATH", "")
    if args.cuda_home:
        path = f"{args.cuda_home}/bin:{path}"
    env = dict(os.environ, CCACHE_DISABLE="1", PATH=path)
    # nvcc's --keep-dir: the build removes it when its compile ends; nvcc needs it to exist
    for keep in re.findall(r"--keep-dir[= ](\S+)", cmd):
        Path(keep.strip("'\"")).mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    subprocess.run(cmd, shell=True, cwd=cwd, env=env, check=True, capture_output=True)
    return time.monotonic() - start


def reference(stage: Path, source: str, log: str, args: argparse.Namespace) -> tuple[float, float]:
    """That source's compile alone (its command from build.ninja, without ccache) and the
    extension's link alone (its command from the log), each the better of two runs."""
    obj_dir = stage / "obj"
    ninja = ninja_tool(args)
    targets = subprocess.run([ninja, "-C", str(obj_dir), "-t", "targets", "all"],
                             capture_output=True, text=True, check=True).stdout
    target = next(t.split(":")[0] for t in targets.splitlines()
                  if t.split(":")[0].endswith(Path(source).stem + ".o"))
    compile_cmd = subprocess.run([ninja, "-C", str(obj_dir), "-t", "commands", "-s", target],
                                 capture_output=True, text=True, check=True).stdout.strip()
    link = next(line for line in log.splitlines() if " -shared " in line and ".so" in line)
    link = link.strip()
    runs = range(args.reference_runs)
    compile_s = min(timed(compile_cmd, obj_dir, args) for _ in runs)
    link_s = min(timed(link, stage, args) for _ in runs)
    return compile_s, link_s


def edit(args: argparse.Namespace, root: Path) -> list[str]:
    cuda = "-cu" in args.variant
    proj = project(root / "src", args.files, cuda)
    cache = fresh_cache(root / "cache")
    cold = build(proj, cache, root / "out", args)
    edited = f"csrc/op_07.{'cu' if cuda else 'cpp'}"
    with open(proj / edited, "a") as fh:
        fh.write("// an edit: one line added\n")
    again = build(proj, cache, root / "out", args)
    stage = stage_of(cache, args.variant)
    rebuilt = rebuild_list(stage)
    src_s, link_s = reference(stage, edited, again["log"], args)
    ref = src_s + link_s
    rows = [
        f"project: {args.files} kernel sources + binding, {args.variant}"
        + (f", capabilities {args.cuda_capabilities}" if args.cuda_capabilities else ""),
        "",
        "| build | whole build s | compile step s | compiler cache |",
        "|---|---|---|---|",
        f"| cold | {cold['wall']:.1f} | {cold['compile'] or 0:.1f} | {cold['cache']} |",
        f"| after editing {edited} | {again['wall']:.1f} | {again['compile'] or 0:.1f} | "
        f"{again['cache']} |",
        "",
        f"rebuilt (ccache misses): {', '.join(rebuilt)}",
        f"reference: {edited} compiled alone {src_s:.1f} s + the link alone {link_s:.1f} s "
        f"= {ref:.1f} s",
        f"edit-rebuild compile step / reference = {(again['compile'] or 0) / ref:.2f} "
        f"(goal <= 1.2); whole rebuild / reference = {again['wall'] / ref:.2f}",
    ]
    return rows


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def remote(args: argparse.Namespace, root: Path) -> list[str]:
    cuda = "-cu" in args.variant
    a_src = project(root / "machine-a" / "src", 1, cuda, name="relu_sized")
    b_src = root / "machine-b" / "elsewhere" / "checkout"
    shutil.copytree(a_src, b_src)
    remote_flag = ["--ccache-remote", args.remote]
    a = build(a_src, fresh_cache(root / "machine-a" / "cache"), root / "machine-a" / "out",
              args, remote_flag)
    b_cache = fresh_cache(root / "machine-b" / "kw-cache")
    b = build(b_src, b_cache, root / "machine-b" / "out", args, remote_flag)
    # the CPU B's compilers would have used: a build of B's project with no cache at all
    c = build(b_src, fresh_cache(root / "machine-c" / "cache"), root / "machine-c" / "out",
              args, ["--no-ccache"])
    same = a["wheel"] is not None and b["wheel"] is not None and sha(a["wheel"]) == sha(b["wheel"])
    saved = 1 - (b["cpu"] - 0) / c["cpu"] if c["cpu"] else 0.0
    return [
        f"project: relu-sized (one kernel source + binding), {args.variant}; remote "
        f"storage {args.remote.split('|')[0]}",
        "",
        "| machine | cache folder | project | whole build s | CPU s (all processes) | "
        "compiler cache |",
        "|---|---|---|---|---|---|",
        f"| A (first) | machine-a/cache | machine-a/src | {a['wall']:.1f} | {a['cpu']:.1f} | "
        f"{a['cache']} |",
        f"| B (empty local ccache) | machine-b/kw-cache | machine-b/elsewhere/checkout | "
        f"{b['wall']:.1f} | {b['cpu']:.1f} | {b['cache']} |",
        f"| C (B's project, --no-ccache) | machine-c/cache | machine-b/elsewhere/checkout | "
        f"{c['wall']:.1f} | {c['cpu']:.1f} | off |",
        "",
        f"compile CPU B got from the remote cache: {saved:.0%} of a build without it "
        "(1 - B's CPU / C's CPU; B's CPU includes kernelwheel, the worker's torch import, "
        "the link and repair)",
        f"wheels A and B byte-identical: {same} ({sha(a['wheel'])[:16] if a['wheel'] else '?'})",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("edit", "remote"))
    ap.add_argument("--variant", required=True)
    ap.add_argument("--files", type=int, default=24)
    ap.add_argument("--remote", help="ccache remote storage URL (remote part)")
    ap.add_argument("--python")
    ap.add_argument("--cuda-home")
    ap.add_argument("--cuda-capabilities")
    ap.add_argument("--reference-runs", type=int, default=2, help="the reference's runs (best)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp folder)")
    args = ap.parse_args()
    if args.part == "remote" and not args.remote:
        ap.error("remote needs --remote URL")
    load = [f"load before: {loadavg()}"]
    with tempfile.TemporaryDirectory(prefix="kw-edit-") as tmp:
        root = args.keep or Path(tmp)
        rows = edit(args, root) if args.part == "edit" else remote(args, root)
    rows = [*load, f"load after: {loadavg()}", f"cores: {os.cpu_count()}", "", *rows]
    text = "\n".join(rows) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
