// `train.init_from: DIR` (`gdn train --init-from DIR`): a new run that starts from a model's
// weights instead of a random initialisation: continued pretraining, fine-tuning, or growing a
// model from a smaller run. DIR is a gdn run (its latest checkpoint), a checkpoint, or any model
// directory with config.json and model.safetensors (sharded too; bf16/fp16/fp32 weights load into
// the fp32 masters). Optimizer, schedule, step count and data position start fresh.
//   strict (the default)  the model is DIR's config.json's; a YAML `model:` section may be left
//                         out, and one that is given must describe the same model (the error
//                         names each key that differs; kernel, chunk_size and residual are the
//                         YAML's). Every tensor must load.
//   train.init_strict: false  the model is the YAML's: tensors whose names and shapes match
//                         load, the rest start as a fresh model would; both are listed.
// When DIR holds tokenizer files the run's data must be made with that tokenizer: data.tokenizer
// left at its default becomes DIR's, and data made with another is refused naming both.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/model.h"
#include "src/train/run_config.h"

namespace gdn::train {

// Where a run started, as trainer_state.json's `init_from` records it.
struct InitFrom {
  std::string dir;           // the model directory the weights came from
  std::string weights_hash;  // FNV-1a 64 over its weight files' bytes, in file order
  bool strict = true;
  std::vector<std::string> loaded, skipped, fresh;  // lenient loads only
  nlohmann::json to_json() const;
};

// The run's config for a start from cfg.train.init_from (resolved to its model directory):
// the model as described above, and data.tokenizer set to DIR when DIR has a tokenizer and the
// config left data.tokenizer at `byte` with data.inputs to prepare. `yaml_has_model`: the YAML
// had a `model:` section; `sets`: the --set overrides (a model key needs a YAML model).
RunConfig config_for_init_from(RunConfig cfg, bool yaml_has_model,
                               const std::vector<std::string>& sets);

// Loads the weights of the model directory `dir` (init_model_dir) into `model`, strict or lenient
// (train.init_strict), and reports what it did.
InitFrom load_init_weights(const std::string& dir, bool strict, nn::CausalLM& model);

// The directory a --init-from path names: a run's latest checkpoint, or the path itself.
std::string init_model_dir(const std::string& path);

}  // namespace gdn::train
