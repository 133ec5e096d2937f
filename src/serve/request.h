// A POST /translate body, read and checked in one place: every field's type and range, unknown
// fields refused, each error an HttpError naming the field (400) or the limit (413). The search
// options stay as asked; the command resolves them with translate's own code.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace nmt {

// An error answered with `status` and {"error": message}.
struct HttpError : std::runtime_error {
  HttpError(int status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  int status;
};

struct RequestLimits {
  int64_t max_texts = 1000;        // strings in "text" (413 beyond)
  int64_t max_text_chars = 10000;  // code points in one string (413 beyond)
};

// What a request asks for. Optional fields left out take the server's (the checkpoint's) values.
struct TranslateRequest {
  std::string model;               // "" : the one model loaded
  std::vector<std::string> texts;  // "text": a string or a list of strings
  std::string format = "lines";    // lines | text | html
  std::optional<int64_t> beam;
  std::optional<double> length_penalty;
  // Per text: target phrases each translation must contain / must not contain ("constraints",
  // "avoid": a list of phrases for every text, or a list of such lists, one per text).
  std::vector<std::vector<std::string>> constraints, avoid;
  std::string alignment;  // "" (none), hard or soft ("alignment": true is hard)
  bool scores = false;
  // "sampling": {"temperature", "top_k", "top_p", "seed"}; present: sample instead of beam.
  bool sampling = false;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k, seed;
};

// Parses and checks a body. Throws HttpError: 400 for malformed JSON, a wrong type or value, or
// an unknown field (naming it), 413 for a limit passed.
TranslateRequest parse_translate_request(const std::string& body, const RequestLimits& limits);

}  // namespace nmt
