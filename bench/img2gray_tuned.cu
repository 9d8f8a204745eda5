// img2gray, the tuned CUDA implementation (bench only; the example kernels/img2gray/csrc/img2gray.cu
// is the plain one-thread-per-pixel kernel). bench/launch_paths.py compiles this file to compare
// host launch paths; it was kernels/img2gray's kernel until issue 21.
//
//
// gray = (21*R + 72*G + 7*B) / 100, unsigned integer arithmetic: the exact truncation of
// 0.21 R + 0.72 G + 0.07 B. Here the division is done as a multiply and a shift:
//   s / 100 == (s * 5243) >> 19   for every s in [0, 25500]   (25500 * 5243 < 2^32),
// and the factor 5243 is folded into the weights, so one pixel costs three multiply-adds and a
// shift. Integer arithmetic has no rounding, so FMA contraction cannot change a result; the CPU
// implementation (plain "/ 100") agrees bit for bit on all 2^24 colours (tested).
//
// The op is memory-bound (3 bytes in, 1 byte out per pixel). The tensors are treated as one flat
// run of pixels, so a batch is just a longer run and no per-pixel division is needed for indexing.
// Fast path (both pointers 16-byte aligned): each thread converts one chunk of 16 pixels: three
// independent 16-byte loads (48 bytes = 16 RGB pixels, all in flight before the first is used)
// and one 16-byte store. Across a warp the loads have a 48-byte stride; the L1 merges them, so
// every DRAM sector is fetched once. The < 16 pixels that do not fill a chunk are done one by one
// by the first threads of block 0. Measured on an H100 (docs/benchmarks.md): at or above the
// device-to-device copy's bandwidth from 1080p up; two or four chunks per thread, a grid-stride
// loop or staging through shared memory were not faster.
// Misaligned pointers (e.g. a view that starts at an odd pixel) take a plain 1-pixel-per-thread
// kernel: correct, not tuned.
//
// Host path of the public call (measured on an H100, bench/launch_paths.py: 10.4 -> 9.1 us per
// call, where a copy_ of the same bytes takes 9.3 us): no device guard when the image is on the
// current device already; the output straight from the device's allocator (empty_cuda would
// switch devices once more); and, with CUDA >= 12.5, the vectorised kernel launched with the
// driver's cuLaunchKernel on its context-independent handle (cudaGetKernel), found through the
// runtime's entry-point query, so the extension still does not link libcuda and loads on
// machines without a GPU driver. Older toolkits launch with <<<>>>.

#include <cstdint>

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda.h>

#include <optional>
#include <string>

#include "../kernels/img2gray/csrc/img2gray.h"

namespace {

constexpr int kThreads = 256;
constexpr int kChunkPixels = 16;

// (21 r + 72 g + 7 b) / 100 for r, g, b in [0, 255].
__device__ __forceinline__ uint32_t gray_of(uint32_t r, uint32_t g, uint32_t b) {
  return (r * (21u * 5243u) + g * (72u * 5243u) + b * (7u * 5243u)) >> 19;
}

// Byte j (0..47) of a 48-byte chunk held as 12 little-endian 32-bit words.
__device__ __forceinline__ uint32_t byte_at(const uint32_t (&w)[12], int j) {
  return (w[j >> 2] >> (8 * (j & 3))) & 0xffu;
}

__device__ __forceinline__ uint4 convert_chunk(uint4 a, uint4 b, uint4 c) {
  const uint32_t w[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y, c.z, c.w};
  uint32_t o[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t packed = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int p = 4 * q + k;  // pixel within the chunk; all indices are compile-time constants
      packed |= gray_of(byte_at(w, 3 * p), byte_at(w, 3 * p + 1), byte_at(w, 3 * p + 2)) << (8 * k);
    }
    o[q] = packed;
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

__global__ void __launch_bounds__(kThreads)
    img2gray_vec_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t chunks,
                        const uint8_t* __restrict__ tail_in, uint8_t* __restrict__ tail_out,
                        int tail) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c < chunks) {
    const uint4 a = in[3 * c];
    const uint4 b = in[3 * c + 1];
    const uint4 d = in[3 * c + 2];
    out[c] = convert_chunk(a, b, d);
  }
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < tail) {
    const int i = threadIdx.x;
    tail_out[i] =
        static_cast<uint8_t>(gray_of(tail_in[3 * i], tail_in[3 * i + 1], tail_in[3 * i + 2]));
  }
}

__global__ void __launch_bounds__(kThreads)
    img2gray_scalar_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out,
                           int64_t pixels) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < pixels) {
    out[i] = static_cast<uint8_t>(gray_of(in[3 * i], in[3 * i + 1], in[3 * i + 2]));
  }
}

#if CUDART_VERSION >= 12050
#define IMG2GRAY_DRIVER_LAUNCH 1
// cuLaunchKernel as the driver exports it (its signature is the same since CUDA 4.0).
using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

LaunchFn driver_launch() {
  static const LaunchFn fn = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status{};
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &found, 12000,
                                                    cudaEnableDefault, &status));
    TORCH_CHECK(status == cudaDriverEntryPointSuccess && found != nullptr,
                "img2gray: the NVIDIA driver does not provide cuLaunchKernel for CUDA 12.0 "
                "(entry-point query status ", static_cast<int>(status),
                "); update the driver to one that supports this build's CUDA version");
    return reinterpret_cast<LaunchFn>(found);
  }();
  return fn;
}

// The driver's own name and text for a launch error (cuGetErrorString, found the same way).
std::string driver_error(CUresult result) {
  using ErrorStringFn = CUresult (*)(CUresult, const char**);
  void* found = nullptr;
  cudaDriverEntryPointQueryResult status{};
  const char* text = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuGetErrorString", &found, 12000, cudaEnableDefault,
                                       &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess && found != nullptr) {
    reinterpret_cast<ErrorStringFn>(found)(result, &text);
  }
  return text != nullptr ? text : "unknown error";
}

// A context-independent handle: valid on every device, loaded (lazily) by the launch.
CUfunction vec_kernel_handle() {
  static const CUfunction handle = [] {
    cudaKernel_t kernel = nullptr;
    C10_CUDA_CHECK(cudaGetKernel(&kernel, reinterpret_cast<const void*>(&img2gray_vec_kernel)));
    return reinterpret_cast<CUfunction>(kernel);
  }();
  return handle;
}
#endif

void launch(const uint8_t* in, uint8_t* out, int64_t pixels, cudaStream_t stream) {
  const bool aligned =
      reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (aligned) {
    int64_t chunks = pixels / kChunkPixels;
    int tail = static_cast<int>(pixels % kChunkPixels);
    const int64_t blocks = chunks == 0 ? 1 : (chunks + kThreads - 1) / kThreads;
    TORCH_CHECK(blocks <= 0x7fffffff, "img2gray: image too large (", pixels, " pixels)");
    const uint4* vin = reinterpret_cast<const uint4*>(in);
    uint4* vout = reinterpret_cast<uint4*>(out);
    const uint8_t* tail_in = in + 3 * chunks * kChunkPixels;
    uint8_t* tail_out = out + chunks * kChunkPixels;
#ifdef IMG2GRAY_DRIVER_LAUNCH
    void* args[] = {&vin, &vout, &chunks, &tail_in, &tail_out, &tail};
    const CUresult result =
        driver_launch()(vec_kernel_handle(), static_cast<unsigned>(blocks), 1, 1, kThreads, 1, 1,
                        0, reinterpret_cast<CUstream>(stream), args, nullptr);
    TORCH_CHECK(result == CUDA_SUCCESS, "img2gray: kernel launch failed: ", driver_error(result),
                " (CUresult ", static_cast<int>(result), ")");
#else
    img2gray_vec_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        vin, vout, chunks, tail_in, tail_out, tail);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
#endif
  } else {
    const int64_t blocks = (pixels + kThreads - 1) / kThreads;
    TORCH_CHECK(blocks <= 0x7fffffff, "img2gray: image too large (", pixels, " pixels)");
    img2gray_scalar_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, out,
                                                                                  pixels);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace

// The public call: checks, allocation (the device's caching allocator, directly: no second
// dispatch) and the launch on the current stream, so it is captured whole by a CUDA graph.
at::Tensor img2gray_cuda(at::Tensor const& input) {
  TORCH_CHECK_TYPE(input.scalar_type() == at::kByte, "img2gray: expected a uint8 image, got ",
                   input.scalar_type());
  TORCH_CHECK_VALUE((input.dim() == 3 || input.dim() == 4) && input.size(-1) == 3,
                    "img2gray: expected shape (H, W, 3) or (N, H, W, 3) (channel-last RGB), got ",
                    input.sizes());
  // From here on the image's device is the current one (the allocator and the stream follow it).
  std::optional<c10::cuda::CUDAGuard> guard;
  if (input.device().index() != c10::cuda::current_device()) {
    guard.emplace(input.device());
  }
  const at::Tensor in = input.contiguous();  // no copy when it already is
  at::Tensor out(at::detail::empty_generic(in.sizes().slice(0, in.dim() - 1),
                                           at::cuda::getCUDADeviceAllocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                           at::kByte, std::nullopt));
  const int64_t pixels = out.numel();
  if (pixels > 0) {
    launch(in.const_data_ptr<uint8_t>(), out.mutable_data_ptr<uint8_t>(), pixels,
           c10::cuda::getCurrentCUDAStream());
  }
  return out;
}

void img2gray_out_cuda(at::Tensor const& input, at::Tensor& output) {
  img2gray::check_out(input, output);  // the example kernel's own argument checks
  TORCH_CHECK(input.is_cuda(), "img2gray_cuda: tensors must be on a CUDA device, got ",
              input.device());
  const int64_t pixels = output.numel();
  if (pixels == 0) {
    return;
  }
  const c10::cuda::CUDAGuard guard(input.device());
  launch(input.const_data_ptr<uint8_t>(), output.mutable_data_ptr<uint8_t>(), pixels,
         c10::cuda::getCurrentCUDAStream());
}
