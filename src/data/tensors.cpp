#include "data/tensors.h"

#include "text/spm.h"

namespace nmt {

torch::Tensor pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id) {
  size_t longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, s.size());
  auto out = torch::full({static_cast<int64_t>(seqs.size()), static_cast<int64_t>(longest)}, pad_id,
                         torch::kLong);
  auto acc = out.accessor<int64_t, 2>();
  for (size_t r = 0; r < seqs.size(); ++r)
    for (size_t c = 0; c < seqs[r].size(); ++c) acc[r][c] = seqs[r][c];
  return out;
}

torch::Tensor key_padding_mask(const torch::Tensor& tokens, int64_t pad_id) {
  return tokens.eq(pad_id);
}

torch::Tensor causal_mask(int64_t length, const torch::Device& device) {
  return torch::ones({length, length}, torch::dtype(torch::kBool).device(device)).triu(1);
}

torch::Tensor mask_to_bias(const torch::Tensor& blocked, torch::ScalarType dtype) {
  return torch::zeros(blocked.sizes(), blocked.options().dtype(dtype))
      .masked_fill_(blocked, -std::numeric_limits<float>::infinity());
}

TensorBatch make_tensor_batch(const Pairs& pairs, const std::vector<int64_t>& rows) {
  std::vector<std::vector<int64_t>> src(rows.size()), tgt_in(rows.size()), tgt_out(rows.size());
  TensorBatch b;
  size_t width = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const int64_t r = rows[k];
    auto& s = src[k];
    pairs.append_src(r, s);
    s.push_back(kEosId);
    auto& ti = tgt_in[k];
    ti.push_back(kBosId);
    pairs.append_tgt(r, ti);
    auto& to = tgt_out[k];
    to.assign(ti.begin() + 1, ti.end());
    to.push_back(kEosId);
    b.src_tokens += static_cast<int64_t>(s.size());
    b.tgt_tokens += static_cast<int64_t>(to.size());
    width = std::max(width, to.size());
  }
  b.src = pad_sequences(src, kPadId);
  b.tgt_in = pad_sequences(tgt_in, kPadId);
  b.tgt_out = pad_sequences(tgt_out, kPadId);
  b.tgt_positions = torch::empty({b.tgt_tokens}, torch::kLong);
  auto* pos = b.tgt_positions.data_ptr<int64_t>();
  for (size_t r = 0; r < tgt_out.size(); ++r)
    for (size_t c = 0; c < tgt_out[r].size(); ++c)
      *pos++ = static_cast<int64_t>(r * width + c);
  return b;
}

TensorBatch to_device(const TensorBatch& batch, const torch::Device& device) {
  if (device.is_cpu()) return batch;
  auto move = [&](const torch::Tensor& t) {
    return t.pin_memory().to(device, /*non_blocking=*/true);
  };
  TensorBatch out = batch;
  out.src = move(batch.src);
  out.tgt_in = move(batch.tgt_in);
  out.tgt_out = move(batch.tgt_out);
  out.tgt_positions = move(batch.tgt_positions);
  return out;
}

}  // namespace nmt
