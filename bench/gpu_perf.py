"""img2gray's public call against torch's copy_, and the fatbin settings, on a GPU in one run.

Driver: bash bench/gpu.sh perf (one device call). Steps, all from this checkout:

1. build img2gray with kernelwheel (``--python`` the machine's torch, ``--no-repair``) once per
   device-code setting, in parallel: nvcc's fatbin compression default/none/size/speed/balance
   with the recipe's capability list, and the default compression for capability 9.0 alone;
2. per setting, in fresh processes (interleaved, --procs each): ``import img2gray`` after torch
   and a CUDA context exist, and the first call (1080p, synchronised) minus the second, i.e. the
   one-time cost of loading the module's device code; plus wheel and .so sizes;
3. the kernel's own tests (GPU ones included) against the default build;
4. host time per call (small image, no synchronisation: what Python pays per call); one
   synchronous call at 1080p and 4K, in blocks of calls of one implementation (interleaved),
   warm (the same image every call, as the issue measured) and cold (the next of several images
   each call, so inputs come from DRAM); device time per call back to back (a CUDA graph of many
   calls), for: ``img2gray()``, the functional op, the op's C++ callable (no OpOverload frame),
   the out variant on a preallocated output, the seed's wrapper (Python checks + torch.empty +
   out variant) and three copies: the same bytes (2 B/pixel read + 2 written), the image itself
   (3 + 3), and one channel of it (3 read + 1 written, strided: img2gray's DRAM traffic).

Writes gpu_perf.json, gpu_perf_table.md, gpu_perf_build.log and gpu_perf_pytest.log under --out
and prints the tables last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "kernels" / "img2gray"
VARIANT = "torch211-cxx11-cu130-x86_64-linux"
SETTINGS = {  # name -> extra kernelwheel build flags
    "default": [],
    "none": ["--fatbin-compression", "none"],
    "size": ["--fatbin-compression", "size"],
    "speed": ["--fatbin-compression", "speed"],
    "balance": ["--fatbin-compression", "balance"],
    "sm90 only": ["--cuda-capabilities", "9.0"],
}


def log(msg: str = "") -> None:
    print(msg, flush=True)


def cuda_home() -> str:
    for cand in (os.environ.get("CUDA_HOME"), "/usr/local/cuda-13.0", "/usr/local/cuda"):
        if cand and Path(cand, "bin", "nvcc").exists():
            return cand
    nvcc = shutil.which("nvcc")
    return str(Path(nvcc).resolve().parent.parent) if nvcc else "/usr/local/cuda"


def slug(name: str) -> str:
    return name.replace(" ", "_")


def build_all(work: Path, out: Path, env: dict[str, str], names: list[str]
              ) -> dict[str, dict[str, object]]:
    jobs = max(2, (os.cpu_count() or 4) // len(names))
    procs = {}
    for name in names:
        flags = SETTINGS[name]
        dest = work / f"wh_{slug(name)}"
        shutil.rmtree(dest, ignore_errors=True)
        cmd = [sys.executable, "-m", "kernelwheel", "build", str(KERNEL), "--only", VARIANT,
               "--python", sys.executable, "--cuda-home", cuda_home(), "--no-repair",
               "--best-effort", "--cache-dir", str(work / f"cache_{slug(name)}"), "-o", str(dest),
               "-j", str(jobs), "--recipes", str(REPO / "recipes"), *flags]
        procs[name] = (cmd, dest, time.monotonic(), subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    built: dict[str, dict[str, object]] = {}
    with open(out / "gpu_perf_build.log", "w") as fh:
        for name, (cmd, dest, t0, p) in procs.items():
            text, _ = p.communicate(timeout=420)
            seconds = time.monotonic() - t0
            fh.write(f"== {name}: exit {p.returncode} after {seconds:.0f} s\n$ {' '.join(cmd)}\n"
                     f"{text}\n")
            for lf in sorted((dest / "logs").glob("*.log")) if (dest / "logs").exists() else []:
                fh.write(f"---- {lf.name}\n{lf.read_text()[-6000:]}\n")
            wheels = sorted(dest.glob("*.whl"))
            log(f"build {name}: exit {p.returncode}, {seconds:.0f} s, {[w.name for w in wheels]}")
            if p.returncode != 0 or len(wheels) != 1:
                continue
            site = work / f"site_{slug(name)}"
            shutil.rmtree(site, ignore_errors=True)
            with zipfile.ZipFile(wheels[0]) as zf:
                zf.extractall(site)
                so = [i for i in zf.infolist() if i.filename.endswith(".so")]
            built[name] = {"wheel": wheels[0].name, "wheel_bytes": wheels[0].stat().st_size,
                           "so_bytes": so[0].file_size, "site": str(site),
                           "build_seconds": round(seconds, 1)}
    return built


FIRST_CALL = r"""
import json, sys, time
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
x = torch.randint(0, 256, (1080, 1920, 3), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter(); import img2gray; t1 = time.perf_counter()
y = img2gray.img2gray(x); torch.cuda.synchronize(); t2 = time.perf_counter()
y = img2gray.img2gray(x); torch.cuda.synchronize(); t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "first_call_ms": (t2 - t1) * 1e3,
                  "second_call_ms": (t3 - t2) * 1e3}))
"""


def first_calls(built: dict[str, dict[str, object]], procs: int, env: dict[str, str]) -> None:
    samples: dict[str, list[dict[str, float]]] = {n: [] for n in built}
    for _ in range(procs):
        for name, info in built.items():
            p = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True,
                               env=dict(env, PYTHONPATH=str(info["site"])), timeout=120)
            if p.returncode == 0:
                samples[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
            else:
                log(f"first call {name} failed: {p.stderr[-800:]}")
    for name, rows in samples.items():
        if rows:
            for key in ("import_ms", "first_call_ms", "second_call_ms"):
                built[name][key] = statistics.median(r[key] for r in rows)
            built[name]["load_ms"] = statistics.median(
                r["first_call_ms"] - r["second_call_ms"] for r in rows)
            built[name]["procs"] = len(rows)


TIMING = r"""
import json, math, os, statistics, sys, time
import torch
import img2gray

out = {}
SYNC_REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
ops = img2gray.ops
functional = ops.img2gray.default
out_variant = ops.img2gray.out
raw_op = functional._op  # the C++ callable behind the OpOverload (no Python frame)
is_compiling = torch.compiler.is_compiling


def seed_wrapper(image):
    # the seed's img2gray(): Python checks, torch.empty, the out variant
    if not isinstance(image, torch.Tensor):
        raise TypeError("not a tensor")
    if image.dtype != torch.uint8:
        raise TypeError("dtype")
    if image.dim() not in (3, 4) or image.shape[-1] != 3:
        raise ValueError("shape")
    if image.device.type not in img2gray.supported_devices():
        raise RuntimeError("device")
    image = image.contiguous()
    output = torch.empty(image.shape[:-1], dtype=torch.uint8, device=image.device)
    out_variant(image, output)
    return output


def raw_public(image):
    # a candidate public call: the C++ callable in eager, the OpOverload under torch.compile
    if is_compiling():
        return functional(image)
    return raw_op(image)


COPY = "copy_ (same bytes: 2 B/px read + 2 written)"
CHANNEL = "copy_ of one channel (3 B/px read + 1 written: img2gray's traffic)"


def impls(t):
    # img2gray() and copy_ twice each: the spread between the two is the noise
    xs, ys, src, dst, full, ch = t["xs"], t["ys"], t["src"], t["dst"], t["full"], t["ch"]
    return {
        "img2gray()": lambda i: img2gray.img2gray(xs[i]),
        COPY: lambda i: dst[i].copy_(src[i]),
        CHANNEL: lambda i: ch[i].copy_(xs[i][..., 1]),
        "copy_ of the image (3 B/px read + 3 written)": lambda i: full[i].copy_(xs[i]),
        "op img2gray(x) (functional)": lambda i: functional(xs[i]),
        "op via its C++ callable (OpOverload._op)": lambda i: raw_public(xs[i]),
        "op img2gray.out(x, y) (preallocated)": lambda i: out_variant(xs[i], ys[i]),
        "seed wrapper (Python checks + torch.empty + out op)": lambda i: seed_wrapper(xs[i]),
        "img2gray() (again)": lambda i: img2gray.img2gray(xs[i]),
        COPY + " (again)": lambda i: dst[i].copy_(src[i]),
    }


def inputs(shape, nsets):
    pixels = math.prod(shape[:-1])
    def u8(*size):
        return [torch.randint(0, 256, size, dtype=torch.uint8, device="cuda") for _ in range(nsets)]
    return {"xs": u8(*shape), "ys": u8(*shape[:-1]), "src": u8(2 * pixels),
            "dst": u8(2 * pixels), "full": u8(*shape), "ch": u8(*shape[:-1])}


# correctness of every timed img2gray path against each other (the tests check against NumPy)
t = inputs((67, 129, 3), 2)
want = img2gray.img2gray(t["xs"][0])
for name, fn in impls(t).items():
    if "copy_" in name:
        continue
    t["ys"][0].fill_(0xA5)
    got = fn(0)
    assert torch.equal(got if got is not None else t["ys"][0], want), name

l2 = torch.cuda.get_device_properties(0).L2_cache_size or 50 * 2**20
try:  # one core: no migration between cores in the middle of a timed call
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
except (AttributeError, OSError):
    pass

# 1) host time per call: a small image, no synchronisation, N calls; interleaved rounds
N, ROUNDS = 2000, 25
t = inputs((64, 64, 3), 4)
fns = impls(t)
host = {name: [] for name in fns}
for name, fn in fns.items():
    for i in range(200):
        fn(i % 4)
torch.cuda.synchronize()
for _ in range(ROUNDS):
    for name, fn in fns.items():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(N):
            fn(i & 3)
        t1 = time.perf_counter()
        host[name].append((t1 - t0) / N * 1e6)
torch.cuda.synchronize()
out["host_us"] = {k: statistics.median(v) for k, v in host.items()}
out["host_rounds"] = ROUNDS

# 2) one synchronous call (host work + launch + kernel + synchronize). Each implementation runs
#    a block of BLOCK calls in a row (the first SKIP not counted), blocks interleaved over rounds,
#    so every counted call follows a call of the same implementation:
#    warm: the same image every call (it stays in L2), as the issue measured;
#    cold: the next of nsets images each call (last touched more than 3x L2 of traffic ago), so
#          the inputs come from DRAM and each call also pays the write-back of the outputs its
#          predecessor left in L2: img2gray reads 3 B/px and writes 1, the same-bytes copy 2 + 2.
# 3) device time per call, back to back: a CUDA graph of many calls (no host work).
BLOCK, SKIP = 30, 5
out["sync_us"], out["graph_us"] = {}, {}
for size, shape in (("1080p", (1080, 1920, 3)), ("4K", (2160, 3840, 3))):
    pixels = shape[0] * shape[1]
    nsets = max(3, math.ceil(3 * l2 / (4 * pixels)))
    t = inputs(shape, nsets)
    fns = impls(t)
    for name, fn in fns.items():
        for i in range(nsets):
            fn(i)
    torch.cuda.synchronize()
    rounds = max(1, SYNC_REPS // (BLOCK - SKIP))
    for state in ("warm", "cold"):
        sync = {name: [] for name in fns}
        call = 0
        for rep in range(rounds):
            for name, fn in fns.items():
                for j in range(BLOCK):
                    call += 1
                    i = 0 if state == "warm" else call % nsets
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    fn(i)
                    torch.cuda.synchronize()
                    if j >= SKIP:
                        sync[name].append((time.perf_counter() - t0) * 1e6)
        out["sync_us"][f"{size} {state}"] = {k: statistics.median(v) for k, v in sync.items()}
    graph = {}
    for name, fn in fns.items():
        if name.startswith("seed") or name.endswith("(again)"):
            continue
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(nsets):
                fn(i)
        torch.cuda.current_stream().wait_stream(s)
        k = nsets * max(1, math.ceil(200 / nsets))
        g = torch.cuda.CUDAGraph()
        keep = []
        with torch.cuda.graph(g):
            for j in range(k):
                keep.append(fn(j % nsets))
        g.replay(); torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(20):
            e0.record(); g.replay(); e1.record(); e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3 / k)
        graph[name] = statistics.median(times)
        del g, keep
    out["graph_us"][size] = graph
    del t, fns
    torch.cuda.empty_cache()
out["sync_samples"] = rounds * (BLOCK - SKIP)
out["sync_reps"] = SYNC_REPS
out["device"] = torch.cuda.get_device_name()
out["torch"] = torch.__version__
print("RESULT " + json.dumps(out))
"""


def table(built: dict[str, dict[str, object]], timing: dict[str, object] | None) -> str:
    lines = []
    if timing:
        copy, channel = "copy_ (same bytes", "copy_ of one channel"
        host = timing["host_us"]  # type: ignore[index]
        ref = next(v for k, v in host.items() if k.startswith(copy))  # type: ignore[union-attr]
        lines += [f"{timing['device']}, torch {timing['torch']}", "",
                  f"| host time per call (64x64, no sync, median of {timing.get('host_rounds', '?')} "
                  "rounds x 2000 calls) | µs | / copy_ |",
                  "|---|---|---|"]
        for name, us in host.items():  # type: ignore[union-attr]
            lines.append(f"| {name} | {us:.2f} | {us / ref:.2f}x |")
        sync = timing["sync_us"]  # type: ignore[index]
        states = list(sync)  # type: ignore[arg-type]
        lines += ["", f"One synchronous call, median of {timing.get('sync_samples', '?')} "
                  "(throughput relative to this call: copy_ time / this time)", "",
                  "| call | " + " | ".join(f"{s} µs" for s in states) + " | "
                  + " | ".join(f"{s}: copy_/this, channel copy/this" for s in states if "4K" in s)
                  + " |", "|---" * (1 + len(states) + sum("4K" in s for s in states)) + "|"]
        for name in sync[states[0]]:  # type: ignore[index]
            cells = [f"{sync[s][name]:.1f}" for s in states]  # type: ignore[index]
            for s in states:
                if "4K" in s:
                    row = sync[s]  # type: ignore[index]
                    c = next(v for k, v in row.items() if k.startswith(copy))
                    h = next(v for k, v in row.items() if k.startswith(channel))
                    cells.append(f"{c / row[name]:.1%}, {h / row[name]:.1%}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        for what, key in (("device time per call, back to back (graph of many calls)",
                           "graph_us"),):
            per = timing[key]  # type: ignore[index]
            lines += ["", f"| {what} | 1080p µs | 4K µs | copy_/this at 4K |", "|---|---|---|---|"]
            for name in per["4K"]:  # type: ignore[index]
                a, b = per["1080p"][name], per["4K"][name]  # type: ignore[index]
                c = next(v for k, v in per["4K"].items() if k.startswith(copy))  # type: ignore
                lines.append(f"| {name} | {a:.1f} | {b:.1f} | {c / b:.1%} |")
    lines += ["", "| fatbin setting | wheel bytes | .so bytes | import img2gray ms | first call "
              "1080p ms | load (first − second) ms | build s |", "|---|---|---|---|---|---|---|"]
    for name, info in built.items():
        def f(key: str, info: dict[str, object] = info) -> str:
            v = info.get(key)
            return f"{v:.1f}" if isinstance(v, float) else str(v if v is not None else "—")
        lines.append(f"| {name} | {info['wheel_bytes']} | {info['so_bytes']} | {f('import_ms')} |"
                     f" {f('first_call_ms')} | {f('load_ms')} | {info['build_seconds']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/kw_gpu_perf"))
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="comma-separated fatbin settings to build (default: all)")
    ap.add_argument("--sync-reps", type=int, default=1000)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    # /opt/gcc (the image's CC/CXX) links libstdc++ statically: use the system gcc
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["CUDA_HOME"] = cuda_home()
    t0 = time.monotonic()
    built = build_all(args.work, args.out, env, args.settings.split(","))
    log(f"builds done in {time.monotonic() - t0:.0f} s")
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    results: dict[str, object] = {"built": built}
    timing = None
    if "default" in built:
        site = str(built["default"]["site"])
        # The kernel's smoke test and kernelwheel's exhaustive suite, copied out of the tree so
        # that no conftest of kernelwheel's own tests is loaded.
        suites = Path(tempfile.mkdtemp(prefix="img2gray-tests-"))
        shutil.copytree(KERNEL / "tests", suites / "smoke")
        shutil.copytree(REPO / "tests" / "kernel_suites" / "img2gray", suites / "suite")
        with open(args.out / "gpu_perf_pytest.log", "w") as fh:
            p = subprocess.run([sys.executable, "-m", "pytest", str(suites / "smoke"),
                                str(suites / "suite"), "-v", "-rs",
                                "-p", "no:cacheprovider"], env=dict(run_env, PYTHONPATH=site),
                               stdout=fh, stderr=subprocess.STDOUT, cwd="/tmp", timeout=300)
        tail = (args.out / "gpu_perf_pytest.log").read_text().strip().splitlines()[-1:]
        results["pytest"] = {"exit": p.returncode, "summary": tail[0] if tail else ""}
        log(f"kernel tests: exit {p.returncode}: {results['pytest']}")
        p = subprocess.run([sys.executable, "-c", TIMING, str(args.sync_reps)],
                           env=dict(run_env, PYTHONPATH=site),
                           capture_output=True, text=True, timeout=540)
        found = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if found:
            timing = json.loads(found[-1][len("RESULT "):])
            results["timing"] = timing
        else:
            log(f"timing failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    first_calls(built, args.procs, run_env)
    results["seconds"] = round(time.monotonic() - t0, 1)
    (args.out / "gpu_perf.json").write_text(json.dumps(results, indent=2))
    text = table(built, timing)
    (args.out / "gpu_perf_table.md").write_text(text)
    log(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
