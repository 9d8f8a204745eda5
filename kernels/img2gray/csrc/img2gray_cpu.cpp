// img2gray, CPU implementation. No CUDA header may be included here: CPU-only variants compile
// this file alone with a CPU-only torch.
//
// gray = (21*R + 72*G + 7*B) / 100 in unsigned integer arithmetic, which is exactly
// floor(0.21 R + 0.72 G + 0.07 B) computed over the reals. The largest sum is 100 * 255 = 25500,
// so 32-bit arithmetic never overflows and no rounding step exists that a compiler could reorder.

#include <cstdint>

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace {

inline uint8_t gray_of(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<uint8_t>((21u * r + 72u * g + 7u * b) / 100u);
}

void check_args(at::Tensor const& input, at::Tensor const& output) {
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

void convert(const uint8_t* in, uint8_t* out, int64_t pixels) {
  // 64 Ki pixels (256 KiB of traffic) per task keeps the threading overhead well below the work.
  at::parallel_for(0, pixels, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = gray_of(in[3 * i], in[3 * i + 1], in[3 * i + 2]);
    }
  });
}

}  // namespace

at::Tensor img2gray_cpu(at::Tensor const& input) {
  TORCH_CHECK_TYPE(input.scalar_type() == at::kByte, "img2gray: expected a uint8 image, got ",
                   input.scalar_type());
  TORCH_CHECK_VALUE((input.dim() == 3 || input.dim() == 4) && input.size(-1) == 3,
                    "img2gray: expected shape (H, W, 3) or (N, H, W, 3) (channel-last RGB), got ",
                    input.sizes());
  const at::Tensor in = input.contiguous();  // no copy when it already is
  at::Tensor out = at::detail::empty_cpu(in.sizes().slice(0, in.dim() - 1), at::kByte);
  if (out.numel() > 0) {
    convert(in.const_data_ptr<uint8_t>(), out.mutable_data_ptr<uint8_t>(), out.numel());
  }
  return out;
}

void img2gray_out_cpu(at::Tensor const& input, at::Tensor& output) {
  check_args(input, output);
  TORCH_CHECK(input.device().is_cpu(), "img2gray_cpu: tensors must be on the CPU, got ",
              input.device());
  const int64_t pixels = output.numel();
  if (pixels == 0) {
    return;
  }
  convert(input.const_data_ptr<uint8_t>(), output.mutable_data_ptr<uint8_t>(), pixels);
}
