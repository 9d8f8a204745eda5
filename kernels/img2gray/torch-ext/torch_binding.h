#pragma once

// torch::Tensor without the whole C++ frontend (<torch/torch.h> costs twice the compile time).
#include <torch/types.h>

// Both kernels compute, for every pixel, gray = (21*R + 72*G + 7*B) / 100 in unsigned integer
// arithmetic: the exact truncation of 0.21 R + 0.72 G + 0.07 B.
//   input:  uint8, shape (..., 3), contiguous (channel-last RGB)
//   output: uint8, shape input.shape[:-1], contiguous, on the same device; overwritten
void img2gray_cpu(torch::Tensor const& input, torch::Tensor& output);
void img2gray_cuda(torch::Tensor const& input, torch::Tensor& output);
