#pragma once

// torch::Tensor without the whole C++ frontend (<torch/torch.h> costs twice the compile time).
#include <torch/types.h>

// Both kernels compute, for every pixel, gray = (21*R + 72*G + 7*B) / 100 in unsigned integer
// arithmetic: the exact truncation of 0.21 R + 0.72 G + 0.07 B.

// Functional op, img2gray(Tensor input) -> Tensor: the public call. Validates the image (uint8,
// shape (H, W, 3) or (N, H, W, 3): TypeError / ValueError in Python), makes it contiguous if it
// is not, allocates the (H, W) / (N, H, W) uint8 output on the same device and converts, all in
// C++ (one dispatcher call from Python, no Python-side checks or torch.empty).
torch::Tensor img2gray_cpu(torch::Tensor const& input);
torch::Tensor img2gray_cuda(torch::Tensor const& input);
// The same checks and the output's shape, no data: meta tensors and torch.compile's fake tensors.
torch::Tensor img2gray_meta(torch::Tensor const& input);

// Out variant, img2gray.out(Tensor input, Tensor! output) -> () (the original op):
//   input:  uint8, shape (..., 3), contiguous (channel-last RGB)
//   output: uint8, shape input.shape[:-1], contiguous, on the same device; overwritten
void img2gray_out_cpu(torch::Tensor const& input, torch::Tensor& output);
void img2gray_out_cuda(torch::Tensor const& input, torch::Tensor& output);
