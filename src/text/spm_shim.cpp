// The only translation unit that touches SentencePiece. It is built as libnmt_spm.so and opened
// with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): SentencePiece's private protobuf then binds inside this
// object's scope and never meets LibTorch's protobuf. Only a C ABI crosses the boundary, and no
// exception escapes it.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <string_view>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#define NMT_SPM_API extern "C" __attribute__((visibility("default")))

// SentencePiece's sampling draws from this thread's generator (util.h, not installed); seeding it
// before each draw makes a sampled segmentation a function of the caller's key.
namespace sentencepiece::random {
std::mt19937* GetRandomGenerator();
}  // namespace sentencepiece::random

namespace {
thread_local std::string g_error;

int fail(const std::string& message) {
  g_error = message;
  return -1;
}

char* copy_out(const std::string& s, size_t* len) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  *len = s.size();
  return out;
}
// Ids into a malloc'ed buffer the caller frees with nmt_spm_free_buffer; 0, or -1 on failure.
int copy_ids(const std::vector<int>& out, int** ids, size_t* n) {
  *n = out.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.empty() ? 1 : out.size())));
  if (*ids == nullptr) return fail("out of memory");
  if (!out.empty()) std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  return 0;
}
}  // namespace

NMT_SPM_API const char* nmt_spm_last_error() { return g_error.c_str(); }

NMT_SPM_API void nmt_spm_free_buffer(void* p) { std::free(p); }

NMT_SPM_API void* nmt_spm_load(const char* data, size_t len) {
  try {
    auto* sp = new sentencepiece::SentencePieceProcessor();
    const auto status = sp->LoadFromSerializedProto(std::string(data, len));
    if (!status.ok()) {
      delete sp;
      fail(status.ToString());
      return nullptr;
    }
    return sp;
  } catch (const std::exception& e) {
    fail(e.what());
    return nullptr;
  }
}

NMT_SPM_API void nmt_spm_free(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

NMT_SPM_API int nmt_spm_piece_size(const void* handle) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

// which: 0 pad, 1 unk, 2 bos, 3 eos.
NMT_SPM_API int nmt_spm_special_id(const void* handle, int which) {
  const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(handle);
  switch (which) {
    case 0:
      return sp->pad_id();
    case 1:
      return sp->unk_id();
    case 2:
      return sp->bos_id();
    case 3:
      return sp->eos_id();
    default:
      return -1;
  }
}

NMT_SPM_API int nmt_spm_encode(const void* handle, const char* text, size_t len, int** ids,
                               size_t* n) {
  try {
    const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(handle);
    std::vector<int> out;
    const auto status = sp->Encode(absl::string_view(text, len), &out);
    if (!status.ok()) return fail(status.ToString());
    return copy_ids(out, ids, n);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

// A segmentation drawn with SampleEncode (unigram: among the nbest_size best, -1 = all, with
// smoothing alpha; BPE: merges dropped with probability alpha), from a generator seeded with seed.
NMT_SPM_API int nmt_spm_sample_encode(const void* handle, const char* text, size_t len,
                                      int nbest_size, float alpha, uint32_t seed, int** ids,
                                      size_t* n) {
  try {
    const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(handle);
    sentencepiece::random::GetRandomGenerator()->seed(seed);
    std::vector<int> out;
    const auto status = sp->SampleEncode(absl::string_view(text, len), nbest_size, alpha, &out);
    if (!status.ok()) return fail(status.ToString());
    return copy_ids(out, ids, n);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

NMT_SPM_API int nmt_spm_decode(const void* handle, const int* ids, size_t n, char** text,
                               size_t* len) {
  try {
    const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(handle);
    std::string out;
    const auto status = sp->Decode(std::vector<int>(ids, ids + n), &out);
    if (!status.ok()) return fail(status.ToString());
    *text = copy_out(out, len);
    return *text == nullptr ? fail("out of memory") : 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

NMT_SPM_API int nmt_spm_id_to_piece(const void* handle, int id, char** text, size_t* len) {
  try {
    const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(handle);
    if (id < 0 || id >= sp->GetPieceSize()) return fail("piece id out of range");
    *text = copy_out(sp->IdToPiece(id), len);
    return *text == nullptr ? fail("out of memory") : 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

// The piece's id (unk_id for a piece the model lacks), or -1 on failure.
NMT_SPM_API int nmt_spm_piece_to_id(const void* handle, const char* piece, size_t len) {
  try {
    const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(handle);
    return sp->PieceToId(absl::string_view(piece, len));
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

namespace {
// The training sentences from one '\n'-separated buffer, so nothing goes through a file. The
// buffer is the caller's, alive for the whole call: no copy of the sample is made here.
class TextIterator : public sentencepiece::SentenceIterator {
 public:
  TextIterator(const char* text, size_t len) : text_(text, len) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    if (pos_ >= text_.size()) {
      done_ = true;
      return;
    }
    size_t end = text_.find('\n', pos_);
    if (end == std::string::npos) end = text_.size();
    value_.assign(text_.data() + pos_, end - pos_);
    pos_ = end + 1;
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::string_view text_;
  std::string value_;
  size_t pos_ = 0;
  bool done_ = false;
};
}  // namespace

// options: "key=value" lines, SentencePiece trainer flags without "--"; text: the sentences, one
// a line. The model comes back serialized in *model: SentencePiece writes no file.
// (The map form of Train, unlike the flag-string form, does not echo the command to stderr.)
NMT_SPM_API int nmt_spm_train(const char* options, const char* text, size_t text_len, char** model,
                              size_t* model_len) {
  try {
    std::unordered_map<std::string, std::string> kwargs;
    const std::string flags(options);
    size_t start = 0;
    while (start < flags.size()) {
      size_t end = flags.find('\n', start);
      if (end == std::string::npos) end = flags.size();
      const std::string line = flags.substr(start, end - start);
      const size_t eq = line.find('=');
      if (eq == std::string::npos) return fail("bad trainer option: " + line);
      kwargs[line.substr(0, eq)] = line.substr(eq + 1);
      start = end + 1;
    }
    TextIterator sentences(text, text_len);
    std::string serialized;
    const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &sentences, &serialized);
    if (!status.ok()) return fail(status.ToString());
    *model = copy_out(serialized, model_len);
    return *model == nullptr ? fail("out of memory") : 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
