#include "model/linear.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "util/util.h"

namespace nmt {

namespace {

// FBGEMM where present; Debian's LibTorch has oneDNN and QNNPACK.
void select_quantized_engine() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto& engines = at::globalContext().supportedQEngines();
    for (const auto engine : {at::QEngine::FBGEMM, at::QEngine::ONEDNN, at::QEngine::QNNPACK})
      if (std::find(engines.begin(), engines.end(), engine) != engines.end()) {
        at::globalContext().setQEngine(engine);
        return;
      }
  });
  if (at::globalContext().qEngine() == at::QEngine::NoQEngine)
    throw Error("int8 quantization: this LibTorch build has no quantized engine");
}

// Runs a registered operator through the boxed dispatcher: the quantized ops' packed-weight
// class has no public C++ header in this LibTorch.
c10::IValue call_op(const char* name, std::vector<c10::IValue> stack) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  op.callBoxed(&stack);
  return stack.at(0);
}

}  // namespace

c10::IValue pack_int8(const torch::Tensor& weight, const torch::Tensor& bias) {
  select_quantized_engine();
  torch::NoGradGuard no_grad;
  const auto w = weight.detach().to(torch::kFloat).contiguous();
  const auto scales = (w.abs().amax(1).clamp_min(1e-12) / 127.0).to(torch::kDouble);
  const auto zeros = torch::zeros({w.size(0)}, torch::kLong);
  const auto q = torch::quantize_per_channel(w, scales, zeros, 0, torch::kQInt8);
  return call_op("quantized::linear_prepack",
                 {q, bias.defined() ? c10::IValue(bias.detach().to(torch::kFloat).contiguous())
                                    : c10::IValue()});
}

torch::Tensor int8_linear(const torch::Tensor& x, const c10::IValue& packed) {
  const auto in = x.contiguous().view({-1, x.size(-1)});
  auto y = call_op("quantized::linear_dynamic", {in, packed, false}).toTensor();
  auto sizes = x.sizes().vec();
  sizes.back() = y.size(-1);
  return y.view(sizes);
}

LinearImpl::LinearImpl(int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", torch::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", torch::empty({out}));
  // torch::nn::Linear's default initialisation, drawing the same random numbers, so a seed gives
  // the same model as it did with torch::nn::Linear.
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  if (!quantized()) return torch::nn::functional::linear(x, weight, bias);
  if (is_training()) throw Error("int8-quantized layers are for inference only");
  return int8_linear(x, packed_);
}

void LinearImpl::quantize_int8() { packed_ = pack_int8(weight, bias); }

}  // namespace nmt
