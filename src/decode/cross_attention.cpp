#include "decode/cross_attention.h"

#include <algorithm>

#include "data/tensors.h"
#include "decode/encode.h"
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

// A pair one model aligns: its source row (ids ending with EOS; the text's pieces at columns
// [c0, c1)), the target's pieces, and the texts whose whitespace-separated words are aligned.
struct AlignPair {
  std::vector<int64_t> src;
  size_t c0 = 0, c1 = 0;
  std::vector<int> tgt;
  std::string source_text, target_text;
};

// The decoder layer alignments read: `asked`, or -1 for the last.
int64_t alignment_layer_of(const Scorer& scorer, int64_t asked) {
  return asked >= 0 ? asked : scorer.attention_layers() - 1;
}

// Each pair's word matrix [target words][source words] from one teacher-forced pass: the layer's
// cross-attention, mean over heads, at the step that predicts each target piece (kPredict) or
// the step that takes it as input (kConsume: Shift-Att, one row later).
std::vector<std::vector<std::vector<float>>> word_matrices(Scorer& scorer, const Vocabs& vocabs,
                                                           const std::vector<AlignPair>& pairs,
                                                           int64_t layer, AlignmentStep step) {
  std::vector<std::vector<int64_t>> src, tgt_in;
  for (const auto& p : pairs) {
    src.push_back(p.src);
    tgt_in.push_back(decoder_input(p.tgt, step == AlignmentStep::kConsume));
  }
  const auto w = forced_attention(scorer, src, tgt_in, alignment_layer_of(scorer, layer), -1);
  const auto acc = w.accessor<float, 3>();  // [rows, T, S]
  const int64_t shift = step == AlignmentStep::kConsume ? 1 : 0;
  std::vector<std::vector<std::vector<float>>> out;
  for (size_t r = 0; r < pairs.size(); ++r) {
    const auto& p = pairs[r];
    std::vector<std::string> source_pieces, target_pieces;
    for (size_t c = p.c0; c < p.c1; ++c)
      source_pieces.push_back(vocabs.src.piece(static_cast<int>(p.src[c])));
    for (const int id : p.tgt) target_pieces.push_back(vocabs.tgt.piece(id));
    std::vector<std::vector<float>> attention;
    for (size_t t = 0; t < target_pieces.size(); ++t) {
      attention.emplace_back();
      for (size_t c = p.c0; c < p.c1; ++c)
        attention.back().push_back(acc[static_cast<int64_t>(r)][static_cast<int64_t>(t) + shift]
                                      [static_cast<int64_t>(c)]);
    }
    const auto S = static_cast<int64_t>(words_of(p.source_text).size());
    const auto T = static_cast<int64_t>(words_of(p.target_text).size());
    out.push_back(S > 0 && T > 0 ? word_alignment(attention, piece_words(target_pieces, T), T,
                                                  piece_words(source_pieces, S), S)
                                 : std::vector<std::vector<float>>{});
  }
  return out;
}

// The reverse model's pairs: each hypothesis as its source, the source line as its target.
std::vector<AlignPair> reverse_pairs(const Scorer& reverse, const Vocabs& vocabs,
                                     const std::vector<AlignPair>& forward) {
  std::vector<AlignPair> out;
  const int64_t max_ids = reverse.max_positions() - 1;  // room for EOS (and BOS in the decoder)
  for (const auto& f : forward) {
    AlignPair r;
    LineFixes fixes;
    r.src = encode_line(vocabs.src, f.target_text, max_ids, fixes);
    r.c1 = r.src.size();
    r.src.push_back(kEosId);
    const auto line = encode_line(vocabs.tgt, f.source_text, max_ids, fixes);
    r.tgt.assign(line.begin(), line.end());
    r.source_text = f.target_text;
    r.target_text = f.source_text;
    out.push_back(std::move(r));
  }
  return out;
}

// One hypothesis' word alignment: the forward matrix, and its hard links, symmetrized with the
// reverse matrix's [source words][target words] when there is one.
WordAlignment word_alignment_of(const AlignPair& p, std::vector<std::vector<float>> forward,
                                const std::vector<std::vector<float>>* reverse) {
  WordAlignment a{words_of(p.source_text), words_of(p.target_text), std::move(forward), {}};
  a.links = hard_alignment(a.weights);
  if (reverse && !reverse->empty() && !a.weights.empty()) {
    std::vector<std::pair<int64_t, int64_t>> other;
    for (const auto& [t, s] : hard_alignment(*reverse)) other.emplace_back(s, t);
    a.links = grow_diag_final_and(a.links, other, static_cast<int64_t>(a.source.size()),
                                  static_cast<int64_t>(a.target.size()));
  }
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

// Every hypothesis' word alignment, from one teacher-forced pass over all of them (and one of
// the reverse model when there is one).
void attach_alignments(Scorer& scorer, const Vocabs& vocabs,
                       const std::vector<std::vector<int64_t>>& src_rows,
                       const std::vector<std::string>& source_lines,
                       const std::vector<std::vector<Hypothesis>>& hyps, const TranslateOptions& o,
                       std::vector<Translation*>& results) {
  torch::InferenceMode guard;
  std::vector<AlignPair> pairs;
  std::vector<std::pair<size_t, size_t>> which;  // (sentence, hypothesis) of each pair
  for (size_t i = 0; i < hyps.size(); ++i) {
    results[i]->alignments.assign(results[i]->texts.size(), {});
    for (size_t j = 0; j < hyps[i].size(); ++j) {
      if (hyps[i][j].tokens.empty()) continue;
      const size_t c0 = o.tag_id >= 0 ? 1 : 0;  // the tag is no word of the line
      pairs.push_back({src_rows[i], c0, src_rows[i].size() - 1, hyps[i][j].tokens,
                       source_lines[i], results[i]->texts[j]});
      which.emplace_back(i, j);
    }
  }
  if (which.empty()) return;
  const auto forward = word_matrices(scorer, vocabs, pairs, o.alignment_layer, o.alignment_step);
  std::vector<std::vector<std::vector<float>>> reverse;
  if (o.reverse_scorer)
    reverse = word_matrices(*o.reverse_scorer, *o.reverse_vocabs,
                            reverse_pairs(*o.reverse_scorer, *o.reverse_vocabs, pairs),
                            o.alignment_layer, o.alignment_step);
  for (size_t r = 0; r < which.size(); ++r) {
    const auto [i, j] = which[r];
    results[i]->alignments[j] =
        word_alignment_of(pairs[r], forward[r], reverse.empty() ? nullptr : &reverse[r]);
  }
  // As the texts: a search that gave fewer hypotheses than nbest repeats its last.
  for (size_t i = 0; i < hyps.size(); ++i)
    for (size_t j = hyps[i].size(); j < results[i]->alignments.size() && j > 0; ++j)
      results[i]->alignments[j] = results[i]->alignments[j - 1];
}

}  // namespace nmt
