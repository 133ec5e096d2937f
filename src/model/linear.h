// Linear layers that can switch to dynamic int8 quantization for inference.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nmt {

// Packs weight [out, in] and an optional bias for int8_linear. Each output row gets a symmetric
// int8 scale (max |w| / 127). Selects LibTorch's quantized engine first; throws Error when this
// build has none.
c10::IValue pack_int8(const torch::Tensor& weight, const torch::Tensor& bias);

// x W^T + b with W from pack_int8: x is quantized to 8 bits per call (dynamic quantization) and
// the product accumulates in int32. x [..., in], float.
torch::Tensor int8_linear(const torch::Tensor& x, const c10::IValue& packed);

// y = x W^T + b. The parameters are registered as "weight" and "bias" and initialised as
// torch::nn::Linear does it, so checkpoints and seeded models are the same as with it.
// quantize_int8() switches forward to int8_linear; the float parameters stay (checkpoints use
// them), and training mode then refuses to run.
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in, int64_t out, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  void quantize_int8();
  bool quantized() const { return !packed_.isNone(); }

  torch::Tensor weight, bias;  // [out, in] and [out] (undefined without bias)

 private:
  c10::IValue packed_;
};
TORCH_MODULE(Linear);

}  // namespace nmt
