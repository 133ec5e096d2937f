#include "model/compat.h"

#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdio>

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#ifdef NMT_WITH_CUDA_KERNELS
// model/kernels.cu
namespace nmt::cuda_kernels {
cudaError_t hashed_dropout(int dtype, const void* in, void* out, int64_t n, uint64_t key,
                           uint32_t threshold, float scale, bool relu, cudaStream_t stream);
cudaError_t relu_dropout_backward(int dtype, const void* grad, const void* out, void* grad_in,
                                  int64_t n, float scale, cudaStream_t stream);
}  // namespace nmt::cuda_kernels
#endif

// LibTorch 2.4 replaced the CUDA-only autocast calls with per-device-type ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define NMT_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace nmt::compat {

AutocastState get_autocast(torch::DeviceType type) {
#ifdef NMT_AUTOCAST_BY_DEVICE_TYPE
  return {at::autocast::is_autocast_enabled(type), at::autocast::get_autocast_dtype(type)};
#else
  if (type == torch::kCUDA)
    return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
#endif
}

void set_autocast(torch::DeviceType type, const AutocastState& state) {
#ifdef NMT_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(type, state.enabled);
  at::autocast::set_autocast_dtype(type, state.dtype);
#else
  if (type == torch::kCUDA) {
    at::autocast::set_enabled(state.enabled);
    at::autocast::set_autocast_gpu_dtype(state.dtype);
  } else {
    at::autocast::set_cpu_enabled(state.enabled);
    at::autocast::set_autocast_cpu_dtype(state.dtype);
  }
#endif
}

void autocast_enter() { at::autocast::increment_nesting(); }

void autocast_exit() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

int64_t cuda_device_count() { return static_cast<int64_t>(torch::cuda::device_count()); }

std::string cuda_device_summary(int64_t index) {
#ifdef NMT_WITH_CUDA
  const auto* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s, %.1f GiB", p->name,
                static_cast<double>(p->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
#else
  (void)index;
  return "";
#endif
}

void cuda_release_cached_memory() {
#ifdef NMT_WITH_CUDA
  c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void cuda_set_memory_fraction(double fraction, int64_t index) {
#ifdef NMT_WITH_CUDA
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction,
                                                     static_cast<c10::DeviceIndex>(index));
#else
  (void)fraction;
  (void)index;
#endif
}

bool cuda_kernels_built() {
#ifdef NMT_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool cuda_kernel_dtype(torch::ScalarType dtype) {
  return dtype == torch::kFloat || dtype == torch::kBFloat16 || dtype == torch::kHalf;
}

#ifdef NMT_WITH_CUDA_KERNELS
namespace {
int kernel_dtype(torch::ScalarType dtype) {
  TORCH_CHECK(cuda_kernel_dtype(dtype), "nmt CUDA kernels: unsupported dtype ", dtype);
  return dtype == torch::kBFloat16 ? 1 : dtype == torch::kHalf ? 2 : 0;
}

void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, what, ": ", cudaGetErrorString(err));
}
}  // namespace

torch::Tensor cuda_hashed_dropout(const torch::Tensor& x, uint64_t key, uint32_t threshold,
                                  float scale, bool relu) {
  const auto in = x.contiguous();
  auto out = torch::empty_like(in, at::MemoryFormat::Contiguous);
  const c10::cuda::CUDAGuard guard(in.device());
  check_launch(cuda_kernels::hashed_dropout(kernel_dtype(in.scalar_type()), in.data_ptr(),
                                            out.data_ptr(), in.numel(), key, threshold, scale, relu,
                                            at::cuda::getCurrentCUDAStream().stream()),
               "hashed dropout kernel");
  return out;
}

torch::Tensor cuda_relu_dropout_backward(const torch::Tensor& grad, const torch::Tensor& out,
                                         float scale) {
  const auto g = grad.contiguous(), y = out.contiguous();
  auto grad_in = torch::empty_like(g, at::MemoryFormat::Contiguous);
  const c10::cuda::CUDAGuard guard(g.device());
  check_launch(cuda_kernels::relu_dropout_backward(
                   kernel_dtype(g.scalar_type()), g.data_ptr(), y.data_ptr(), grad_in.data_ptr(),
                   g.numel(), scale, at::cuda::getCurrentCUDAStream().stream()),
               "relu dropout backward kernel");
  return grad_in;
}
#else
torch::Tensor cuda_hashed_dropout(const torch::Tensor&, uint64_t, uint32_t, float, bool) {
  TORCH_CHECK(false, "this build has no nmt CUDA kernels");
}

torch::Tensor cuda_relu_dropout_backward(const torch::Tensor&, const torch::Tensor&, float) {
  TORCH_CHECK(false, "this build has no nmt CUDA kernels");
}
#endif

}  // namespace nmt::compat
