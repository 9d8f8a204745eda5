// Benchmark-only img2gray kernels: the seed's naive kernel (the baseline the issue asks for) and
// the tuning experiments that led to kernels/img2gray/csrc/img2gray.cu. Compiled on the GPU
// machine by bench/direct_build.py:build_variants(); ops live in torch.ops.img2gray_bench.
//
// Every variant computes the exact integer formula (21 R + 72 G + 7 B) / 100 except
// naive_float, which is the seed's float formula kept only to count its wrong colours on the GPU.
// All ops take (input uint8 (..., 3) contiguous, output uint8 (...) contiguous) like the real op;
// the fast variants need 16-byte aligned pointers (the benchmark's tensors are).

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t gray_div(uint32_t r, uint32_t g, uint32_t b) {
  return (21u * r + 72u * g + 7u * b) / 100u;
}

__device__ __forceinline__ uint32_t gray_mul(uint32_t r, uint32_t g, uint32_t b) {
  return (r * (21u * 5243u) + g * (72u * 5243u) + b * (7u * 5243u)) >> 19;
}

// ----------------------------------------------------------------- the seed's naive kernel
// One pixel per thread, 16x16 thread blocks over (x, y), uint8 loads and stores; batches on
// grid.z. Exact formula, so only the memory access pattern differs from ours.
__global__ void naive_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, int width,
                             int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < width && y < height) {
    const int64_t idx = (static_cast<int64_t>(blockIdx.z) * height + y) * width + x;
    out[idx] = static_cast<uint8_t>(gray_div(in[3 * idx], in[3 * idx + 1], in[3 * idx + 2]));
  }
}

// The seed's float formula (nvcc contracts it to FMAs by default), same launch shape.
__global__ void naive_float_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out,
                                   int width, int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < width && y < height) {
    const int64_t idx = (static_cast<int64_t>(blockIdx.z) * height + y) * width + x;
    const float r = in[3 * idx], g = in[3 * idx + 1], b = in[3 * idx + 2];
    out[idx] = static_cast<uint8_t>(0.21f * r + 0.72f * g + 0.07f * b);
  }
}

// ----------------------------------------------------------------- flat, one pixel per thread
__global__ void flat1_kernel(const uint8_t* __restrict__ in, uint8_t* __restrict__ out,
                             int64_t pixels) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < pixels) {
    out[i] = static_cast<uint8_t>(gray_mul(in[3 * i], in[3 * i + 1], in[3 * i + 2]));
  }
}

// ----------------------------------------------------------------- 16 pixels per 48-byte chunk
__device__ __forceinline__ uint32_t byte_at(const uint32_t (&w)[12], int j) {
  return (w[j >> 2] >> (8 * (j & 3))) & 0xffu;
}

template <bool kMulShift>
__device__ __forceinline__ uint4 convert_chunk(uint4 a, uint4 b, uint4 c) {
  const uint32_t w[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y, c.z, c.w};
  uint32_t o[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t packed = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int p = 4 * q + k;
      const uint32_t r = byte_at(w, 3 * p), g = byte_at(w, 3 * p + 1), bl = byte_at(w, 3 * p + 2);
      packed |= (kMulShift ? gray_mul(r, g, bl) : gray_div(r, g, bl)) << (8 * k);
    }
    o[q] = packed;
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

__device__ __forceinline__ void tail_pixels(const uint8_t* __restrict__ in,
                                            uint8_t* __restrict__ out, int tail) {
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < tail) {
    const int i = threadIdx.x;
    out[i] = static_cast<uint8_t>(gray_mul(in[3 * i], in[3 * i + 1], in[3 * i + 2]));
  }
}

// Direct: each thread loads its own 48 contiguous bytes (three 16-byte loads at a 48-byte stride
// across the warp; the L1 merges the sectors), kUnroll chunks in flight per thread.
template <int kUnroll, bool kMulShift, bool kStreaming, int kBlock = kThreads>
__global__ void __launch_bounds__(kBlock)
    vec_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t chunks,
               const uint8_t* __restrict__ tail_in, uint8_t* __restrict__ tail_out, int tail) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * (kBlock * kUnroll) + threadIdx.x;
  uint4 v[kUnroll][3];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = first + u * kBlock;
    if (c < chunks) {
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        v[u][k] = kStreaming ? __ldcs(in + 3 * c + k) : in[3 * c + k];
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = first + u * kBlock;
    if (c < chunks) {
      const uint4 o = convert_chunk<kMulShift>(v[u][0], v[u][1], v[u][2]);
      if (kStreaming) {
        __stcs(out + c, o);
      } else {
        out[c] = o;
      }
    }
  }
  tail_pixels(tail_in, tail_out, tail);
}

// Grid-stride ("persistent") version of vec_kernel<2>: a fixed grid of a few blocks per SM.
__global__ void __launch_bounds__(kThreads)
    vec_persistent_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t chunks,
                          const uint8_t* __restrict__ tail_in, uint8_t* __restrict__ tail_out,
                          int tail) {
  constexpr int kUnroll = 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads * kUnroll;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * (kThreads * kUnroll) + threadIdx.x;
       first < chunks; first += stride) {
    uint4 v[kUnroll][3];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = first + u * kThreads;
      if (c < chunks) {
        v[u][0] = in[3 * c];
        v[u][1] = in[3 * c + 1];
        v[u][2] = in[3 * c + 2];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = first + u * kThreads;
      if (c < chunks) {
        out[c] = convert_chunk<true>(v[u][0], v[u][1], v[u][2]);
      }
    }
  }
  tail_pixels(tail_in, tail_out, tail);
}

// Staged: the block loads its 48 * 256 * kUnroll bytes with fully coalesced 16-byte loads into
// shared memory, then each thread reads its own 48 bytes back (a 48-byte stride is conflict-free
// for 16-byte shared loads: each quarter-warp touches 8 distinct groups of 4 banks).
template <int kUnroll>
__global__ void __launch_bounds__(kThreads)
    smem_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t chunks,
                const uint8_t* __restrict__ tail_in, uint8_t* __restrict__ tail_out, int tail) {
  __shared__ uint4 tile[kUnroll][3 * kThreads];
  const int64_t block_first = static_cast<int64_t>(blockIdx.x) * (kThreads * kUnroll);
  const int64_t words = 3 * chunks;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t w0 = 3 * (block_first + u * kThreads);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int64_t w = w0 + k * kThreads + threadIdx.x;
      if (w < words) {
        tile[u][k * kThreads + threadIdx.x] = in[w];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = block_first + u * kThreads + threadIdx.x;
    if (c < chunks) {
      const uint4* t = &tile[u][3 * threadIdx.x];
      out[c] = convert_chunk<true>(t[0], t[1], t[2]);
    }
  }
  tail_pixels(tail_in, tail_out, tail);
}

// ----------------------------------------------------------------- launchers
void check(at::Tensor const& input, at::Tensor const& output) {
  TORCH_CHECK(input.is_cuda() && output.is_cuda() && input.device() == output.device());
  TORCH_CHECK(input.scalar_type() == at::kByte && output.scalar_type() == at::kByte);
  TORCH_CHECK(input.is_contiguous() && output.is_contiguous());
  TORCH_CHECK(input.size(-1) == 3 && input.numel() == 3 * output.numel());
}

template <typename Kernel>
void launch_chunked(Kernel kernel, int unroll, at::Tensor const& input, at::Tensor& output,
                    bool persistent = false, int threads = kThreads) {
  check(input, output);
  const int64_t pixels = output.numel();
  if (pixels == 0) return;
  const auto* in = input.const_data_ptr<uint8_t>();
  auto* out = output.mutable_data_ptr<uint8_t>();
  TORCH_CHECK(reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0,
              "bench variant needs 16-byte aligned tensors");
  const c10::cuda::CUDAGuard guard(input.device());
  const int64_t chunks = pixels / 16;
  const int tail = static_cast<int>(pixels % 16);
  const int64_t per_block = int64_t{threads} * unroll;
  int64_t blocks = chunks == 0 ? 1 : (chunks + per_block - 1) / per_block;
  if (persistent) {
    int sms = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, input.get_device()));
    blocks = std::min<int64_t>(blocks, int64_t{sms} * 8);
  }
  kernel<<<static_cast<unsigned>(blocks), threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), chunks, in + 48 * chunks,
      out + 16 * chunks, tail);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename Kernel>
void launch_naive(Kernel kernel, at::Tensor const& input, at::Tensor& output) {
  check(input, output);
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "naive: (H, W, 3) or (N, H, W, 3)");
  if (output.numel() == 0) return;
  const int64_t n = input.dim() == 4 ? input.size(0) : 1;
  const int height = static_cast<int>(input.size(-3));
  const int width = static_cast<int>(input.size(-2));
  const c10::cuda::CUDAGuard guard(input.device());
  const dim3 block(16, 16);
  const dim3 grid((width + 15) / 16, (height + 15) / 16, static_cast<unsigned>(n));
  kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      input.const_data_ptr<uint8_t>(), output.mutable_data_ptr<uint8_t>(), width, height);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void naive(at::Tensor const& i, at::Tensor& o) { launch_naive(naive_kernel, i, o); }
void naive_float(at::Tensor const& i, at::Tensor& o) { launch_naive(naive_float_kernel, i, o); }
void flat1(at::Tensor const& input, at::Tensor& output) {
  check(input, output);
  const int64_t pixels = output.numel();
  if (pixels == 0) return;
  const c10::cuda::CUDAGuard guard(input.device());
  flat1_kernel<<<static_cast<unsigned>((pixels + kThreads - 1) / kThreads), kThreads, 0,
                 c10::cuda::getCurrentCUDAStream()>>>(input.const_data_ptr<uint8_t>(),
                                                      output.mutable_data_ptr<uint8_t>(), pixels);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
void vec1(at::Tensor const& i, at::Tensor& o) { launch_chunked(vec_kernel<1, true, false>, 1, i, o); }
void vec2(at::Tensor const& i, at::Tensor& o) { launch_chunked(vec_kernel<2, true, false>, 2, i, o); }
void vec4(at::Tensor const& i, at::Tensor& o) { launch_chunked(vec_kernel<4, true, false>, 4, i, o); }
void vec2_div(at::Tensor const& i, at::Tensor& o) {
  launch_chunked(vec_kernel<2, false, false>, 2, i, o);
}
void vec2_stream(at::Tensor const& i, at::Tensor& o) {
  launch_chunked(vec_kernel<2, true, true>, 2, i, o);
}
void vec2_persistent(at::Tensor const& i, at::Tensor& o) {
  launch_chunked(vec_persistent_kernel, 2, i, o, /*persistent=*/true);
}
void vec1_stream(at::Tensor const& i, at::Tensor& o) {
  launch_chunked(vec_kernel<1, true, true>, 1, i, o);
}
void vec1_t128(at::Tensor const& i, at::Tensor& o) {
  launch_chunked(vec_kernel<1, true, false, 128>, 1, i, o, false, 128);
}
void smem1(at::Tensor const& i, at::Tensor& o) { launch_chunked(smem_kernel<1>, 1, i, o); }
void smem2(at::Tensor const& i, at::Tensor& o) { launch_chunked(smem_kernel<2>, 2, i, o); }

}  // namespace

#define IMG2GRAY_BENCH_OP(NAME)                                \
  m.def(#NAME "(Tensor input, Tensor! output) -> ()"); \
  m.impl(#NAME, c10::DeviceType::CUDA, &NAME)

TORCH_LIBRARY(img2gray_bench, m) {
  IMG2GRAY_BENCH_OP(naive);
  IMG2GRAY_BENCH_OP(naive_float);
  IMG2GRAY_BENCH_OP(flat1);
  IMG2GRAY_BENCH_OP(vec1);
  IMG2GRAY_BENCH_OP(vec2);
  IMG2GRAY_BENCH_OP(vec4);
  IMG2GRAY_BENCH_OP(vec2_div);
  IMG2GRAY_BENCH_OP(vec2_stream);
  IMG2GRAY_BENCH_OP(vec2_persistent);
  IMG2GRAY_BENCH_OP(vec1_stream);
  IMG2GRAY_BENCH_OP(vec1_t128);
  IMG2GRAY_BENCH_OP(smem1);
  IMG2GRAY_BENCH_OP(smem2);
}
