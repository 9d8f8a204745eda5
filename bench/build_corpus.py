"""Build a corpus of kernel projects and print, per project and variant, what the build cost.

    python bench/build_corpus.py --fixture relu-like --fixture layernorm-like:56 \\
        --variant torch214-cxx11-cu130-x86_64-linux [--cuda-capabilities '9.0 10.0'] \\
        [--warm] [--rebuild-with-cache] [--out FILE] [/tmp/kc/relu /tmp/kc/layer-norm ...]

Projects: ``--fixture relu-like`` (one .cu file, the recipe's default capabilities, and the
binding), ``--fixture layernorm-like:N`` (N small .cu files whose kernels include no torch
header, and the binding), both generated into a temporary folder, plus any project folders given.

Each project builds each ``--variant`` once, cold, in a fresh cache folder of its own (the build
environments are linked in from the real cache; nothing else is shared, the shared cache is never
touched). Per build it prints:

- wall: the whole ``kernelwheel build``; CPU: user + sys of every process it waited for
  (``getrusage(RUSAGE_CHILDREN)`` around it, compilers included);
- compile wall / compile CPU / efficiency: from a sampler of the build's process tree (every
  50 ms): the span during which a compiler process (nvcc, cicc, ptxas, cc1plus, ...) ran, the
  CPU those processes used, and efficiency = compile CPU / (compile wall x cores), cores being
  the machine's CPUs (also with ``--jobs``). The compile CPU is the larger of two lower bounds:
  the sampled processes' CPU (a process shorter than one sample is missed) and ninja's exited
  children's CPU (``cutime`` + ``cstime``: every compiler it ran) plus the compilers outside
  ninja (the link), so the efficiency errs low, if at all, by the last sample's worth;
- longest process / efficiency bound: the CPU time of the busiest single compiler process (one
  translation unit's cc1plus or cicc: no schedule finishes before it), and the efficiency the
  work allows, compile CPU / (cores x max(compile CPU / cores, longest));
- peak RSS: the largest sum of the resident sizes of the build's processes at one sample, and
  the largest single process (``ru_maxrss``);
- cache: the build log's line (ccache hits, or the reuse of an unchanged variant);
- with ``--warm``: the same build again, sources unchanged (goal: <= 10 % of cold);
- with ``--together``: all the variants once more, cold, in one build (kernelwheel's
  ``--variant-jobs``, default all at once): one row, its efficiency the whole build's;
- with ``--copies N``: the first variant N times at once, each build in its own cache with
  ``--jobs`` CPUs / N: the machine's use when N variants build side by side, where only one
  torch is at hand (the GPU machine);
- with ``--rebuild-with-cache``: every variant once more in the same cache folder after all
  variants were built: the hits of one variant's objects in the others' (shared toolkit).

Then the matrix cost table: for each project, the variants of its full matrix (``kernelwheel
matrix --build '*'``) with kernelwheel, against the same matrix without ``[torch.stable-abi]``
(one build per torch minor), and CPU-minutes estimated from the CPU time of the builds measured
here (GPU variants at the measured CUDA variant's cost, CPU variants at the CPU one's).
The machine's load (/proc/loadavg) is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMPILERS = {"nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "cc1plus", "cc1",
             "gcc", "g++", "c++", "cc", "as", "ld", "collect2", "ccache", "ninja"}
_CLK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------- fixtures (generated, our own)

_BINDING_HEAD = """#include <torch/library.h>
#include "registration.h"
#include "torch_binding.h"
"""


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def relu_like(root: Path) -> Path:
    """One .cu file (includes torch, as a relu-sized kernel does) compiled for the recipe's
    default capabilities, and the binding."""
    p = root / "relu_like"
    _write(p, "build.toml", """[general]
name = "relu-like"
version = 1
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.clamp_zero]
backend = "cuda"
depends = ["torch"]
src = ["csrc/clamp_zero.cu"]
""")
    _write(p, "torch-ext/relu_like/__init__.py",
           "from ._ops import ops\n\n\ndef clamp_zero(out, x):\n    ops.clamp_zero(out, x)\n")
    _write(p, "torch-ext/torch_binding.h",
           "#pragma once\n#include <torch/torch.h>\n"
           "void clamp_zero(torch::Tensor &out, torch::Tensor const &x);\n")
    _write(p, "torch-ext/torch_binding.cpp", _BINDING_HEAD + """
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("clamp_zero(Tensor! out, Tensor x) -> ()");
  ops.impl("clamp_zero", torch::kCUDA, &clamp_zero);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
""")
    _write(p, "csrc/clamp_zero.cu", """#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/all.h>

template <typename T>
__global__ void clamp_zero_kernel(T *__restrict__ out, const T *__restrict__ in, int64_t n) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    T v = in[i];
    out[i] = static_cast<float>(v) > 0.0f ? v : T(0);
  }
}

void clamp_zero(torch::Tensor &out, torch::Tensor const &x) {
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  const int64_t n = x.numel();
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535));
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "clamp_zero", [&] {
    clamp_zero_kernel<scalar_t><<<blocks, 256, 0, stream>>>(
        out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), n);
  });
}
""")
    return p


def layernorm_like(root: Path, count: int) -> Path:
    """``count`` small .cu files, each a row-normalisation kernel for one width, templated over
    three element types; none includes a torch header (raw pointers and a stream in), so their
    preprocessed input is the same for every torch of one CUDA."""
    p = root / "layernorm_like"
    names = [f"rownorm_{i:03d}" for i in range(count)]
    srcs = ", ".join(f'"csrc/{n}.cu"' for n in names)
    _write(p, "build.toml", f"""[general]
name = "layernorm-like"
version = 1
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.rownorm]
backend = "cuda"
src = ["csrc/rownorm.cuh", {srcs}]
include = ["csrc"]
""")
    _write(p, "torch-ext/layernorm_like/__init__.py",
           "from ._ops import ops\n\n\ndef rownorm(out, x, width):\n"
           "    ops.rownorm(out, x, width)\n")
    _write(p, "csrc/rownorm.cuh", """#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

template <typename T, int WIDTH>
__global__ void rownorm_kernel(T *out, const T *in, int rows, float eps) {
  int row = blockIdx.x;
  if (row >= rows) return;
  __shared__ float partial[32];
  float sum = 0.f, sq = 0.f;
  for (int c = threadIdx.x; c < WIDTH; c += blockDim.x) {
    float v = static_cast<float>(in[row * WIDTH + c]);
    sum += v;
    sq += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffff, sum, o);
    sq += __shfl_xor_sync(0xffffffff, sq, o);
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  float mean = 0.f;
  for (int w = 0; w < blockDim.x / 32; ++w) mean += partial[w];
  mean /= WIDTH;
  float inv = rsqrtf(sq / WIDTH - mean * mean + eps);
  for (int c = threadIdx.x; c < WIDTH; c += blockDim.x)
    out[row * WIDTH + c] = static_cast<T>((static_cast<float>(in[row * WIDTH + c]) - mean) * inv);
}

#define ROWNORM_LAUNCHER(NAME, WIDTH)                                                       \\
  template <typename T>                                                                      \\
  static void NAME##_typed(void *out, const void *in, int rows, cudaStream_t s) {            \\
    rownorm_kernel<T, WIDTH><<<rows, 128, 0, s>>>(static_cast<T *>(out),                     \\
                                                  static_cast<const T *>(in), rows, 1e-5f);  \\
  }                                                                                          \\
  void NAME(void *out, const void *in, int rows, int dtype, cudaStream_t s) {                \\
    if (dtype == 0) NAME##_typed<float>(out, in, rows, s);                                   \\
    else if (dtype == 1) NAME##_typed<__half>(out, in, rows, s);                             \\
    else NAME##_typed<__nv_bfloat16>(out, in, rows, s);                                      \\
  }
""")
    for i, name in enumerate(names):
        _write(p, f"csrc/{name}.cu",
               f'#include "rownorm.cuh"\n\nROWNORM_LAUNCHER({name}, {128 * (i + 1)})\n')
    decls = "\n".join(f"void {n}(void *, const void *, int, int, cudaStream_t);" for n in names)
    table = ",\n".join(f"    {n}" for n in names)
    _write(p, "torch-ext/torch_binding.h",
           "#pragma once\n#include <torch/torch.h>\n"
           "void rownorm(torch::Tensor &out, torch::Tensor const &x, int64_t width);\n")
    _write(p, "torch-ext/torch_binding.cpp", _BINDING_HEAD + f"""#include <ATen/cuda/CUDAContext.h>

{decls}

using Launcher = void (*)(void *, const void *, int, int, cudaStream_t);
static const Launcher launchers[] = {{
{table}
}};

void rownorm(torch::Tensor &out, torch::Tensor const &x, int64_t width) {{
  TORCH_CHECK(width % 128 == 0 && width / 128 >= 1 && width / 128 <= {count}, "width");
  int dtype = x.scalar_type() == at::kFloat ? 0 : x.scalar_type() == at::kHalf ? 1 : 2;
  launchers[width / 128 - 1](out.data_ptr(), x.data_ptr(), static_cast<int>(x.numel() / width),
                             dtype, at::cuda::getCurrentCUDAStream());
}}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {{
  ops.def("rownorm(Tensor! out, Tensor x, int width) -> ()");
  ops.impl("rownorm", torch::kCUDA, &rownorm);
}}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
""")
    return p


# ---------------------------------------------------------------- measuring


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Sample:
    """What the process-tree sampler saw of one build."""

    compile_cpu: dict[int, float] = field(default_factory=dict)  # pid -> CPU s (last seen)
    # ninja's children's CPU once they have exited (cutime + cstime: every compiler it ran,
    # however short), and which compiler processes ran under a ninja
    ninja_reaped: dict[int, float] = field(default_factory=dict)
    under_ninja: set[int] = field(default_factory=set)
    first: float | None = None
    last: float | None = None
    peak_rss: int = 0  # bytes, summed over the tree at one sample
    # the other processes (kernelwheel, the interpreter probe, the compile worker, auditwheel):
    # pid -> (role, CPU s last seen), for goal 4's fixed cost
    outside: dict[int, tuple[str, float]] = field(default_factory=dict)


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def _role(pid: int, roots: set[int]) -> str:
    """What a process outside the compilers is, from its command line."""
    if pid in roots:
        return "kernelwheel"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    text = b" ".join(argv).decode(errors="replace")
    for needle, role in (("_compile_worker", "compile worker"), ("auditwheel", "auditwheel"),
                         ("patchelf", "patchelf"), ("-m pip", "pip"), ("torch_facts", "probe")):
        if needle in text:
            return role
    return Path(argv[0].decode(errors="replace")).name or "other"


def _sample(root: int, out: Sample) -> int:
    """One look at ``root``'s process tree, recorded in ``out``; its resident bytes."""
    kids = _children_map()
    todo, rss, now, busy = [(root, False)], 0, time.monotonic(), False
    while todo:
        pid, in_ninja = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1: stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        todo.extend((kid, in_ninja or comm == "ninja") for kid in kids.get(pid, ()))
        rss += int(fields[21]) * _PAGE
        if comm == "ninja":
            out.ninja_reaped[pid] = (int(fields[13]) + int(fields[14])) / _CLK
        elif comm in COMPILERS:
            busy = True
            out.compile_cpu[pid] = (int(fields[11]) + int(fields[12])) / _CLK
            if in_ninja:
                out.under_ninja.add(pid)
        else:
            role = out.outside[pid][0] if pid in out.outside else _role(pid, {root})
            out.outside[pid] = (role, (int(fields[11]) + int(fields[12])) / _CLK)
    if busy:
        out.first = now if out.first is None else out.first
        out.last = now
    return rss


@dataclass
class Result:
    project: str
    variant: str
    kind: str  # cold / warm / again
    wall: float
    cpu: float
    compile_wall: float
    compile_cpu: float
    cores: int
    peak_rss: int
    max_proc_rss: int
    cache: str
    longest: float = 0.0  # CPU s of the busiest single compiler process (the critical path's floor)
    outside: dict[str, float] = field(default_factory=dict)  # role -> CPU s seen outside compiles

    @property
    def efficiency(self) -> float:
        return self.compile_cpu / (self.compile_wall * self.cores) if self.compile_wall else 0.0

    @property
    def bound(self) -> float:
        """The best efficiency this build's work allows: no schedule ends before its longest
        single process, so the wall is at least max(CPU / cores, longest)."""
        floor = max(self.compile_cpu / self.cores, self.longest)
        return self.compile_cpu / (floor * self.cores) if floor else 0.0


def run_build(project: Path, variant: str, cache: Path, out: Path, args: argparse.Namespace,
              kind: str, env: dict[str, str], together: list[str] | None = None,
              copies: int = 1) -> Result:
    """One ``kernelwheel build`` of ``variant`` (VARIANT or VARIANT=PYTHON), or with
    ``together`` all of those variants in one build, ``--variant-jobs`` of them at a time; with
    ``copies`` N, N builds of the variant at once, each in its own cache and output folder with
    ``--jobs`` CPUs / N (the split ``--variant-jobs N`` gives N variants of one build)."""
    variant, _, python = variant.partition("=")
    python = python or args.python
    select = ["--only", variant]
    if together:
        select = [a for v in together for a in ("--variant", v)]
        select += ["--variant-jobs", str(args.variant_jobs or len(together))]
        variant = " + ".join(together)
    elif args.variant_jobs:
        select += ["--variant-jobs", str(args.variant_jobs)]
    cmd = [sys.executable, "-m", "kernelwheel", "build", str(project), *select,
           "--cache-dir", str(cache), "--output-dir", str(out), "--version", "1.0.0"]
    if args.cuda_capabilities:
        cmd += ["--cuda-capabilities", args.cuda_capabilities]
    if args.jobs or copies > 1:
        cmd += ["--jobs", str(args.jobs or max(1, (os.cpu_count() or 1) // copies))]
    if args.nvcc_threads:
        cmd += ["--nvcc-threads", str(args.nvcc_threads)]
    if python:
        cmd += ["--python", python]
    if args.cuda_home:
        cmd += ["--cuda-home", args.cuda_home]
    cmds = [cmd]
    if copies > 1:
        variant = f"{variant} x {copies} at once"
        cmds = []
        for n in range(copies):
            mine = [str(cache / f"copy-{n}") if a == str(cache) else
                    str(out / f"copy-{n}") if a == str(out) else a for a in cmd]
            (cache / f"copy-{n}").mkdir(parents=True)
            for kept in ("envs", "interpreters"):
                if (cache / kept).exists():
                    (cache / f"copy-{n}" / kept).symlink_to((cache / kept).resolve())
            cmds.append(mine)
    sample = Sample()
    start, cpu = time.monotonic(), cpu_seconds()
    # the step lines (the compile's cache detail among them) go to stdout, errors to stderr
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for c in cmds]
    stop = threading.Event()

    def sampler() -> None:
        while not stop.is_set():
            rss = sum(_sample(proc.pid, sample) for proc in procs)
            sample.peak_rss = max(sample.peak_rss, rss)  # all the builds' trees at one look
            stop.wait(0.05)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    err = "".join(proc.communicate()[0] for proc in procs)
    stop.set()
    thread.join()
    wall, used = time.monotonic() - start, cpu_seconds() - cpu
    if any(proc.returncode != 0 for proc in procs):
        raise SystemExit(f"build of {project.name} {variant} failed:\n{err[-3000:]}")
    logs = [out / "logs" / f"{v}.log" for v in (together or [variant.split(" x ")[0]])]
    if copies > 1:
        logs = [out / f"copy-{n}" / "logs" / f"{variant.split(' x ')[0]}.log"
                for n in range(copies)]
    found = []
    for log in logs:
        text = (log.read_text() if log.exists() else "") + err
        found += re.findall(r"ccache \d+/\d+ hit[^\n]*|compile skipped|no compiler cache",
                            text)[-1:]
    span = (sample.last - sample.first + 0.05) if sample.first is not None else 0.0
    # Two lower bounds of the compilers' CPU: what the sampler saw of each process (misses the
    # short ones), and ninja's exited children's total (misses what exits after its last sample)
    seen = sum(sample.compile_cpu.values())
    reaped = sum(sample.ninja_reaped.values()) + sum(
        cpu for pid, cpu in sample.compile_cpu.items() if pid not in sample.under_ninja)
    return Result(project.name, variant, kind, wall, used, span, max(seen, reaped),
                  os.cpu_count() or 1, sample.peak_rss,
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
                  "; ".join(found) or "?", max(sample.compile_cpu.values(), default=0.0),
                  _by_role(sample))


def _by_role(sample: Sample) -> dict[str, float]:
    roles: dict[str, float] = {}
    for role, cpu in sample.outside.values():
        roles[role] = roles.get(role, 0.0) + cpu
    return roles


def fresh_cache(root: Path, name: str, envs: Path) -> Path:
    """A cache folder of its own (no compiler cache, no work folders) with the real cache's
    environments and interpreter probes linked in: a cold build compiles everything, but an
    environment made or an interpreter probed before is not made or probed again (the first
    build of a --python interpreter in a run probes it: "probe" in the by-process column)."""
    cache = root / name
    cache.mkdir(parents=True)
    if envs.is_dir():
        (cache / "envs").symlink_to(envs)
    tools = envs.parent / "tools"  # PyPI's ccache where the host has none (installed once)
    if tools.is_dir():
        (cache / "tools").symlink_to(tools)
    probes = envs.parent / "interpreters"
    probes.mkdir(parents=True, exist_ok=True)
    (cache / "interpreters").symlink_to(probes)
    return cache


# ---------------------------------------------------------------- matrix cost


def matrix(project: Path) -> list[dict[str, object]]:
    proc = subprocess.run([sys.executable, "-m", "kernelwheel", "matrix", str(project), "--json",
                           "--build", "*"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"kernelwheel matrix {project} failed:\n{proc.stderr[-2000:]}")
    include: list[dict[str, object]] = json.loads(proc.stdout)["include"]
    return include


def without_stable_abi(project: Path, root: Path) -> Path:
    """A copy of ``project`` whose build.toml has no [torch.stable-abi] table."""
    copy = root / f"nostable-{project.name}"
    shutil.copytree(project, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    text = (copy / "build.toml").read_text()
    text = re.sub(r"(?ms)^\[torch\.stable-abi\]\n.*?(?=^\[|\Z)", "", text)
    text = re.sub(r"(?m)^stable-abi\s*=.*\n", "", text)
    (copy / "build.toml").write_text(text)
    return copy


def matrix_rows(projects: list[Path], results: list[Result], root: Path) -> list[str]:
    cuda_cpu = [r.cpu for r in results if r.kind == "cold" and "-cu" in r.variant]
    cpu_cpu = [r.cpu for r in results if r.kind == "cold" and "-cpu-" in r.variant]
    gpu_cost = statistics.median(cuda_cpu) / 60 if cuda_cpu else None
    cpu_cost = statistics.median(cpu_cpu) / 60 if cpu_cpu else None

    def cost(entries: list[dict[str, object]]) -> str:
        gpu = sum(1 for e in entries if e.get("cuda"))
        cpu = len(entries) - gpu
        if gpu and gpu_cost is None or cpu and cpu_cost is None:
            return "—"
        return f"{gpu * (gpu_cost or 0) + cpu * (cpu_cost or 0):.1f}"

    rows = ["| project | stable ABI | compiles, kernelwheel | compiles, one per torch minor | "
            "CPU-min, kernelwheel | CPU-min, one per minor | saved |",
            "|---|---|---|---|---|---|---|"]
    for project in projects:
        ours = matrix(project)
        stable = any(str(e["name"]).startswith("torch-stable-abi") for e in ours)
        theirs = matrix(without_stable_abi(project, root)) if stable else ours
        saved = 1 - len(ours) / len(theirs) if theirs else 0.0
        rows.append(f"| {project.name} | {'yes' if stable else 'no'} | {len(ours)} | "
                    f"{len(theirs)} | {cost(ours)} | {cost(theirs)} | {saved:.0%} |")
    return rows


@dataclass
class ObjectTimes:
    """One cold build's compile edges from ninja's log, split by whether the source reaches a
    torch header (kernelwheel's own scan): goal 2's saving, estimated for one build."""

    project: str
    variant: str
    free_s: float
    all_s: float
    free_n: int
    all_n: int


def object_times(project: Path, cache: Path, variant: str) -> ObjectTimes | None:
    """Each object's compile time (end - start, ms) from the ``.ninja_log`` of ``variant``'s
    work folder, the last record per object; None without a log."""
    from kernelwheel.compile.torch_free import torch_free_sources
    from kernelwheel.model.project import load_project

    logs = list((cache / "work").glob(f"*/{variant}/obj/.ninja_log"))
    if not logs:
        return None
    edges: dict[str, float] = {}
    for line in logs[0].read_text().splitlines()[1:]:
        start, end, _, output, *_ = line.split("\t")
        edges[output] = (int(end) - int(start)) / 1000
    loaded = load_project(project)
    sources = [str((project / s).resolve()) for k in loaded.kernels for s in k.src
               if s.suffix in (".cu", ".cpp", ".cc")]
    includes = [str(project / d) for k in loaded.kernels for d in k.include]
    free = {os.path.splitext(s)[0] for s in torch_free_sources(sources, includes, project)}
    free_s = free_n = 0.0
    for output, seconds in edges.items():
        if not output.endswith(".o"):
            continue
        stem = "/" + output.split("/obj/", 1)[1][: -len(".o")]
        if stem in free:
            free_s, free_n = free_s + seconds, free_n + 1
    objects = [sec for out, sec in edges.items() if out.endswith(".o")]
    return ObjectTimes(project.name, variant, free_s, sum(objects), int(free_n), len(objects))


def object_rows(times: list[ObjectTimes]) -> list[str]:
    rows = ["| project | variant | objects without torch headers | their compile time s | all "
            "objects' compile time s | share a second torch of the same CUDA reuses |",
            "|---|---|---|---|---|---|"]
    for t in times:
        rows.append(f"| {t.project} | {t.variant} | {t.free_n} of {t.all_n} | {t.free_s:.1f} | "
                    f"{t.all_s:.1f} | {t.free_s / t.all_s if t.all_s else 0:.0%} |")
    return rows + [""]


def fixed_cost_rows(results: list[Result]) -> list[str]:
    """Goal 4: what a build costs outside its compilers, CPU and wall, and who spends it (the
    sampler's last look at each process: one that lives under 50 ms is not seen, so the roles'
    sum is a lower bound; "unseen" is the rest of the build's CPU)."""
    rows = ["| project | variant | build | CPU outside the compile s | share of CPU | wall outside "
            "the compile s | share of wall | by process (CPU s) |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        fixed = max(0.0, r.cpu - r.compile_cpu)
        seen = sum(r.outside.values())
        parts = sorted(r.outside.items(), key=lambda kv: -kv[1])
        text = ", ".join(f"{role} {cpu:.1f}" for role, cpu in parts if cpu >= 0.05)
        text += f", unseen {max(0.0, fixed - seen):.1f}"
        out_wall = max(0.0, r.wall - r.compile_wall)
        rows.append(f"| {r.project} | {r.variant} | {r.kind} | {fixed:.1f} | "
                    f"{fixed / r.cpu if r.cpu else 0:.1%} | {out_wall:.1f} | "
                    f"{out_wall / r.wall if r.wall else 0:.1%} | {text} |")
    return rows + [""]


# ---------------------------------------------------------------- main


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("projects", nargs="*", type=Path)
    ap.add_argument("--fixture", action="append", default=[],
                    help="relu-like, or layernorm-like:N (N .cu files, default 56)")
    ap.add_argument("--variant", action="append", default=[],
                    help="a variant to build, or VARIANT=PYTHON: with that interpreter's torch")
    ap.add_argument("--cuda-capabilities")
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--nvcc-threads", type=int)
    ap.add_argument("--python", help="build with this interpreter's torch (kernelwheel --python)")
    ap.add_argument("--cuda-home")
    ap.add_argument("--warm", action="store_true", help="also time an unchanged rebuild")
    ap.add_argument("--rebuild-with-cache", action="store_true",
                    help="all variants again in one cache folder: the hits across variants")
    ap.add_argument("--together", action="store_true",
                    help="also build all --variant values in one build, side by side (kernelwheel "
                         "--variant-jobs): one row for the whole build")
    ap.add_argument("--variant-jobs", type=int,
                    help="kernelwheel --variant-jobs (with --together: default all at once)")
    ap.add_argument("--copies", type=int, default=1,
                    help="also build the first variant N times at once (own caches, --jobs "
                         "CPUs/N each): the split --variant-jobs N gives, where only one torch "
                         "is at hand")
    ap.add_argument("--skip-separate", action="store_true",
                    help="leave out the one-variant-per-build cold builds (with --together or "
                         "--copies)")
    ap.add_argument("--matrix-only", action="store_true", help="print only the matrix cost")
    ap.add_argument("--keep-ninja-logs", type=Path,
                    help="copy each cold build's .ninja_log here (every edge's start and end)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    variants = args.variant or ["torch214-cxx11-cu130-x86_64-linux"]
    real_cache = Path(os.environ.get("KERNELWHEEL_CACHE_DIR", "~/.cache/kernelwheel")).expanduser()
    env = {k: v for k, v in os.environ.items()
           if k not in ("KERNELWHEEL_CACHE_DIR", "KERNELWHEEL_NO_CCACHE")}
    root = Path(tempfile.mkdtemp(prefix="kw-build-corpus-"))
    lines: list[str] = []
    try:
        projects = list(args.projects)
        for spec in args.fixture:
            name, _, count = spec.partition(":")
            if name == "relu-like":
                projects.append(relu_like(root / "fixtures"))
            elif name == "layernorm-like":
                projects.append(layernorm_like(root / "fixtures", int(count or 56)))
            else:
                raise SystemExit(f"unknown fixture {spec!r}: relu-like or layernorm-like:N")
        ccache = shutil.which("ccache", path=env.get("PATH"))
        load0 = loadavg()
        results: list[Result] = []
        shares: list[ObjectTimes] = []
        if not args.matrix_only:
            for project in projects:
                shared = fresh_cache(root, f"shared-{project.name}", real_cache / "envs")
                for variant in [] if args.skip_separate else variants:
                    name = variant.partition("=")[0]
                    cache = fresh_cache(root, f"{project.name}-{name}", real_cache / "envs")
                    out = root / "out" / project.name / name
                    results.append(run_build(project, variant, cache, out, args, "cold", env))
                    found = object_times(project, cache, name)
                    if args.keep_ninja_logs:
                        args.keep_ninja_logs.mkdir(parents=True, exist_ok=True)
                        for log in (cache / "work").glob(f"*/{name}/obj/.ninja_log"):
                            shutil.copy(log, args.keep_ninja_logs / f"{project.name}-{name}.ninja_log")
                    if found is not None:
                        shares.append(found)
                    print(f"{project.name} {name} cold: {results[-1].wall:.1f} s",
                          file=sys.stderr)
                    if args.warm:
                        results.append(run_build(project, variant, cache, out, args, "warm", env))
                if args.together:  # every variant in one build, side by side, cold
                    names = [v.partition("=")[0] for v in variants]
                    cache = fresh_cache(root, f"{project.name}-together", real_cache / "envs")
                    out = root / "out" / project.name / "together"
                    results.append(run_build(project, variants[0], cache, out, args,
                                             "cold, side by side", env, together=names))
                    print(f"{project.name} together: {results[-1].wall:.1f} s", file=sys.stderr)
                if args.copies > 1:  # N builds at once, as N variants side by side would be
                    cache = fresh_cache(root, f"{project.name}-copies", real_cache / "envs")
                    out = root / "out" / project.name / "copies"
                    results.append(run_build(project, variants[0], cache, out, args,
                                             "cold, side by side", env, copies=args.copies))
                    print(f"{project.name} copies: {results[-1].wall:.1f} s", file=sys.stderr)
                if args.rebuild_with_cache:
                    for variant in variants:  # one cache folder: does a variant hit another's?
                        name = variant.partition("=")[0]
                        out = root / "out" / project.name / f"again-{name}"
                        results.append(run_build(project, variant, shared, out, args,
                                                 "shared cache", env))
        load1 = loadavg()
        lines += [f"{os.cpu_count()} CPUs, jobs {args.jobs or 'auto'}, nvcc threads "
                  f"{args.nvcc_threads or 'auto'}, capabilities "
                  f"{args.cuda_capabilities or 'recipe default'}; ccache: {ccache or 'absent'}; "
                  f"load average before {load0}, after {load1}", ""]
        if results:
            lines += ["| project | variant | build | wall s | CPU s | compile wall s | "
                      "compile CPU s | efficiency | longest process CPU s | efficiency bound | "
                      "peak RSS MiB (tree) | largest process MiB | cache |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in results:
                lines.append(f"| {r.project} | {r.variant} | {r.kind} | {r.wall:.1f} | "
                             f"{r.cpu:.1f} | {r.compile_wall:.1f} | {r.compile_cpu:.1f} | "
                             f"{r.efficiency:.2f} | {r.longest:.1f} | {r.bound:.2f} | "
                             f"{_mib(r.peak_rss)} | {_mib(r.max_proc_rss)} "
                             f"| {r.cache} |")
            lines.append("")
            lines += fixed_cost_rows(results)
        if shares:
            lines += object_rows(shares)
        lines += matrix_rows(projects, results, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
