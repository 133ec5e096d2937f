// Where and in what precision a model runs: device names from configs and flags, CUDA autocast
// for mixed precision, and the CUDA random generators that checkpoints save.
#pragma once

#include <torch/torch.h>

#include "config/config.h"

#include <memory>
#include <string>
#include <vector>

namespace nmt {

// "auto" (CUDA when this build and machine have a usable GPU, else the CPU), "cpu", "cuda" or
// "cuda:N". Throws Error naming `what` (the key or flag) when the device is not there.
torch::Device resolve_device(const std::string& name, const std::string& what);

// "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)".
std::string describe_device(const torch::Device& device);

// Waits until the device has run what was queued on it (for host-side timings).
void synchronize(const torch::Device& device);

// Gives cached CUDA memory back to the device, after an out-of-memory error. No-op on the CPU.
void release_cached_memory(const torch::Device& device);

// The default CPU generator's state (dropout keys are drawn from it on every device), and its
// restoration.
torch::Tensor cpu_generator_state();
void set_cpu_generator_state(const torch::Tensor& state);

// The default CUDA generator of every visible device, in device order; empty without CUDA.
std::vector<torch::Tensor> cuda_generator_states();
// Restores as many of them as there are devices now.
void set_cuda_generator_states(const std::vector<torch::Tensor>& states);

enum class Precision {
  kFp32,  // everything in float32
  kBf16,  // CUDA autocast to bfloat16; on the CPU, the linear layers' products in bfloat16
  kFp16,  // CUDA autocast to float16 (training adds dynamic loss scaling)
};

// The precision `setting` (train.precision, --precision) comes to on `device`; throws Error
// naming `what` for fp16 off CUDA and for bf16 on a CPU without native bfloat16 products
// (util/blas.h's have_bf16_gemm). auto is bf16 on a CPU with them and fp32 elsewhere: CUDA
// included, where bf16 autocast trained and decoded slower than fp32 at the recipes' 4,096-token
// batches (docs/gpu.md).
Precision resolve_precision(PrecisionSetting setting, const torch::Device& device,
                            const std::string& what);
const char* precision_name(Precision precision);
// For the log: "bf16", or for auto what it chose and why, "bf16 (auto: ...)".
std::string describe_precision(PrecisionSetting setting, Precision precision,
                               const torch::Device& device);
// The one log line of a command's device and precision ("PREFIX" + "device cpu (2 threads),
// precision bf16 (auto: ...)") and, on the CPU, the GEMM backend's line: train and decode alike.
void log_device_and_precision(const std::string& prefix, const torch::Device& device,
                              PrecisionSetting setting, Precision precision);

class Bf16ProductsGuard;

// Autocast to the precision's dtype on CUDA for the guard's lifetime; nothing for fp32.
// Matrix products then run in the low precision, softmax, norms and losses in float32. On the CPU,
// bf16 is model/linear.h's Bf16ProductsGuard instead: ATen's CPU autocast would hand bfloat16
// activations to every op after a product.
class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, Precision precision);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  torch::DeviceType type_ = torch::kCPU;
  bool previous_enabled_ = false;
  torch::ScalarType previous_dtype_ = torch::kFloat;
  std::unique_ptr<Bf16ProductsGuard> cpu_bf16_;
};

}  // namespace nmt
