// Dropout with a fast, stateless mask generator.
// LibTorch's CPU dropout samples its mask serially, at about 12 ns an element on this machine:
// with the Transformer's ~40 M dropped-or-kept elements per 4k-token batch, that was over half of
// the forward pass. Here the mask bit of element i is a hash of (key, i) (splitmix64), computed in
// parallel. One 64-bit key per call comes from LibTorch's default CPU generator, so masks follow
// torch::manual_seed and the generator state that checkpoints save: resume stays bit-exact, and
// the masks do not depend on the thread count.
//
// Because the mask is a function of the key, the backward pass recomputes it instead of keeping
// a float mask per element alive between forward and backward (about 70 MB a 4k-token batch).
//
// CUDA builds have the same fused kernels for CUDA tensors (model/kernels.cu). Everywhere else
// (other dtypes, a CUDA build without them) the same function comes from plain ATen ops: the
// same hash, the same bits, so a model trains alike on any device. Tests compare the ATen path
// with the CPU kernels where CI runs, and with the CUDA kernels on a GPU.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nmt {

// x with each element zeroed with probability p and the rest scaled by 1 / (1 - p); x itself
// when not training or p == 0. Gradients flow through the same mask. The key comes from
// LibTorch's default CPU generator whatever the device. Float CPU tensors use the fused kernel,
// others the ATen path.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

// dropout(relu(x), p, training), fused: one pass, and only the output is kept for backward (an
// element's gradient passes iff its output is positive), where the unfused pair keeps the ReLU
// output and the mask as well. Draws the same key as the unfused pair, so results match it.
torch::Tensor relu_dropout(const torch::Tensor& x, double p, bool training);

// The key of a dropout call, drawn from LibTorch's default CPU generator as dropout() draws it:
// for callers that apply the mask themselves (dropout_keyed, dropout_factors).
uint64_t dropout_key();

// dropout(x, p, true) with a given key: the fused kernel where one applies, else the ATen path.
torch::Tensor dropout_keyed(const torch::Tensor& x, double p, uint64_t key);

// The mask factors (0 or 1 / (1 - p)) of elements [first, first + count) of a tensor that
// dropout with `key` would mask, written to dst: for kernels that drop out inside their own
// loops (the fused attention). 0 <= p < 1.
void dropout_factors(float* dst, int64_t first, int64_t count, double p, uint64_t key);

// The float mask dropout multiplies by: 0 or 1 / (1 - p), element i decided by hash(key, i).
// 0 <= p < 1.
torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t key);

// The two implementations of dropout and relu_dropout with a given key, for tests: the fused
// kernels (float CPU tensors; float, bfloat16 and float16 CUDA tensors in a build with CUDA
// kernels) and the ATen path (any device and floating dtype).
torch::Tensor dropout_fused(const torch::Tensor& x, double p, uint64_t key);
torch::Tensor relu_dropout_fused(const torch::Tensor& x, double p, uint64_t key);
torch::Tensor dropout_aten(const torch::Tensor& x, double p, uint64_t key);
torch::Tensor relu_dropout_aten(const torch::Tensor& x, double p, uint64_t key);

// The keep decisions of hash(key, i) for `n` elements as a bool tensor [n] on `device`, from ATen
// ops (the fused kernels compute the same bits).
torch::Tensor dropout_keep(int64_t n, double p, uint64_t key, const torch::Device& device);

}  // namespace nmt
