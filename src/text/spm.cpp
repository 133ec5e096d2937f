#include "text/spm.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>

#include "util/util.h"

namespace nmt {

namespace {

// The shim's C ABI, resolved once.
struct Shim {
  std::string path;
  const char* (*last_error)();
  void (*free_buffer)(void*);
  void* (*load)(const char*, size_t);
  void (*free_model)(void*);
  int (*piece_size)(const void*);
  int (*special_id)(const void*, int);
  int (*encode)(const void*, const char*, size_t, int**, size_t*);
  int (*sample_encode)(const void*, const char*, size_t, int, float, uint32_t, int**, size_t*);
  int (*decode)(const void*, const int*, size_t, char**, size_t*);
  int (*id_to_piece)(const void*, int, char**, size_t*);
  int (*piece_to_id)(const void*, const char*, size_t);
  int (*train)(const char*, const char*, size_t, char**, size_t*);
};

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// NMT_SPM_SHIM overrides; else beside the executable, else in the build tree it came from.
std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("NMT_SPM_SHIM"); env != nullptr && *env != '\0')
    out.emplace_back(env);
  const std::string exe_dir = executable_dir();
  if (!exe_dir.empty()) {
    out.push_back(exe_dir + "/libnmt_spm.so");
    out.push_back(exe_dir + "/../lib/libnmt_spm.so");
  }
#ifdef NMT_BUILD_DIR
  out.push_back(std::string(NMT_BUILD_DIR) + "/libnmt_spm.so");
#endif
  return out;
}

template <class F>
void resolve(void* lib, const char* name, F& fn, const std::string& path) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (fn == nullptr) throw Error("SentencePiece shim " + path + " lacks symbol " + name);
}

// RTLD_DEEPBIND makes the shim's libraries see libstdc++'s and libc's own copies of their data.
// An executable built as non-PIC/PIE code may have copy-relocated that data (std::cout,
// __libc_single_threaded) into itself; the two copies would then diverge and crash. Refuse
// clearly instead.
void check_no_copy_relocations() {
  const std::pair<const char*, std::pair<const char*, const void*>> probes[] = {
      {"libstdc++.so.6", {"_ZSt4cout", static_cast<const void*>(&std::cout)}},
      {"libc.so.6", {"stderr", static_cast<const void*>(&stderr)}}};
  for (const auto& [lib_name, probe] : probes) {
    void* lib = ::dlopen(lib_name, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) continue;
    const void* original = ::dlsym(lib, probe.first);
    ::dlclose(lib);
    if (original != nullptr && original != probe.second)
      throw Error(std::string("this executable copy-relocates ") + probe.first + " from " +
                  lib_name +
                  ", which breaks the SentencePiece shim; build it with -fPIC "
                  "(see nmt_no_copy_relocations in CMakeLists.txt)");
  }
}

void* open_deep_bound(const char* path) {
  constexpr int kFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's dlopen refuses RTLD_DEEPBIND (google/sanitizers#611): a deep-bound
  // library that lacks the ASan runtime would call libc's malloc. A sanitized build links the
  // shim with the runtime (CMake's NMT_SANITIZE), so its deep scope finds ASan's malloc first:
  // call libc's own dlopen.
  using DlOpen = void* (*)(const char*, int);
  if (void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD)) {
    const auto real = reinterpret_cast<DlOpen>(::dlsym(libc, "dlopen"));
    ::dlclose(libc);
    if (real != nullptr) return real(path, kFlags);
  }
#endif
  return ::dlopen(path, kFlags);
}

const Shim& shim() {
  static std::once_flag once;
  static Shim s;
  static std::string load_error;
  std::call_once(once, [] {
    try {
      check_no_copy_relocations();
    } catch (const Error& e) {
      load_error = e.what();
      return;
    }
    std::string tried;
    for (const auto& path : candidate_paths()) {
      if (!std::filesystem::exists(path)) {
        tried += "\n  " + path + " (missing)";
        continue;
      }
      // RTLD_DEEPBIND: SentencePiece's own protobuf wins inside the shim's scope.
      void* lib = open_deep_bound(path.c_str());
      if (lib == nullptr) {
        tried += "\n  " + path + " (" + ::dlerror() + ")";
        continue;
      }
      try {
        s.path = path;
        resolve(lib, "nmt_spm_last_error", s.last_error, path);
        resolve(lib, "nmt_spm_free_buffer", s.free_buffer, path);
        resolve(lib, "nmt_spm_load", s.load, path);
        resolve(lib, "nmt_spm_free", s.free_model, path);
        resolve(lib, "nmt_spm_piece_size", s.piece_size, path);
        resolve(lib, "nmt_spm_special_id", s.special_id, path);
        resolve(lib, "nmt_spm_encode", s.encode, path);
        resolve(lib, "nmt_spm_sample_encode", s.sample_encode, path);
        resolve(lib, "nmt_spm_decode", s.decode, path);
        resolve(lib, "nmt_spm_id_to_piece", s.id_to_piece, path);
        resolve(lib, "nmt_spm_piece_to_id", s.piece_to_id, path);
        resolve(lib, "nmt_spm_train", s.train, path);
        return;
      } catch (const Error& e) {
        tried += std::string("\n  ") + e.what();
        s.path.clear();
      }
    }
    load_error = "cannot load the SentencePiece shim libnmt_spm.so; tried:" + tried +
                 "\nset NMT_SPM_SHIM to its path";
  });
  if (s.path.empty()) throw Error(load_error);
  return s;
}

std::vector<int> take_ids(int* ids, size_t n) {
  std::vector<int> out(ids, ids + n);
  shim().free_buffer(ids);
  return out;
}

std::string take_string(char* buf, size_t len) {
  std::string out(buf, len);
  shim().free_buffer(buf);
  return out;
}

}  // namespace

std::string spm_shim_path() { return shim().path; }

SentencePiece SentencePiece::from_bytes(std::string bytes, const std::string& origin) {
  const Shim& s = shim();
  void* raw = s.load(bytes.data(), bytes.size());
  if (raw == nullptr) throw Error("invalid SentencePiece model " + origin + ": " + s.last_error());
  SentencePiece sp;
  sp.handle_ = std::shared_ptr<void>(raw, [](void* h) { shim().free_model(h); });
  sp.bytes_ = std::move(bytes);
  sp.size_ = s.piece_size(raw);
  const int want[4] = {kPadId, kUnkId, kBosId, kEosId};
  const char* names[4] = {"pad", "unk", "bos", "eos"};
  for (int k = 0; k < 4; ++k) {
    if (s.special_id(raw, k) != want[k])
      throw Error("SentencePiece model " + origin + " has " + names[k] + "_id " +
                  std::to_string(s.special_id(raw, k)) + ", nmt needs " + std::to_string(want[k]) +
                  " (train it with --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)");
  }
  return sp;
}

SentencePiece SentencePiece::from_file(const std::string& path) {
  if (!file_exists(path)) throw Error("SentencePiece model not found: " + path);
  return from_bytes(read_file(path), path);
}

SentencePiece SentencePiece::train(std::string_view text, const SpmTrainOptions& o) {
  if (text.empty()) throw Error("SentencePiece training needs at least one sentence");
  std::ostringstream options;
  options << "vocab_size=" << o.vocab_size << "\nmodel_type=" << o.model_type
          << "\ncharacter_coverage=" << o.character_coverage
          << "\ninput_sentence_size=" << o.input_sentence_size
          << "\nshuffle_input_sentence=true\nhard_vocab_limit=false"
          << "\npad_id=0\nunk_id=1\nbos_id=2\neos_id=3\nminloglevel=1"
          << "\nnum_threads=" << std::max(1, o.threads);
  // Only when it differs from SentencePiece's default: an option given is stored in the model
  // file, and models trained as before keep their bytes.
  if (o.max_sentence_length != SpmTrainOptions{}.max_sentence_length)
    options << "\nmax_sentence_length=" << o.max_sentence_length;
  // Only when there are some, for the same reason; SentencePiece splits the list at commas.
  for (size_t i = 0; i < o.user_symbols.size(); ++i)
    options << (i == 0 ? "\nuser_defined_symbols=" : ",") << o.user_symbols[i];
  const Shim& s = shim();
  char* model = nullptr;
  size_t len = 0;
  if (s.train(options.str().c_str(), text.data(), text.size(), &model, &len) != 0)
    throw Error("SentencePiece training failed: " + std::string(s.last_error()));
  std::string bytes(model, len);
  s.free_buffer(model);
  return from_bytes(std::move(bytes), "the trained model");
}

std::vector<int> SentencePiece::encode(std::string_view text) const {
  int* ids = nullptr;
  size_t n = 0;
  if (shim().encode(handle_.get(), text.data(), text.size(), &ids, &n) != 0)
    throw Error("SentencePiece encode failed: " + std::string(shim().last_error()));
  return take_ids(ids, n);
}

std::vector<int> SentencePiece::sample_encode(std::string_view text, int nbest, double alpha,
                                              uint64_t seed) const {
  int* ids = nullptr;
  size_t n = 0;
  // std::mt19937 takes 32 bits: both halves of the key go into them.
  const auto seed32 = static_cast<uint32_t>(seed ^ (seed >> 32));
  if (shim().sample_encode(handle_.get(), text.data(), text.size(), nbest,
                           static_cast<float>(alpha), seed32, &ids, &n) != 0)
    throw Error("SentencePiece sampling failed: " + std::string(shim().last_error()));
  return take_ids(ids, n);
}

namespace {

// Reads a protobuf varint at p; false past `end`.
bool read_varint(const unsigned char*& p, const unsigned char* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    const unsigned char b = *p++;
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Walks the fields of one message; fn(field, wire type, varint value, bytes of a length-delimited
// field) is called for each. False when the bytes are not a message.
template <class Fn>
bool walk_fields(const unsigned char* p, const unsigned char* end, Fn&& fn) {
  while (p < end) {
    uint64_t key = 0, value = 0;
    if (!read_varint(p, end, key)) return false;
    const int wire = static_cast<int>(key & 7);
    std::string_view bytes;
    if (wire == 0) {
      if (!read_varint(p, end, value)) return false;
    } else if (wire == 1 || wire == 5) {
      const size_t size = wire == 1 ? 8 : 4;
      if (static_cast<size_t>(end - p) < size) return false;
      p += size;
    } else if (wire == 2) {
      if (!read_varint(p, end, value) || value > static_cast<uint64_t>(end - p)) return false;
      bytes = std::string_view(reinterpret_cast<const char*>(p), value);
      p += value;
    } else {
      return false;
    }
    fn(key >> 3, wire, value, bytes);
  }
  return true;
}

}  // namespace

SpmModelType spm_model_type(std::string_view model) {
  // ModelProto.trainer_spec (field 2) holds TrainerSpec.model_type (field 3): UNIGRAM = 1 (the
  // default when absent), BPE = 2, WORD = 3, CHAR = 4.
  uint64_t type = 1;
  const auto* begin = reinterpret_cast<const unsigned char*>(model.data());
  walk_fields(begin, begin + model.size(), [&](uint64_t field, int wire, uint64_t,
                                                std::string_view bytes) {
    if (field != 2 || wire != 2) return;
    const auto* spec = reinterpret_cast<const unsigned char*>(bytes.data());
    walk_fields(spec, spec + bytes.size(), [&](uint64_t f, int w, uint64_t value,
                                               std::string_view) {
      if (f == 3 && w == 0) type = value;
    });
  });
  switch (type) {
    case 2:
      return SpmModelType::kBpe;
    case 3:
      return SpmModelType::kWord;
    case 4:
      return SpmModelType::kChar;
    default:
      return SpmModelType::kUnigram;
  }
}

SpmModelType SentencePiece::model_type() const { return spm_model_type(bytes_); }

std::string SentencePiece::decode(const std::vector<int>& ids) const {
  char* text = nullptr;
  size_t len = 0;
  if (shim().decode(handle_.get(), ids.data(), ids.size(), &text, &len) != 0)
    throw Error("SentencePiece decode failed: " + std::string(shim().last_error()));
  return take_string(text, len);
}

int SentencePiece::piece_to_id(std::string_view piece) const {
  const int id = shim().piece_to_id(handle_.get(), piece.data(), piece.size());
  if (id < 0) throw Error("SentencePiece piece lookup failed: " + std::string(shim().last_error()));
  return id;
}

std::string SentencePiece::piece(int id) const {
  char* text = nullptr;
  size_t len = 0;
  if (shim().id_to_piece(handle_.get(), id, &text, &len) != 0)
    throw Error("SentencePiece piece lookup failed: " + std::string(shim().last_error()));
  return take_string(text, len);
}

}  // namespace nmt
