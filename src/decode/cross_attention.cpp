#include "decode/cross_attention.h"

#include <algorithm>

#include "data/tensors.h"
#include "text/spm.h"

namespace nmt {

namespace {

// One decoder layer's cross-attention (mean over heads, or head `head` when >= 0) while the
// decoder is fed each row's target prefix, in one batched pass: [rows, T, S] on the CPU, the
// weights the search saw.
torch::Tensor forced_attention(Scorer& scorer, const std::vector<std::vector<int64_t>>& src_rows,
                               const std::vector<std::vector<int64_t>>& tgt_in, int64_t layer,
                               int64_t head) {
  const torch::Device device = scorer.device();
  const auto all = scorer.attention(pad_sequences(src_rows, kPadId).to(device),
                                    pad_sequences(tgt_in, kPadId).to(device));
  const auto& w = all[static_cast<size_t>(layer)];  // [rows, heads, T, S]
  return (head < 0 ? w.mean(1) : w.select(1, head)).to(torch::kCPU, torch::kFloat).contiguous();
}

// BOS and the tokens that feed the decoder until it has predicted the last of `tokens`, and
// EOS when `with_eos`.
std::vector<int64_t> decoder_input(const std::vector<int>& tokens, bool with_eos) {
  std::vector<int64_t> row{kBosId};
  row.insert(row.end(), tokens.begin(), tokens.end());
  if (!with_eos && !tokens.empty()) row.pop_back();
  return row;
}

// The columns of a source row that hold the line's pieces: not the tag, EOS or padding.
std::pair<size_t, size_t> piece_columns(const std::vector<int64_t>& src_row, int64_t tag_id) {
  const size_t begin = tag_id >= 0 ? 1 : 0;
  return {begin, src_row.size() - 1};  // the row ends with EOS
}

// One hypothesis' word alignment from its piece attention [T][S columns].
WordAlignment word_alignment_of(const std::vector<std::vector<float>>& attention,
                                const std::vector<std::string>& source_pieces,
                                const std::vector<std::string>& target_pieces,
                                const std::string& source_line, const std::string& hypothesis) {
  WordAlignment a{words_of(source_line), words_of(hypothesis), {}};
  const auto S = static_cast<int64_t>(a.source.size()), T = static_cast<int64_t>(a.target.size());
  if (S > 0 && T > 0)
    a.weights = word_alignment(attention, piece_words(target_pieces, T), T,
                               piece_words(source_pieces, S), S);
  return a;
}

}  // namespace

// Cross-attention of each row's best hypothesis (--attention-out).
void attach_attention(Scorer& scorer, const Vocabs& vocabs,
                      const std::vector<std::vector<int64_t>>& src_rows,
                      const std::vector<const Hypothesis*>& best, const TranslateOptions& o,
                      std::vector<Translation*>& results) {
  torch::InferenceMode guard;
  const int64_t layer = o.attention_layer < 0 ? scorer.attention_layers() - 1 : o.attention_layer;
  std::vector<std::vector<int64_t>> tgt_in;
  for (const auto* h : best) tgt_in.push_back(decoder_input(h->tokens, h->ended));
  const auto w = forced_attention(scorer, src_rows, tgt_in, layer, o.attention_head);
  const auto acc = w.accessor<float, 3>();
  for (size_t i = 0; i < best.size(); ++i) {
    AttentionMap map;
    map.layer = layer;
    map.head = o.attention_head;
    map.num_heads = scorer.attention_heads();
    for (const auto id : src_rows[i]) map.source.push_back(vocabs.src.piece(static_cast<int>(id)));
    for (const int id : best[i]->tokens) map.target.push_back(vocabs.tgt.piece(id));
    if (best[i]->ended) map.target.push_back(vocabs.tgt.piece(kEosId));
    for (size_t t = 0; t < map.target.size(); ++t) {
      std::vector<float> row;
      for (size_t s = 0; s < map.source.size(); ++s)
        row.push_back(
            acc[static_cast<int64_t>(i)][static_cast<int64_t>(t)][static_cast<int64_t>(s)]);
      map.weights.push_back(std::move(row));
    }
    results[i]->attention = std::move(map);
  }
}

// Every hypothesis' word alignment, from one teacher-forced pass over all of them: the layer's
// cross-attention, mean over heads, at the step that predicted each piece.
void attach_alignments(Scorer& scorer, const Vocabs& vocabs,
                       const std::vector<std::vector<int64_t>>& src_rows,
                       const std::vector<std::string>& source_lines,
                       const std::vector<std::vector<Hypothesis>>& hyps, const TranslateOptions& o,
                       std::vector<Translation*>& results) {
  torch::InferenceMode guard;
  const int64_t layers = scorer.attention_layers();
  const int64_t layer =
      o.alignment_layer >= 0 ? o.alignment_layer : std::max<int64_t>(layers - 2, 0);
  std::vector<std::vector<int64_t>> src, tgt_in;
  std::vector<std::pair<size_t, size_t>> which;  // (sentence, hypothesis) of each row
  for (size_t i = 0; i < hyps.size(); ++i)
    for (size_t j = 0; j < hyps[i].size(); ++j) {
      if (hyps[i][j].tokens.empty()) continue;
      src.push_back(src_rows[i]);
      tgt_in.push_back(decoder_input(hyps[i][j].tokens, false));
      which.emplace_back(i, j);
    }
  for (size_t i = 0; i < hyps.size(); ++i)
    results[i]->alignments.assign(results[i]->texts.size(), {});
  if (which.empty()) return;
  const auto w = forced_attention(scorer, src, tgt_in, layer, -1);
  const auto acc = w.accessor<float, 3>();  // [rows, T, S]
  for (size_t r = 0; r < which.size(); ++r) {
    const auto [i, j] = which[r];
    const auto [c0, c1] = piece_columns(src_rows[i], o.tag_id);
    std::vector<std::string> source_pieces, target_pieces;
    for (size_t c = c0; c < c1; ++c)
      source_pieces.push_back(vocabs.src.piece(static_cast<int>(src_rows[i][c])));
    for (const int id : hyps[i][j].tokens) target_pieces.push_back(vocabs.tgt.piece(id));
    std::vector<std::vector<float>> attention;
    for (size_t t = 0; t < target_pieces.size(); ++t) {
      attention.emplace_back();
      for (size_t c = c0; c < c1; ++c)
        attention.back().push_back(
            acc[static_cast<int64_t>(r)][static_cast<int64_t>(t)][static_cast<int64_t>(c)]);
    }
    results[i]->alignments[j] = word_alignment_of(attention, source_pieces, target_pieces,
                                                  source_lines[i], results[i]->texts[j]);
  }
  // As the texts: a search that gave fewer hypotheses than nbest repeats its last.
  for (size_t i = 0; i < hyps.size(); ++i)
    for (size_t j = hyps[i].size(); j < results[i]->alignments.size() && j > 0; ++j)
      results[i]->alignments[j] = results[i]->alignments[j - 1];
}

}  // namespace nmt
