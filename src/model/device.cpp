#include "model/device.h"

#include <spdlog/spdlog.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>

#include <mutex>

#include "config/config.h"
#include "model/compat.h"
#include "model/linear.h"
#include "util/blas.h"
#include "util/util.h"

namespace nmt {

torch::Device resolve_device(const std::string& name, const std::string& what) {
  const int64_t gpus = compat::cuda_device_count();
  if (name == "auto") return gpus > 0 ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::kCPU;
  if (!is_device_name(name))
    throw Error(what + ": unknown device \"" + name + "\" (auto, cpu, cuda or cuda:N)");
  const int64_t index = name.size() > 4 ? std::stoll(name.substr(5)) : 0;
  if (!torch::cuda::is_available())
    throw Error(what + " " + name +
                ": no CUDA device is available (this LibTorch was built without CUDA, or no "
                "GPU is visible); use cpu or auto");
  if (index >= gpus)
    throw Error(what + " " + name + ": there " +
                (gpus == 1 ? "is 1 CUDA device" : "are " + std::to_string(gpus) + " CUDA devices") +
                " (cuda:0 to cuda:" + std::to_string(gpus - 1) + ")");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string describe_device(const torch::Device& device) {
  if (!device.is_cuda()) return device.str();
  const std::string summary = compat::cuda_device_summary(device.index());
  return summary.empty() ? device.str() : device.str() + " (" + summary + ")";
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

void release_cached_memory(const torch::Device& device) {
  if (device.is_cuda()) compat::cuda_release_cached_memory();
}

namespace {
// The default generator of a device, locked while it is read or written.
template <class Fn>
void with_cuda_generator(int64_t index, Fn&& fn) {
  auto gen = at::globalContext().defaultGenerator(
      torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index)));
  std::lock_guard<std::mutex> lock(gen.mutex());
  fn(gen);
}
}  // namespace

torch::Tensor cpu_generator_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_generator_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::vector<torch::Tensor> cuda_generator_states() {
  std::vector<torch::Tensor> states;
  for (int64_t i = 0; i < compat::cuda_device_count(); ++i)
    with_cuda_generator(i, [&](at::Generator& gen) { states.push_back(gen.get_state()); });
  return states;
}

void set_cuda_generator_states(const std::vector<torch::Tensor>& states) {
  const auto n =
      std::min<int64_t>(static_cast<int64_t>(states.size()), compat::cuda_device_count());
  for (int64_t i = 0; i < n; ++i)
    with_cuda_generator(i, [&](at::Generator& gen) { gen.set_state(states[i]); });
}

Precision resolve_precision(PrecisionSetting setting, const torch::Device& device,
                            const std::string& what) {
  if (setting == PrecisionSetting::kAuto)
    return device.is_cpu() && have_bf16_gemm() ? Precision::kBf16 : Precision::kFp32;
  if (setting == PrecisionSetting::kFp16 && !device.is_cuda())
    throw Error(what + " fp16 runs on CUDA only (autocast); on " + device.str() +
                " use fp32 or bf16");
  if (setting == PrecisionSetting::kBf16 && device.is_cpu() && !have_bf16_gemm())
    throw Error(what + " bf16 on the CPU multiplies in bfloat16, but " + bf16_gemm_missing() +
                "; use fp32");
  return setting == PrecisionSetting::kBf16   ? Precision::kBf16
         : setting == PrecisionSetting::kFp16 ? Precision::kFp16
                                              : Precision::kFp32;
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    default:
      return "fp32";
  }
}

std::string describe_precision(PrecisionSetting setting, Precision precision,
                               const torch::Device& device) {
  const std::string chosen = precision_name(precision);
  if (setting != PrecisionSetting::kAuto) return chosen;
  if (!device.is_cpu()) return chosen + " (auto: float32 on CUDA)";
  if (precision == Precision::kBf16) return chosen + " (auto: this CPU multiplies bfloat16)";
  return chosen + " (auto: " + bf16_gemm_missing() + ")";
}

void log_device_and_precision(const std::string& prefix, const torch::Device& device,
                              PrecisionSetting setting, Precision precision) {
  spdlog::info("{}device {}, precision {}", prefix, describe_device(device),
               describe_precision(setting, precision, device));
  if (device.is_cpu())
    spdlog::info("GEMM backend: {}", gemm_backend_description(precision == Precision::kBf16));
}

AutocastGuard::AutocastGuard(const torch::Device& device, Precision precision) {
  if (precision == Precision::kFp32) return;
  if (device.is_cpu()) {  // resolve_precision let only bf16 through
    cpu_bf16_ = std::make_unique<Bf16ProductsGuard>();
    return;
  }
  active_ = true;
  type_ = device.type();
  const auto previous = compat::get_autocast(type_);
  previous_enabled_ = previous.enabled;
  previous_dtype_ = previous.dtype;
  compat::set_autocast(type_,
                       {true, precision == Precision::kBf16 ? torch::kBFloat16 : torch::kHalf});
  compat::autocast_enter();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  compat::autocast_exit();
  compat::set_autocast(type_, {previous_enabled_, previous_dtype_});
}

}  // namespace nmt
