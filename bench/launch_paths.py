"""Host cost of the ways a custom CUDA op can check, allocate and launch (GPU only; one run).

Builds one throwaway extension with torch.utils.cpp_extension.load_inline that includes
bench/img2gray_tuned.cu (img2gray's former, tuned kernel) and puts its vectorised kernel behind several functional ops
that differ only in the host path, then times each against ``copy_`` moving the same bytes: host
time per call (64x64, no synchronisation, interleaved rounds) and one synchronous warm 4K call
(blocks of calls of one op). Every op's output is first compared with a float64 reference of
the formula on a random image.

    env -u CXX -u CC python bench/launch_paths.py [--out DIR]

Variants (all: dtype/shape checks as img2gray's, output from the caching allocator):
- chevron: img2gray's host path before issue 15's second round (CUDAGuard, contiguous(),
  at::detail::empty_cuda, <<<>>>, launch check)
- no_guard: chevron without the CUDAGuard when the image is on the current device already
- runtime_ng: no_guard with cudaLaunchKernel called directly (no push/pop of the launch config)
- kernel_ng: no_guard with cuLaunchKernel (found through cudaGetDriverEntryPointByVersion: no
  link to libcuda) on the context-independent handle from cudaGetKernel
- kernel_ng_generic: kernel_ng with the output from at::detail::empty_generic and the device's
  allocator (no second device guard inside empty_cuda): img2gray's host path until issue 21
- out: the out variant into a preallocated tensor (no allocation at all)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

KERNEL_CU = Path(__file__).resolve().parent / "img2gray_tuned.cu"

# img2gray_tuned.cu itself is included: its kernel, and (CUDA >= 12.5) its driver_launch() and
# vec_kernel_handle(); the ops below differ only in the host path around them.
SRC = r"""
#include "__KERNEL_CU__"

#include <torch/library.h>

namespace {
enum class How { Chevron, Runtime, Kernel };

void launch(const at::Tensor& in, at::Tensor& out, How how) {
  const int64_t pixels = out.numel();
  if (pixels == 0) return;
  const uint8_t* ip = in.const_data_ptr<uint8_t>();
  uint8_t* op = out.mutable_data_ptr<uint8_t>();
  TORCH_CHECK(reinterpret_cast<uintptr_t>(ip) % 16 == 0 &&
              reinterpret_cast<uintptr_t>(op) % 16 == 0);
  int64_t chunks = pixels / kChunkPixels;
  int tail = static_cast<int>(pixels % kChunkPixels);
  const unsigned blocks =
      static_cast<unsigned>(chunks == 0 ? 1 : (chunks + kThreads - 1) / kThreads);
  const uint4* a0 = reinterpret_cast<const uint4*>(ip);
  uint4* a1 = reinterpret_cast<uint4*>(op);
  const uint8_t* a3 = ip + 3 * chunks * kChunkPixels;
  uint8_t* a4 = op + chunks * kChunkPixels;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (how == How::Chevron) {
    img2gray_vec_kernel<<<blocks, kThreads, 0, stream>>>(a0, a1, chunks, a3, a4, tail);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else if (how == How::Runtime) {
    void* args[] = {&a0, &a1, &chunks, &a3, &a4, &tail};
    C10_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&img2gray_vec_kernel),
                                    dim3(blocks), dim3(kThreads), args, 0, stream));
  } else {
    void* args[] = {&a0, &a1, &chunks, &a3, &a4, &tail};
    const CUresult r = driver_launch()(vec_kernel_handle(), blocks, 1, 1, kThreads, 1, 1, 0,
                                       reinterpret_cast<CUstream>(stream), args, nullptr);
    TORCH_CHECK(r == CUDA_SUCCESS, "cuLaunchKernel failed: ", static_cast<int>(r));
  }
}

void check(const at::Tensor& input) {
  TORCH_CHECK_TYPE(input.scalar_type() == at::kByte, "uint8 expected");
  TORCH_CHECK_VALUE((input.dim() == 3 || input.dim() == 4) && input.size(-1) == 3, "(..., 3)");
}

at::Tensor run(const at::Tensor& input, How how, bool guard, bool generic_alloc) {
  check(input);
  std::optional<c10::cuda::CUDAGuard> g;
  if (guard || input.device().index() != c10::cuda::current_device()) g.emplace(input.device());
  const at::Tensor in = input.contiguous();
  const auto sizes = in.sizes().slice(0, in.dim() - 1);
  at::Tensor out = generic_alloc
      ? at::Tensor(at::detail::empty_generic(sizes, at::cuda::getCUDADeviceAllocator(),
                                             c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                             at::kByte, std::nullopt))
      : at::Tensor(at::detail::empty_cuda(sizes, at::kByte, in.device(), std::nullopt));
  launch(in, out, how);
  return out;
}

at::Tensor chevron(const at::Tensor& x) { return run(x, How::Chevron, true, false); }
at::Tensor no_guard(const at::Tensor& x) { return run(x, How::Chevron, false, false); }
at::Tensor runtime_ng(const at::Tensor& x) { return run(x, How::Runtime, false, false); }
at::Tensor kernel_ng(const at::Tensor& x) { return run(x, How::Kernel, false, false); }
at::Tensor kernel_ng_generic(const at::Tensor& x) { return run(x, How::Kernel, false, true); }
void out_variant(const at::Tensor& x, at::Tensor& y) {
  check(x);
  const c10::cuda::CUDAGuard g(x.device());
  launch(x, y, How::Chevron);
}
}  // namespace

TORCH_LIBRARY(launch_paths, m) {
  m.def("chevron(Tensor x) -> Tensor");
  m.def("no_guard(Tensor x) -> Tensor");
  m.def("runtime_ng(Tensor x) -> Tensor");
  m.def("kernel_ng(Tensor x) -> Tensor");
  m.def("kernel_ng_generic(Tensor x) -> Tensor");
  m.def("out(Tensor x, Tensor! y) -> ()");
  for (const char* name :
       {"chevron", "no_guard", "runtime_ng", "kernel_ng", "kernel_ng_generic"}) {
    m.impl(name, c10::DispatchKey::Autograd, torch::CppFunction::makeFallthrough());
  }
  m.impl("chevron", c10::DispatchKey::CUDA, &chevron);
  m.impl("no_guard", c10::DispatchKey::CUDA, &no_guard);
  m.impl("runtime_ng", c10::DispatchKey::CUDA, &runtime_ng);
  m.impl("kernel_ng", c10::DispatchKey::CUDA, &kernel_ng);
  m.impl("kernel_ng_generic", c10::DispatchKey::CUDA, &kernel_ng_generic);
  m.impl("out", c10::DispatchKey::CUDA, &out_variant);
}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("out/launch_paths"))
    ap.add_argument("--rounds", type=int, default=25)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    from torch.utils.cpp_extension import load_inline

    build = Path(os.environ.get("TMPDIR", "/tmp")) / "launch_paths"
    build.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    source = SRC.replace("__KERNEL_CU__", str(KERNEL_CU))
    load_inline(name="launch_paths_ext", cpp_sources="", cuda_sources=source,
                extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
                is_python_module=False, verbose=False,
                build_directory=str(build))
    print(f"built in {time.monotonic() - t0:.0f} s", flush=True)
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    except (AttributeError, OSError):
        pass
    ops = torch.ops.launch_paths
    names = ["chevron", "no_guard", "runtime_ng", "kernel_ng", "kernel_ng_generic"]

    def bind(op, x):
        return lambda i: op(x[i])

    def fns(x, y, src, dst):
        d = {n: bind(getattr(ops, n).default, x) for n in names}
        d["out (preallocated)"] = lambda i: ops.out.default(x[i], y[i])
        d["copy_ (same bytes)"] = lambda i: dst[i].copy_(src[i])
        d["chevron (again)"] = d["chevron"]
        d["copy_ (same bytes) (again)"] = d["copy_ (same bytes)"]
        return d

    def inputs(shape, n):
        px = shape[0] * shape[1]
        def u8(*s):
            return [torch.randint(0, 256, s, dtype=torch.uint8, device="cuda") for _ in range(n)]
        return u8(*shape), u8(*shape[:-1]), u8(2 * px), u8(2 * px)

    # the same result from every path, against a float64 reference of the formula
    x, y, src, dst = inputs((123, 257, 3), 2)
    ref = (x[0].double() @ torch.tensor([21.0, 72.0, 7.0], device="cuda", dtype=torch.float64))
    ref = torch.div(ref, 100, rounding_mode="floor").to(torch.uint8)
    for n in names:
        assert torch.equal(getattr(ops, n).default(x[0]), ref), n
    ops.out.default(x[0], y[0])
    assert torch.equal(y[0], ref)

    result: dict[str, dict[str, float]] = {"host_us": {}, "sync_4k_warm_us": {}}
    x, y, src, dst = inputs((64, 64, 3), 4)
    f = fns(x, y, src, dst)
    host = {k: [] for k in f}
    for fn in f.values():
        for i in range(300):
            fn(i & 3)
    for _ in range(args.rounds):
        for k, fn in f.items():
            torch.cuda.synchronize()
            t = time.perf_counter()
            for i in range(2000):
                fn(i & 3)
            host[k].append((time.perf_counter() - t) / 2000 * 1e6)
    torch.cuda.synchronize()
    result["host_us"] = {k: statistics.median(v) for k, v in host.items()}

    x, y, src, dst = inputs((2160, 3840, 3), 1)
    f = fns(x, y, src, dst)
    sync = {k: [] for k in f}
    for _ in range(100):
        for k, fn in f.items():
            for j in range(30):
                torch.cuda.synchronize()
                t = time.perf_counter()
                fn(0)
                torch.cuda.synchronize()
                if j >= 5:
                    sync[k].append((time.perf_counter() - t) * 1e6)
    result["sync_4k_warm_us"] = {k: statistics.median(v) for k, v in sync.items()}
    result["device"] = torch.cuda.get_device_name()
    result["torch"] = torch.__version__

    copy_h = result["host_us"]["copy_ (same bytes)"]
    copy_s = result["sync_4k_warm_us"]["copy_ (same bytes)"]
    lines = [f"{result['device']}, torch {result['torch']}", "",
             f"| host path | host µs/call (median of {args.rounds} x 2000) | / copy_ "
             "| sync 4K warm µs (median of 2500) | copy_/this |", "|---|---|---|---|---|"]
    for k in f:
        h, s = result["host_us"][k], result["sync_4k_warm_us"][k]
        lines.append(f"| {k} | {h:.2f} | {h / copy_h:.2f}x | {s:.1f} | {copy_s / s:.1%} |")
    text = "\n".join(lines) + "\n"
    (args.out / "launch_paths.json").write_text(json.dumps(result, indent=2))
    (args.out / "launch_paths.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
