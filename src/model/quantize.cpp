#include "model/quantize.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "model/linear.h"
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
c10::IValue call_op(const c10::OperatorHandle& op, std::vector<c10::IValue> stack) {
  op.callBoxed(&stack);
  return stack.at(0);
}

// Callers keep the handle in a static: int8_linear runs at every decoding step.
c10::OperatorHandle find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

}  // namespace

c10::IValue pack_int8(const torch::Tensor& weight, const torch::Tensor& bias) {
  select_quantized_engine();
  torch::NoGradGuard no_grad;
  const auto w = weight.detach().to(torch::kFloat).contiguous();
  const auto scales = (w.abs().amax(1).clamp_min(1e-12) / 127.0).to(torch::kDouble);
  const auto zeros = torch::zeros({w.size(0)}, torch::kLong);
  const auto q = torch::quantize_per_channel(w, scales, zeros, 0, torch::kQInt8);
  static const auto prepack = find_op("quantized::linear_prepack");
  return call_op(prepack,
                 {q, bias.defined() ? c10::IValue(bias.detach().to(torch::kFloat).contiguous())
                                    : c10::IValue()});
}

bool int8_reduced_range() {
#if defined(__x86_64__) || defined(__i386__)
  // Without VNNI, x86 int8 kernels (oneDNN's and FBGEMM's) add pairs of u8 x s8 products in
  // 16 bits with saturation: 2 * 255 * 127 overflows, and outputs were off by 14 % on an AVX2
  // CPU. 7-bit activations (torch's reduce_range) keep the pairs within 2 * 127 * 127.
  static const bool reduce = __builtin_cpu_supports("avx512vnni") == 0;
  return reduce;
#else
  return false;
#endif
}

torch::Tensor int8_linear(const torch::Tensor& x, const c10::IValue& packed) {
  const auto in = x.contiguous().view({-1, x.size(-1)});
  static const auto linear = find_op("quantized::linear_dynamic");
  auto y = call_op(linear, {in, packed, int8_reduced_range()}).toTensor();
  auto sizes = x.sizes().vec();
  sizes.back() = y.size(-1);
  return y.view(sizes);
}

torch::Tensor OutputProjection::forward(const torch::Tensor& x, const torch::Tensor& weight,
                                        bool training) const {
  if (packed_.isNone()) return nmt::linear(x, weight);
  if (training) throw Error("an int8-quantized model is for inference only");
  return int8_linear(x, packed_);
}

void OutputProjection::quantize(const torch::Tensor& weight) {
  if (!weight.device().is_cpu())
    throw Error("int8 quantization runs on the CPU only; the model is on " + weight.device().str() +
                " (use --device cpu, or drop --quantize)");
  packed_ = pack_int8(weight, torch::Tensor());
}

}  // namespace nmt
