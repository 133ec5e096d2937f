#include "serve/request.h"

#include <nlohmann/json.hpp>

#include "util/util.h"

namespace nmt {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw HttpError(400, "\"" + field + "\": " + what);
}

// Code points of a string (invalid bytes count one each).
int64_t chars_of(const std::string& s) {
  int64_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string string_of(const json& v, const std::string& field) {
  if (!v.is_string()) bad(field, "must be a string");
  return v.get<std::string>();
}

int64_t integer_of(const json& v, const std::string& field, int64_t min) {
  if (!v.is_number_integer()) bad(field, "must be an integer");
  const auto x = v.get<int64_t>();
  if (x < min) bad(field, "must be >= " + std::to_string(min));
  return x;
}

double number_of(const json& v, const std::string& field) {
  if (!v.is_number()) bad(field, "must be a number");
  return v.get<double>();
}

// A list of strings, each checked ("field[i]" in errors).
std::vector<std::string> strings_of(const json& v, const std::string& field) {
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(string_of(v[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

std::vector<std::string> texts_of(const json& v, const RequestLimits& limits) {
  std::vector<std::string> texts;
  if (v.is_string()) {
    texts.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (static_cast<int64_t>(v.size()) > limits.max_texts)
      throw HttpError(413, "\"text\": " + std::to_string(v.size()) + " strings, at most " +
                               std::to_string(limits.max_texts));
    texts = strings_of(v, "text");
  } else {
    bad("text", "must be a string or a list of strings");
  }
  for (size_t i = 0; i < texts.size(); ++i)
    if (chars_of(texts[i]) > limits.max_text_chars)
      throw HttpError(413, "\"text\"[" + std::to_string(i) + "]: " +
                               std::to_string(chars_of(texts[i])) + " characters, at most " +
                               std::to_string(limits.max_text_chars));
  return texts;
}

// "constraints" / "avoid": phrases for every text, or one list of phrases per text.
std::vector<std::vector<std::string>> phrases_of(const json& v, const std::string& field,
                                                 size_t texts) {
  if (!v.is_array()) bad(field, "must be a list of phrases, or a list of such lists");
  const bool per_text = !v.empty() && v[0].is_array();
  if (!per_text) return std::vector<std::vector<std::string>>(texts, strings_of(v, field));
  if (v.size() != texts)
    bad(field, std::to_string(v.size()) + " lists for " + std::to_string(texts) + " texts");
  std::vector<std::vector<std::string>> out(texts);
  for (size_t t = 0; t < texts; ++t) {
    const std::string at = field + "[" + std::to_string(t) + "]";
    if (!v[t].is_array()) bad(at, "must be a list of phrases");
    out[t] = strings_of(v[t], at);
  }
  return out;
}

void read_sampling(const json& v, TranslateRequest& r) {
  if (!v.is_object()) bad("sampling", "must be an object");
  r.sampling = true;
  for (const auto& [key, value] : v.items()) {
    const std::string field = "sampling." + key;
    if (key == "temperature")
      r.temperature = number_of(value, field);
    else if (key == "top_p")
      r.top_p = number_of(value, field);
    else if (key == "top_k")
      r.top_k = integer_of(value, field, 0);
    else if (key == "seed")
      r.seed = integer_of(value, field, 0);
    else
      bad(field, "unknown field (temperature, top_k, top_p, seed)");
  }
}

bool bool_of(const json& v, const std::string& field) {
  if (!v.is_boolean()) bad(field, "must be true or false");
  return v.get<bool>();
}

std::string alignment_of(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "hard" : "";
  const std::string a = string_of(v, "alignment");
  if (a != "hard" && a != "soft") bad("alignment", "must be true, false, \"hard\" or \"soft\"");
  return a;
}

}  // namespace

TranslateRequest parse_translate_request(const std::string& body, const RequestLimits& limits) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw HttpError(400, std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "the body must be a JSON object");
  if (!j.contains("text")) bad("text", "missing");
  TranslateRequest r;
  r.texts = texts_of(j["text"], limits);
  for (const auto& [key, v] : j.items()) {
    if (key == "text") continue;
    if (key == "model")
      r.model = string_of(v, key);
    else if (key == "format")
      r.format = string_of(v, key);
    else if (key == "beam")
      r.beam = integer_of(v, key, 1);
    else if (key == "length_penalty")
      r.length_penalty = number_of(v, key);
    else if (key == "constraints")
      r.constraints = phrases_of(v, key, r.texts.size());
    else if (key == "avoid")
      r.avoid = phrases_of(v, key, r.texts.size());
    else if (key == "alignment")
      r.alignment = alignment_of(v);
    else if (key == "scores")
      r.scores = bool_of(v, key);
    else if (key == "sampling")
      read_sampling(v, r);
    else
      bad(key, "unknown field");
  }
  if (r.format != "lines" && r.format != "text" && r.format != "html")
    bad("format", "must be \"lines\", \"text\" or \"html\"");
  return r;
}

}  // namespace nmt
