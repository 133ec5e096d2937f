// Where a Multi30k training step's time goes, by component: the model's own modules at the
// benchmark's shapes (configs/multi30k_en_de_base.json, a 4k-token batch), forward and
// forward + backward, in training mode with dropout. Prints one table row per component.
//   build/nmt_bench_components [ROWS] [WIDTH] [THREADS] [REPS]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "model/transformer.h"
#include "model/loss.h"
#include "util/util.h"

namespace {

double seconds(const std::function<void()>& f, int reps) {
  f();  // warm-up: first-touch allocations
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

void row(const char* name, double fwd, double both, double layers) {
  std::printf("| %-34s | %8.1f | %8.1f | %8.1f |\n", name, 1e3 * fwd * layers,
              1e3 * (both - fwd) * layers, 1e3 * both * layers);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 140;
  const int64_t width = argc > 2 ? std::atoll(argv[2]) : 28;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 5;
  torch::set_num_threads(threads);
  nmt::keep_freed_memory();  // as training does: no page faults on reused buffers
  torch::manual_seed(1);
  const int64_t d = 256, heads = 4, d_ff = 1024, vocab = 8000, layers = 3;
  const double p = 0.1;

  nmt::MultiHeadAttention self_attn(d, heads, p, false), cross_attn(d, heads, p, true);
  nmt::FeedForward ffn(d, d_ff, p);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({d}));
  auto out_weight = torch::randn({vocab, d}, torch::requires_grad()) * 0.05;
  out_weight = out_weight.detach().requires_grad_();
  for (auto* m : std::initializer_list<torch::nn::Module*>{self_attn.get(), cross_attn.get(),
                                                           ffn.get(), norm.get()})
    m->train();

  const auto x = torch::randn({rows, width, d}, torch::requires_grad());
  const auto memory = torch::randn({rows, width, d}, torch::requires_grad());
  const auto causal = torch::triu(torch::full({width, width}, -1e9), 1);
  const auto no_bias = torch::Tensor();
  const auto target = torch::randint(4, vocab, {rows * width});

  std::printf("shapes: %lld rows x %lld positions = %lld tokens, %d threads, %d reps\n",
              static_cast<long long>(rows), static_cast<long long>(width),
              static_cast<long long>(rows * width), threads, reps);
  std::printf("| component (ms per step, all layers) | forward | backward |    total |\n");
  std::printf("|---|---|---|---|\n");
  auto measure = [&](const char* name, const std::function<torch::Tensor()>& f, double count) {
    const double fwd = seconds(
        [&] {
          torch::NoGradGuard g;
          f();
        },
        reps);
    const double both = seconds([&] { f().sum().backward(); }, reps);
    row(name, fwd, both, count);
  };
  // The encoder's and decoder's self-attention (3 + 3 layers), the decoder's cross-attention,
  // the six FFNs, the LayerNorms (2 per encoder layer, 3 per decoder layer, pre-norm: + 2 final).
  measure(
      "self-attention (6 layers)", [&] { return self_attn(x, no_bias, causal); }, 2 * layers);
  measure(
      "cross-attention (3 layers)", [&] { return cross_attn(x, memory, no_bias); }, layers);
  measure(
      "feed-forward (6 layers)", [&] { return ffn(x); }, 2 * layers);
  measure(
      "LayerNorm (17)", [&] { return norm(x); }, 5 * layers + 2);
  measure(
      "output projection + smoothed loss",
      [&] {
        const auto logits = torch::matmul(x.reshape({-1, d}), out_weight.t());
        return nmt::label_smoothed_loss(logits, target, 0.1, 0).loss;
      },
      1);
  return 0;
}
