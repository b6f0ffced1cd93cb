// Hugging Face style model directories: config.json (fla's GatedDeltaNetConfig names,
// model_type gated_deltanet) and model.safetensors (fla's parameter names), written atomically;
// checkpoints also carry the run's tokenizer in Hugging Face's form (src/data/hf_tokenizer.h).
#pragma once
#include <string>
#include <vector>

#include "layers/model.h"

namespace gdn::train {

// Writes DIR/config.json and DIR/model.safetensors (F32 or BF16) via a temporary directory
// renamed into place, so a crash never leaves a half-written DIR.
void save_pretrained(const std::string& dir, const nn::CausalLM& model,
                     DType dtype = DType::float32);

// DIR/config.json as a ModelConfig; fields gdn would not compute as fla does are refused by
// name (layers/config.cpp).
nn::ModelConfig load_config_json(const std::string& dir);

// Loads DIR/model.safetensors (or the shards that model.safetensors.index.json lists, as
// Hugging Face writes large models) into the model's parameters (cast to their dtype). Checks
// every name, shape and dtype and names the first problem (missing, unexpected, wrong shape), and
// refuses a NaN or infinite value naming the file and the tensor.
void load_weights(const std::string& dir, nn::CausalLM& model);

// What a lenient load (growing a model: train.init_strict false) did: the parameters it filled,
// the tensors of the files it left out ("name: why") and the parameters the files lack (they
// keep the model's fresh initialisation). NaN or infinite values are still refused.
struct WeightsMatched {
  std::vector<std::string> loaded, skipped, fresh;
};
WeightsMatched load_matching_weights(const std::string& dir, nn::CausalLM& model);

// The weight files of DIR: model.safetensors, or the shards its index lists.
std::vector<std::string> weight_files(const std::string& dir);

// Writes the tokenizer of the run in RUN_DIR into `checkpoint_dir` in Hugging Face's form and
// sets config.json's bos/eos ids to its own (null where it has none). The tokenizer is the one
// the run trains on: that of data.dir or RUN_DIR/data per RUN_DIR/config.yaml. Without a
// tokenizer (MQAR; a run directory without config.yaml or data) it writes nothing.
void save_run_tokenizer(const std::string& checkpoint_dir, const std::string& run_dir);

// Replaces `dir` by `tmp` (both directories) as atomically as the filesystem allows.
void replace_directory(const std::string& tmp, const std::string& dir);

}  // namespace gdn::train
