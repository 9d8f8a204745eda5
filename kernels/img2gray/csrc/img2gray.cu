// img2gray, CUDA kernel.
//
// The op is memory-bound: per pixel it reads 3 bytes and writes 1, and the arithmetic is three
// multiply-adds. So the kernel is the plainest one: one thread per pixel, the image seen as one
// flat run of pixels (a batch is just a longer run). Consecutive threads read consecutive bytes,
// so a warp's loads and stores coalesce into whole memory transactions. Byte-wide accesses cost
// bandwidth: under CUDA graph capture on an H100 this runs at 51 % of a device-to-device copy
// (docs/benchmarks.md). The tuned version (16 pixels per thread with 16-byte loads, 103 % of
// the copy) lives in bench/img2gray_tuned.cu, to keep this one readable.

#include <climits>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "img2gray.h"

namespace {

constexpr int kThreads = 256;  // threads per block: any multiple of the warp size works

__global__ void img2gray_kernel(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ gray,
                                int64_t pixels) {
  // 64-bit index: a large batch can hold more than 2^31 pixels.
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < pixels) {
    gray[i] = img2gray::gray_of(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
  }
}

// input: contiguous (..., 3) uint8; output: contiguous (...) uint8; both on one CUDA device.
void launch(const at::Tensor& input, at::Tensor& output) {
  const int64_t pixels = output.numel();
  if (pixels == 0) {
    return;  // a grid of zero blocks would be a launch error
  }
  // Make the tensors' device the current one for this scope: the stream below is that device's.
  const c10::cuda::CUDAGuard guard(input.device());
  const int64_t blocks = (pixels + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= INT_MAX, "img2gray: image too large (", pixels, " pixels)");
  // The current stream, not the default one: the caller's stream ordering holds, and a
  // torch.cuda.graph() capture (which runs on a side stream) records the launch.
  img2gray_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                    at::cuda::getCurrentCUDAStream()>>>(input.const_data_ptr<uint8_t>(),
                                                        output.mutable_data_ptr<uint8_t>(), pixels);
  C10_CUDA_KERNEL_LAUNCH_CHECK();  // reports a bad launch configuration here, not later
}

}  // namespace

at::Tensor img2gray_cuda(const at::Tensor& input) {
  img2gray::check_image(input);
  const at::Tensor image = input.contiguous();  // no copy when it already is
  at::Tensor gray = img2gray::empty_gray(image);
  launch(image, gray);
  return gray;
}

void img2gray_out_cuda(const at::Tensor& input, at::Tensor& output) {
  img2gray::check_out(input, output);
  TORCH_CHECK(input.is_cuda(), "img2gray: tensors must be on a CUDA device, got ", input.device());
  launch(input, output);
}
