// Reading a config: JSON text (or a file) and "a.b=value" overrides into the typed structs of
// config.h, every key checked against the schema (schema.h) and the keys' relations checked
// (validate.h).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace nmt {

// Builds a config from JSON text (defaults fill missing keys), then applies "a.b=value" overrides.
// Throws Error naming the JSON path on invalid JSON, unknown keys, wrong types or bad values.
// `origin` names the source in messages (a file path, say).
Config parse_config(const std::string& json_text, const std::vector<std::string>& overrides = {},
                    const std::string& origin = "config");
Config load_config_file(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace nmt
