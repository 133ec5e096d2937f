// The few LibTorch calls that differ between the builds nmt supports (Debian's CPU LibTorch 1.13
// in CI, a current CUDA LibTorch such as pip's torch on GPU machines) or that exist only with
// CUDA. All of it is in compat.cpp, the one file compiled differently for a CUDA build.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace nmt::compat {

// Autocast of one device type: whether it is on and its low-precision dtype.
struct AutocastState {
  bool enabled = false;
  torch::ScalarType dtype = torch::kFloat;
};
AutocastState get_autocast(torch::DeviceType type);
void set_autocast(torch::DeviceType type, const AutocastState& state);
// Autocast's nesting count; leaving the outermost scope drops its cache of cast weights.
void autocast_enter();
void autocast_exit();

// CUDA devices this build and machine can use (0 for a CPU-only LibTorch).
int64_t cuda_device_count();
// "NVIDIA H100 80GB HBM3, 79.2 GiB", or "" when this build cannot tell.
std::string cuda_device_summary(int64_t index);
// Returns CUDA memory cached by LibTorch's allocator to the device (after an out-of-memory).
void cuda_release_cached_memory();
// Caps LibTorch's CUDA allocator on a device to a fraction of its memory (tests make it run out).
void cuda_set_memory_fraction(double fraction, int64_t index);

// Whether this build has nmt's own CUDA kernels (model/kernels.cu), for dtypes float32, bfloat16
// and float16.
bool cuda_kernels_built();
bool cuda_kernel_dtype(torch::ScalarType dtype);
// The hashed dropout kernel on a CUDA tensor: f(x) * (drop(i) ? 0 : scale), f the ReLU or the
// identity, drop(i) from (key, threshold) as model/dropout.cpp's CPU kernel decides it.
torch::Tensor cuda_hashed_dropout(const torch::Tensor& x, uint64_t key, uint32_t threshold,
                                  float scale, bool relu);
// grad * (out > 0 ? scale : 0): the fused ReLU + dropout's backward from its output.
torch::Tensor cuda_relu_dropout_backward(const torch::Tensor& grad, const torch::Tensor& out,
                                         float scale);

}  // namespace nmt::compat
