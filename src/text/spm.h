// SentencePiece behind a dlopen'ed shim (see spm_shim.cpp for why).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// Special ids every vocabulary of ours uses; SentencePiece models are trained with them.
constexpr int kPadId = 0;
constexpr int kUnkId = 1;
constexpr int kBosId = 2;
constexpr int kEosId = 3;

// A SentencePiece model's algorithm (TrainerSpec.model_type).
enum class SpmModelType { kUnigram, kBpe, kWord, kChar };

// The model type stored in a serialized model (unigram when the bytes do not say).
SpmModelType spm_model_type(std::string_view model);

struct SpmTrainOptions {
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";
  double character_coverage = 1.0;
  int64_t input_sentence_size = 2000000;
  int64_t max_sentence_length = 4192;  // bytes: SentencePiece skips longer sentences
  int threads = 1;
  // Pieces kept whole wherever they occur (SentencePiece's user_defined_symbols): corpus tags.
  std::vector<std::string> user_symbols;
};

class SentencePiece {
 public:
  SentencePiece() = default;  // empty; only from_bytes/from_file give a usable model
  // From the bytes of a .model file; throws Error if invalid or if it lacks our special ids.
  static SentencePiece from_bytes(std::string bytes, const std::string& origin = "model");
  static SentencePiece from_file(const std::string& path);
  // Trains a model with pad=0 unk=1 bos=2 eos=3 on sentences given one a line, in memory:
  // nothing is written (the caller stores bytes() where it wants them).
  static SentencePiece train(std::string_view text, const SpmTrainOptions& options);

  std::vector<int> encode(std::string_view text) const;
  // One segmentation drawn at random (subword regularization), a function of `seed`: unigram
  // models sample among the `nbest` best (-1: all) with smoothing `alpha`; BPE models drop
  // each merge with probability `alpha` (BPE-dropout; nbest is ignored).
  std::vector<int> sample_encode(std::string_view text, int nbest, double alpha,
                                 uint64_t seed) const;
  SpmModelType model_type() const;
  std::string decode(const std::vector<int>& ids) const;
  std::string piece(int id) const;
  // The id of a piece; kUnkId when the vocabulary lacks it.
  int piece_to_id(std::string_view piece) const;
  int size() const { return size_; }
  // The serialized model, to store in checkpoints.
  const std::string& bytes() const { return bytes_; }

 private:
  std::shared_ptr<void> handle_;
  std::string bytes_;
  int size_ = 0;
};

// Where the shim was loaded from (for diagnostics).
std::string spm_shim_path();

}  // namespace nmt
