// Multi-head scaled dot-product attention: softmax(q k^T / sqrt(dh) + bias), dropped out, times v.
//
// Two implementations of one function. The ATen one (any device and dtype) splits the heads into
// [B, heads, T, dh] views and runs batched products, a softmax and dropout as separate ops; on the
// CPU that costs copies for the head reshapes, a single-threaded loop of one small product per
// (sentence, head) in LibTorch 1.13's bmm, and a pass over memory per op. The fused CPU kernel
// works on the projections' own layouts and does a (sentence, head) block's products, bias,
// softmax, dropout and their gradients while the block is in cache, the blocks in parallel
// (docs/performance.md, "Performance II"). The dropout mask is the one dropout() draws for the
// [B, heads, Tq, Tk] weights with the same key, so both give the same result up to rounding.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nmt {

// Heads of projections as the Linear layers produce them. Self-attention: `q` is the fused
// projection [B, T, 3 * d] (queries, keys, values side by side) and `kv` is undefined.
// Cross-attention: `q` is [B, Tq, d] and `kv` [B, Tk, 2 * d] (keys, values). d = heads * dh.
// bias: additive, broadcastable to [B, heads, Tq, Tk], not differentiated; or undefined.
// p: dropout on the weights (0: none), with the mask of `key` (see dropout_key()).
// Returns the context [B, Tq, d], heads side by side.

// The fused kernel: float CPU tensors, when fused_attention_applies(q). Differentiable in q, kv.
torch::Tensor attention_fused(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads,
                              const torch::Tensor& bias, double p, uint64_t key);

// Whether attention_fused takes these projections: a float CPU tensor and a BLAS sgemm_.
bool fused_attention_applies(const torch::Tensor& q);

// The same function from ATen ops on head views q [B, heads, Tq, dh], k, v [B, heads, Tk, dh] (any
// strides, device and floating dtype). `weights`, when given, receives the probabilities
// [B, heads, Tq, Tk] before dropout.
torch::Tensor attention_aten(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias, double p, uint64_t key,
                             torch::Tensor* weights = nullptr);

// Incremental decoding: one query per row, q [N, d] (rows may be strided), against keys and
// values stored as rows k | v of width 2d. Float CPU tensors outside autograd take a kernel that
// reads the rows in place, the rows in parallel; others the ATen form. Return [N, d].

// Self-attention's cache: row n attends to the table rows slots[n, 0..T) of kv [M, 2d]
// (int64 slots [N, T]), all of them (no mask).
torch::Tensor attention_step_gather(const torch::Tensor& q, const torch::Tensor& kv,
                                    const torch::Tensor& slots, int64_t heads);

// Cross-attention: kv [B, S, 2d] holds the memory of each group of N / B consecutive rows (a
// sentence's beams); bias [B, 1, 1, S] additive (source padding) or undefined. `weights`, when
// given, receives the probabilities [N, heads, 1, S] (the ATen form computes them).
torch::Tensor attention_step_grouped(const torch::Tensor& q, const torch::Tensor& kv,
                                     const torch::Tensor& bias, int64_t heads,
                                     torch::Tensor* weights = nullptr);

// [B, T, parts * d] projections -> `parts` head views [B, heads, T, d / heads].
std::vector<torch::Tensor> split_heads(const torch::Tensor& x, int64_t parts, int64_t heads);

}  // namespace nmt
