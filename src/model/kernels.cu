// CUDA kernels of the hashed dropout (model/dropout.h): the CPU kernel's splitmix64 mask, made and
// applied in one pass, and recomputed in backward. Plain CUDA C++ without LibTorch headers;
// model/compat.cpp calls it. Built only against a CUDA LibTorch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// util.h's splitmix64_mix.
__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float load(float v) { return v; }
__device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float load(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T store(float v);
template <>
__device__ __forceinline__ float store<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half store<__half>(float v) {
  return __float2half(v);
}

// out[i] = f(in[i]) * factor(i), f the identity or ReLU (NaN kept, as LibTorch's relu), factor 0
// or scale: element 2j is dropped when the low 32 bits of hash(key, j) are below threshold,
// element 2j + 1 by the high 32 bits. Computed in float32, rounded once to T.
template <class T, bool kRelu>
__global__ void dropout_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n,
                               uint64_t key, uint32_t threshold, float scale) {
  const int64_t pairs = (n + 1) / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < pairs;
       j += stride) {
    const uint64_t h = mix(key + static_cast<uint64_t>(j) * kGoldenGamma);
    const uint32_t bits[2] = {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t i = 2 * j + half;
      if (i >= n) break;
      float x = load(in[i]);
      if (kRelu) x = (x > 0.0f || x != x) ? x : 0.0f;
      out[i] = store<T>(x * (bits[half] < threshold ? 0.0f : scale));
    }
  }
}

// The fused ReLU + dropout's backward from its output: grad_in = grad * (out > 0 ? scale : 0).
template <class T>
__global__ void relu_dropout_backward_kernel(const T* __restrict__ grad, const T* __restrict__ out,
                                             T* __restrict__ grad_in, int64_t n, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    grad_in[i] = store<T>(load(grad[i]) * (load(out[i]) > 0.0f ? scale : 0.0f));
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

template <class T>
cudaError_t launch_dropout(const void* in, void* out, int64_t n, uint64_t key, uint32_t threshold,
                           float scale, bool relu, cudaStream_t stream) {
  const unsigned blocks = blocks_for((n + 1) / 2);
  if (relu)
    dropout_kernel<T, true><<<blocks, kThreads, 0, stream>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, key, threshold, scale);
  else
    dropout_kernel<T, false><<<blocks, kThreads, 0, stream>>>(
        static_cast<const T*>(in), static_cast<T*>(out), n, key, threshold, scale);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_relu_backward(const void* grad, const void* out, void* grad_in, int64_t n,
                                 float scale, cudaStream_t stream) {
  relu_dropout_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
      static_cast<const T*>(grad), static_cast<const T*>(out), static_cast<T*>(grad_in), n,
      scale);
  return cudaGetLastError();
}

}  // namespace

namespace nmt::cuda_kernels {

// dtype: 0 float32, 1 bfloat16, 2 float16. Returns the launch's error code.
cudaError_t hashed_dropout(int dtype, const void* in, void* out, int64_t n, uint64_t key,
                           uint32_t threshold, float scale, bool relu, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case 1:
      return launch_dropout<__nv_bfloat16>(in, out, n, key, threshold, scale, relu, stream);
    case 2:
      return launch_dropout<__half>(in, out, n, key, threshold, scale, relu, stream);
    default:
      return launch_dropout<float>(in, out, n, key, threshold, scale, relu, stream);
  }
}

cudaError_t relu_dropout_backward(int dtype, const void* grad, const void* out, void* grad_in,
                                  int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
    case 1:
      return launch_relu_backward<__nv_bfloat16>(grad, out, grad_in, n, scale, stream);
    case 2:
      return launch_relu_backward<__half>(grad, out, grad_in, n, scale, stream);
    default:
      return launch_relu_backward<float>(grad, out, grad_in, n, scale, stream);
  }
}

}  // namespace nmt::cuda_kernels
