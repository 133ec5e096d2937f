// Reading a config: JSON text (or a file) and "a.b=value" overrides into the typed structs of
// config.h, every key checked against the schema (schema.h) and the keys' relations checked
// (validate.h), the training data normalized once (TrainingData).
#pragma once

#include <set>
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

// The training data that data.train, data.train_src/train_tgt and data.train_store name, as one
// TrainingData; `given` holds the JSON paths the config set (the rest are defaults). data.train
// beside an explicit non-empty train_src or train_tgt is refused naming that key; beside the
// defaults it clears them, so the config prints back without them.
TrainingData normalize_training_data(DataConfig& data, const std::set<std::string>& given);

}  // namespace nmt
