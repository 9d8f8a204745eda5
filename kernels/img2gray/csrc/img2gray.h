// img2gray: what the CPU kernel, the CUDA kernel and the Meta kernel share.
//
// Written once here, used by csrc/img2gray_cpu.cpp, csrc/img2gray.cu and
// torch-ext/torch_binding.cpp, so every device computes the same formula and refuses the same
// arguments with the same message. Only ATen/c10 headers: the CPU file must compile with a
// CPU-only torch, and nvcc compiles this header too.
#pragma once

#include <cstdint>

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

namespace img2gray {

// gray = (21 R + 72 G + 7 B) / 100 in unsigned integer arithmetic: exactly
// floor(0.21 R + 0.72 G + 0.07 B). The largest sum is 100 * 255 = 25500, so 32 bits never
// overflow, and with no rounding step there is nothing a compiler could contract (FMA) or
// reorder: the CPU and the GPU agree bit for bit on all 2^24 colours (the tests check it).
// C10_HOST_DEVICE (__host__ __device__ under nvcc) lets the CUDA kernel call it too.
C10_HOST_DEVICE inline uint8_t gray_of(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<uint8_t>((21u * r + 72u * g + 7u * b) / 100u);
}

// The functional op's argument: a uint8 image of shape (H, W, 3) or (N, H, W, 3).
// TORCH_CHECK_TYPE / TORCH_CHECK_VALUE become TypeError / ValueError in Python. Sizes are read
// as SymInts, so the Meta kernel can run this check while torch.compile traces with symbolic
// (dynamic) shapes; on a real tensor they are plain numbers.
inline void check_image(const at::Tensor& image) {
  TORCH_CHECK_TYPE(image.scalar_type() == at::kByte, "img2gray: expected a uint8 image, got ",
                   image.scalar_type());
  TORCH_CHECK_VALUE((image.dim() == 3 || image.dim() == 4) && image.sym_size(-1) == 3,
                    "img2gray: expected shape (H, W, 3) or (N, H, W, 3) (channel-last RGB), got ",
                    image.sym_sizes());
}

// The functional op's result for a checked image: uint8, its shape without the channel
// dimension, on the image's device (on CUDA from torch's caching allocator, so the call can be
// captured in a CUDA graph; on the Meta device no memory at all).
inline at::Tensor empty_gray(const at::Tensor& image) {
  const c10::SymIntArrayRef sizes = image.sym_sizes();
  return at::empty_symint(sizes.slice(0, sizes.size() - 1), image.options());
}

// The out variant's arguments, img2gray.out(input, output): an RGB input of shape (..., 3) and
// the output it overwrites, of shape (...). The kernels index both as flat arrays, so both must
// be contiguous, and must not overlap. Plain TORCH_CHECK: RuntimeError in Python.
inline void check_out(const at::Tensor& input, const at::Tensor& output) {
  TORCH_CHECK(input.scalar_type() == at::kByte, "img2gray: input must be uint8, got ",
              input.scalar_type());
  TORCH_CHECK(output.scalar_type() == at::kByte, "img2gray: output must be uint8, got ",
              output.scalar_type());
  TORCH_CHECK(input.dim() >= 1 && input.size(-1) == 3,
              "img2gray: input must be channel-last RGB with shape (..., 3), got ", input.sizes());
  TORCH_CHECK(output.sizes() == input.sizes().slice(0, input.dim() - 1),
              "img2gray: output shape must be ", input.sizes().slice(0, input.dim() - 1), ", got ",
              output.sizes());
  TORCH_CHECK(input.device() == output.device(),
              "img2gray: input and output must be on the same device, got ", input.device(),
              " and ", output.device());
  TORCH_CHECK(input.is_contiguous() && output.is_contiguous(),
              "img2gray: input and output must be contiguous (call .contiguous() first)");
  at::assert_no_overlap(output, input);
}

}  // namespace img2gray
