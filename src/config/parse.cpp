#include "config/parse.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "config/schema.h"
#include "config/validate.h"
#include "util/util.h"

namespace nmt {

using nlohmann::json;

namespace {

// Configs nest two levels. Deeper input is refused while parsing: it is never a config, and
// printing it back in an error message would recurse once per level.
constexpr int kMaxJsonDepth = 32;

// Parses JSON text with the depth limit. Throws json::exception on malformed text and Error on
// depth.
json parse_json(const std::string& text) {
  return json::parse(text, [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth)
      throw Error("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  });
}

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

// A --set value may hold bytes that are not UTF-8; they print as U+FFFD.
std::string short_dump(const json& j) {
  return clip(j.dump(-1, ' ', false, json::error_handler_t::replace), 40);
}

// Reads a JSON object into a struct, field by field, recording which keys it knew.
class Parser {
 public:
  // `given` collects the path of every key the JSON holds, for the checks that tell a key the
  // config gave from its default.
  Parser(const json& object, std::string path, std::set<std::string>& given)
      : object_(object), path_(std::move(path)), given_(given) {}

  template <class S>
  void section(const std::string& name, S& target) {
    known_.push_back(name);
    auto it = object_.find(name);
    if (it == object_.end()) return;
    refuse_foreign(name);
    Parser sub(*it, join(name), given_);
    sub.expect_object();
    visit(target, sub);
    sub.reject_unknown();
  }

  template <class S>
  void optional_section(const std::string& name, S& target, bool) {
    section(name, target);
  }

  template <class T>
  void operator()(const std::string& name, T& field, const char*, const Check<T>& check) {
    known_.push_back(name);
    auto it = object_.find(name);
    if (it == object_.end()) return;
    refuse_foreign(name);
    const std::string path = join(name);
    given_.insert(path);
    T value = convert<T>(*it, path);
    if (auto problem = check(value)) throw Error(path + ": " + *problem);
    field = std::move(value);
  }

  // A string key is read as any other; only the printer leaves it out while empty.
  void optional(const std::string& name, std::string& field, const char* doc,
                const Check<std::string>& check) {
    (*this)(name, field, doc, check);
  }

  // An array of objects, each read as a section.
  template <class S>
  void list(const std::string& name, std::vector<S>& target, const char*) {
    known_.push_back(name);
    auto it = object_.find(name);
    if (it == object_.end()) return;
    refuse_foreign(name);
    if (!it->is_array()) throw wrong_type(join(name), "a list", *it);
    given_.insert(join(name));
    std::vector<S> out;
    for (size_t i = 0; i < it->size(); ++i) {
      Parser sub((*it)[i], join(name) + "[" + std::to_string(i) + "]", given_);
      sub.expect_object();
      S element;
      visit(element, sub);
      sub.reject_unknown();
      out.push_back(std::move(element));
    }
    target = std::move(out);
  }

  // Keys of one model family: read when `arch` is the configured one (`active`), else known but
  // refused when present, so a key of the other family is never silently ignored.
  template <class F>
  void for_arch(Arch arch, Arch active, F&& fields) {
    if (arch != active) foreign_ = {name_of(arch), name_of(active)};
    fields();
    foreign_.reset();
  }

  void expect_object() const {
    if (!object_.is_object())
      throw Error(path_ + ": expected an object, got " + type_name(object_) + " " +
                  short_dump(object_));
  }

  void reject_unknown() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
      std::string msg = clip(join(it.key())) + ": unknown key";
      const std::string hint = closest_match(it.key(), known_);
      if (!hint.empty()) msg += " (did you mean \"" + join(hint) + "\"?)";
      throw Error(msg);
    }
  }

 private:
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void refuse_foreign(const std::string& name) const {
    if (foreign_)
      throw Error(join(name) + ": a key of model.arch \"" + foreign_->first +
                  "\", but model.arch is \"" + foreign_->second + "\"");
  }

  template <class T>
  static T convert(const json& j, const std::string& path) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!j.is_boolean()) throw wrong_type(path, "a boolean", j);
      return j.get<bool>();
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (j.is_number_integer()) {
        if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))
          throw Error(path + ": integer out of range: " + j.dump());
        return j.get<int64_t>();
      }
      // 4096.0 is accepted as an integer; 4096.5 is not.
      if (j.is_number_float()) {
        const double d = j.get<double>();
        if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e15)
          return static_cast<int64_t>(d);
        throw Error(path + ": expected an integer, got " + j.dump());
      }
      throw wrong_type(path, "an integer", j);
    } else if constexpr (std::is_enum_v<T>) {
      return parse_choice<T>(convert<std::string>(j, path), path);
    } else if constexpr (std::is_same_v<T, Duration>) {
      if (j.is_number()) return Duration{convert<double>(j, path)};
      if (!j.is_string()) throw wrong_type(path, "seconds or a duration string like \"45m\"", j);
      try {
        return Duration{parse_duration(convert<std::string>(j, path))};
      } catch (const Error& e) {
        throw Error(path + ": " + e.what());
      }
    } else if constexpr (std::is_same_v<T, double>) {
      if (!j.is_number()) throw wrong_type(path, "a number", j);
      const double d = j.get<double>();
      if (!std::isfinite(d)) throw Error(path + ": expected a finite number");
      return d;
    } else {
      if (!j.is_string()) throw wrong_type(path, "a string", j);
      // JSON text holds only UTF-8; a --set value may not, and could not be written back.
      int64_t invalid = 0;
      sanitize_utf8(j.get_ref<const std::string&>(), &invalid);
      if (invalid > 0)
        throw Error(path + ": not valid UTF-8 (" + std::to_string(invalid) + " bad bytes)");
      return j.get<std::string>();
    }
  }

  static Error wrong_type(const std::string& path, const std::string& want, const json& got) {
    return Error(path + ": expected " + want + ", got " + type_name(got) + " " + short_dump(got));
  }

  const json& object_;
  std::string path_;
  std::set<std::string>& given_;
  std::vector<std::string> known_;
  std::optional<std::pair<std::string, std::string>> foreign_;  // (keys' arch, configured arch)
};

// Applies "a.b.c=value": the value is parsed as JSON when it can be, else taken as a string.
void apply_override(json& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set " + clip(assignment) + ": expected key.path=value");
  const std::string key = trim(assignment.substr(0, eq));
  const std::string raw = assignment.substr(eq + 1);
  json value;
  try {
    value = parse_json(raw);
  } catch (const json::exception&) {
    value = raw;  // not JSON: a plain string
  } catch (const Error& e) {
    throw Error("--set " + clip(assignment) + ": " + e.what());
  }
  json* node = &root;
  const auto parts = split(key, '.');
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) throw Error("--set " + clip(assignment) + ": empty key in path");
    path += (path.empty() ? "" : ".") + parts[i];
    if (!node->is_object())
      throw Error("--set " + clip(assignment) + ": " + clip(path) + " is not inside an object");
    if (i + 1 == parts.size()) {
      (*node)[parts[i]] = value;
    } else {
      node = &(*node)[parts[i]];
      if (node->is_null()) *node = json::object();
    }
  }
}

// The root object of the config text; malformed JSON is an Error naming `origin`, line and column.
json read_json_root(const std::string& json_text, const std::string& origin) {
  json root;
  try {
    root = parse_json(json_text);
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  } catch (const json::parse_error& e) {
    // Turn the byte offset into line and column.
    size_t line = 1, col = 1;
    const size_t end = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, json_text.size());
    for (size_t i = 0; i < end; ++i) {
      if (json_text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("parse error"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw Error(origin + ":" + std::to_string(line) + ":" + std::to_string(col) +
                ": invalid JSON: " + clip(what, 200));
  } catch (const json::exception& e) {
    // Number overflow (1e400) and the like: the library's text after its "[json.exception...]".
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw Error(origin + ": invalid JSON: " + clip(what, 200));
  }
  if (!root.is_object()) throw Error(origin + ": the config must be a JSON object");
  return root;
}

}  // namespace

TrainingData normalize_training_data(DataConfig& data, const std::set<std::string>& given) {
  TrainingData t;
  t.store = data.train_store;
  if (data.train.empty()) {
    // A store's corpora keep weight 1 each; train_src/train_tgt (given or the defaults) are one
    // corpus of weight 1.
    if (!t.from_store()) t.corpora = {CorpusConfig{data.train_src, data.train_tgt, 1.0, ""}};
    return t;
  }
  // data.train replaces the single pair; the defaults step aside, explicit values conflict.
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"data.train_src", &data.train_src},
        {"data.train_tgt", &data.train_tgt}})
    if (given.count(key) > 0 && !value->empty())
      throw Error(std::string(key) + ": give data.train or data.train_src/train_tgt, not both");
  data.train_src.clear();
  data.train_tgt.clear();
  t.corpora = data.train;
  t.from_list = true;
  return t;
}

Config parse_config(const std::string& json_text, const std::vector<std::string>& overrides,
                    const std::string& origin) {
  json root = read_json_root(json_text, origin);
  for (const auto& o : overrides) apply_override(root, o);

  Config config;
  std::set<std::string> given;
  Parser parser(root, "", given);
  visit(config, parser);
  parser.reject_unknown();
  config.data.training = normalize_training_data(config.data, given);
  validate_cross_fields(config);
  return config;
}

Config load_config_file(const std::string& path, const std::vector<std::string>& overrides) {
  if (!file_exists(path)) throw Error("config file not found: " + path);
  return parse_config(read_file(path), overrides, path);
}

}  // namespace nmt
