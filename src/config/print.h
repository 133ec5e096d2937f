// Writing a config back: the JSON that parse_config reads (config.json in run directories and
// checkpoints, nmt train --print-config) and the reference table of every key (docs/config.md).
#pragma once

#include <string>

#include "config/config.h"

namespace nmt {

// The merged config as pretty JSON (every key, defaults included). The training data is
// written as the config spelled it (data.train_src/train_tgt, data.train, data.train_store).
std::string config_to_json(const Config& config);

// True when two model sections describe the same architecture (every key equal): the weights of
// one fit the other.
bool same_model_config(const ModelConfig& a, const ModelConfig& b);

// Markdown table of every key with its type, default and meaning (docs/config.md).
std::string config_reference_markdown();

}  // namespace nmt
