#pragma once

// torch::Tensor without the whole C++ frontend (<torch/torch.h> costs twice the compile time).
#include <torch/types.h>

// Functional op, img2gray(Tensor input) -> Tensor: checks the image (uint8, (H, W, 3) or
// (N, H, W, 3)), makes it contiguous if it is not, and returns a new (H, W) / (N, H, W) uint8
// tensor on the same device.
torch::Tensor img2gray_cpu(const torch::Tensor& input);
torch::Tensor img2gray_cuda(const torch::Tensor& input);

// Out variant, img2gray.out(Tensor input, Tensor! output) -> (): writes into a preallocated
// output. input (..., 3) and output (...), both uint8, contiguous, on one device.
void img2gray_out_cpu(const torch::Tensor& input, torch::Tensor& output);
void img2gray_out_cuda(const torch::Tensor& input, torch::Tensor& output);
