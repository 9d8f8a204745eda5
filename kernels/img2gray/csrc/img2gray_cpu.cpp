// img2gray, CPU kernel. It includes no CUDA header: CPU-only variants compile it with a CPU-only
// torch.

#include <ATen/Parallel.h>

#include "img2gray.h"

namespace {

// input: contiguous (..., 3) uint8; output: contiguous (...) uint8; both on the CPU.
void convert(const at::Tensor& input, at::Tensor& output) {
  const uint8_t* rgb = input.const_data_ptr<uint8_t>();
  uint8_t* gray = output.mutable_data_ptr<uint8_t>();
  // torch's thread pool, in ranges of at least 64 Ki pixels (256 KiB of memory traffic): small
  // enough to spread a 1080p frame over the cores, large enough that scheduling costs little.
  at::parallel_for(0, output.numel(), int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      gray[i] = img2gray::gray_of(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
    }
  });
}

}  // namespace

at::Tensor img2gray_cpu(const at::Tensor& input) {
  img2gray::check_image(input);
  const at::Tensor image = input.contiguous();  // no copy when it already is
  at::Tensor gray = img2gray::empty_gray(image);
  convert(image, gray);
  return gray;
}

void img2gray_out_cpu(const at::Tensor& input, at::Tensor& output) {
  img2gray::check_out(input, output);
  TORCH_CHECK(input.is_cpu(), "img2gray: tensors must be on the CPU, got ", input.device());
  convert(input, output);
}
