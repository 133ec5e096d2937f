// Dynamic int8 quantization of a linear product, for inference.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nmt {

// Packs weight [out, in] and an optional bias for int8_linear. Each output row gets a symmetric
// int8 scale (max |w| / 127). Selects LibTorch's quantized engine first; throws Error when this
// build has none.
c10::IValue pack_int8(const torch::Tensor& weight, const torch::Tensor& bias);

// x W^T + b with W from pack_int8: x is quantized to 8 bits per call (dynamic quantization), or
// to 7 where int8_reduced_range(), and the product accumulates in int32. x [..., in], float.
torch::Tensor int8_linear(const torch::Tensor& x, const c10::IValue& packed);

// Whether int8_linear quantizes activations to 7 bits: on x86 CPUs without AVX-512 VNNI, whose
// int8 kernels saturate 16-bit sums of products.
bool int8_reduced_range();

// A model's output layer x W^T (no bias), W its tied embedding or its own matrix, in float or,
// after quantize(), in int8 (inference only).
class OutputProjection {
 public:
  // Refuses to run quantized while training.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& weight, bool training) const;
  // Packs `weight` once; refuses one on CUDA.
  void quantize(const torch::Tensor& weight);

 private:
  c10::IValue packed_;
};

}  // namespace nmt
