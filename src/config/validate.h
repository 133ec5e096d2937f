// The checks a config needs beyond each key's own value check (schema.h): the relations between
// keys, and the files the config names.
#pragma once

#include "config/config.h"

namespace nmt {

// Throws Error naming the JSON path when keys that are each valid contradict each other
// (model.heads not dividing model.d_model, ...) or the training data is not usable. parse_config
// calls it once, after normalizing the training data.
void validate_cross_fields(const Config& config);

// Checks what training needs on disk: data files exist and source/target line counts agree.
void validate_data_files(const Config& config);

}  // namespace nmt
