// Hugging Face style model directories: config.json (fla's GatedDeltaNetConfig names,
// model_type gated_deltanet) and model.safetensors (fla's parameter names), written atomically.
#pragma once
#include <string>

#include "layers/model.h"

namespace gdn::train {

// Writes DIR/config.json and DIR/model.safetensors (F32 or BF16) via a temporary directory
// renamed into place, so a crash never leaves a half-written DIR.
void save_pretrained(const std::string& dir, const nn::CausalLM& model,
                     DType dtype = DType::float32);

nn::ModelConfig load_config_json(const std::string& dir);

// Loads DIR/model.safetensors into the model's parameters (cast to their dtype). Checks every
// name, shape and dtype and names the first problem (missing, unexpected, wrong shape).
void load_weights(const std::string& dir, nn::CausalLM& model);

// Replaces `dir` by `tmp` (both directories) as atomically as the filesystem allows.
void replace_directory(const std::string& tmp, const std::string& dir);

}  // namespace gdn::train
