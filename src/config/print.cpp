#include "config/print.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "config/schema.h"

namespace nmt {

using nlohmann::json;

namespace {

// A field's value in JSON: durations as seconds, which parse back.
template <class T>
json to_json_value(const T& field) {
  if constexpr (std::is_enum_v<T>) {
    return name_of(field);
  } else if constexpr (std::is_same_v<T, Duration>) {
    return field.seconds;
  } else {
    return field;
  }
}

// Writes a struct back to JSON.
class Printer {
 public:
  explicit Printer(json& out) : out_(out) {}
  template <class S>
  void section(const std::string& name, S& s) {
    json sub = json::object();
    Printer p(sub);
    visit(s, p);
    out_[name] = std::move(sub);
  }
  template <class S>
  void optional_section(const std::string& name, S& s, bool present) {
    if (present) section(name, s);
  }
  template <class S>
  void list(const std::string& name, std::vector<S>& elements, const char*) {
    json out = json::array();
    for (auto& e : elements) {
      json sub = json::object();
      Printer p(sub);
      visit(e, p);
      out.push_back(std::move(sub));
    }
    out_[name] = std::move(out);
  }
  // Only the configured family's keys are written: the output parses back.
  template <class F>
  void for_arch(Arch arch, Arch active, F&& fields) {
    if (arch == active) fields();
  }
  template <class T>
  void operator()(const std::string& name, T& field, const char*, const Check<T>&) {
    out_[name] = to_json_value(field);
  }
  // Left out while empty: its check refuses "", so the output still parses back.
  void optional(const std::string& name, std::string& field, const char* doc,
                const Check<std::string>& check) {
    if (!field.empty()) (*this)(name, field, doc, check);
  }

 private:
  json& out_;
};

// Lists every key as a Markdown table row.
class Documenter {
 public:
  explicit Documenter(std::ostringstream& os) : os_(os) {}
  template <class S>
  void section(const std::string& name, S& s) {
    const std::string outer = prefix_;
    prefix_ += name + ".";
    visit(s, *this);
    prefix_ = outer;
  }
  template <class S>
  void optional_section(const std::string& name, S& s, bool) {
    section(name, s);
  }
  template <class S>
  void list(const std::string& name, std::vector<S>&, const char* doc) {
    os_ << "| `" << prefix_ << name << "` | list | `[]` | " << doc << " |\n";
    const std::string outer = prefix_;
    prefix_ += name + "[].";
    S element;
    visit(element, *this);
    prefix_ = outer;
  }
  template <class F>
  void for_arch(Arch arch, Arch, F&& fields) {
    note_ = std::string("(") + name_of(arch) + " only) ";
    fields();
    note_.clear();
  }
  template <class T>
  void operator()(const std::string& name, T& field, const char* doc, const Check<T>&) {
    std::string type = std::is_same_v<T, bool>       ? "bool"
                       : std::is_same_v<T, int64_t>  ? "int"
                       : std::is_same_v<T, double>   ? "number"
                       : std::is_same_v<T, Duration> ? "duration"
                                                     : "string";
    std::string meaning = note_ + doc;  // a '|' would end the Markdown cell
    for (size_t pos = 0; (pos = meaning.find('|', pos)) != std::string::npos; pos += 2)
      meaning.replace(pos, 1, "\\|");
    os_ << "| `" << prefix_ << name << "` | " << type << " | `" << to_json_value(field).dump()
        << "` | " << meaning << " |\n";
  }
  void optional(const std::string& name, std::string& field, const char* doc,
                const Check<std::string>& check) {
    (*this)(name, field, doc, check);
  }

 private:
  std::ostringstream& os_;
  std::string prefix_;
  std::string note_;  // which model family the keys belong to
};

}  // namespace

std::string config_to_json(const Config& config) {
  json out = json::object();
  Printer p(out);
  visit(const_cast<Config&>(config), p);
  return out.dump(2);
}

bool same_model_config(const ModelConfig& a, const ModelConfig& b) {
  return config_to_json(Config{{}, {}, a, {}, {}}) == config_to_json(Config{{}, {}, b, {}, {}});
}

std::string config_reference_markdown() {
  std::ostringstream os;
  os << "| key | type | default | meaning |\n|---|---|---|---|\n";
  Config defaults;
  Documenter d(os);
  visit(defaults, d);
  return os.str();
}

}  // namespace nmt
