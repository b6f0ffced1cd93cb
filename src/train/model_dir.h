// Opening a model for `gdn eval`, `gdn generate` and `gdn forward --weights`: a run directory
// (its latest checkpoint), a checkpoint directory, or any Hugging Face model directory
// (config.json + model.safetensors, as gdn's or fla's save_pretrained writes it). The model is
// always config.json's; a YAML config that comes with it (forward's CONFIG.yaml, or the run's
// config.yaml) must describe the same model, or the command stops naming every key that differs.
// The tokenizer is the model directory's own (tokenizer.json / tokenizer.model), else the run's.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/model.h"
#include "src/data/tokenizer.h"
#include "src/train/data_source.h"
#include "src/train/run_config.h"

namespace gdn::train {

struct ModelDir {
  std::string dir;         // config.json and the weights
  std::string run_dir;     // the run it belongs to; "" for a model directory on its own
  std::string run_config;  // RUN_DIR/config.yaml; "" when none
};

// Resolves PATH; errors say what was looked for (latest, config.json, model.safetensors).
ModelDir resolve_model_dir(const std::string& path);

// The run's config.yaml with `sets` applied, or (no run) the defaults with `sets`.
RunConfig run_config_of(const ModelDir& md, const std::vector<std::string>& sets);

// config.json's model. When `yaml_describes_model` (cfg came from a YAML: the user's or the
// run's), cfg.model must describe the same model (nn::model_differences; the error names each
// differing key with both values and both files) and the kernel choice (kernel, chunk_size,
// residual) is cfg's. Otherwise the kernel choice is config.json's unless `sets` names it, and
// any other `--set model.*` key is refused (no YAML describes the model).
nn::ModelConfig model_config_of(const ModelDir& md, const RunConfig& cfg, bool yaml_describes_model,
                                const std::vector<std::string>& sets);

// The tokenizer of md.dir, else of the run's data (`cfg`: the run's config); null when neither
// has one (MQAR has none).
std::unique_ptr<data::Tokenizer> model_tokenizer(const ModelDir& md, const RunConfig* cfg);

// The model of `mc` on ctx.device with md's weights (NaN or infinite values are refused).
std::unique_ptr<nn::CausalLM> load_model(const ModelDir& md, const nn::ModelConfig& mc,
                                         const nn::InitContext& ctx);

// Validation of `model` over the data's held-out batches (one process), as the trainer scores
// it: mean nats per predicted token, perplexity, bits per byte, MQAR accuracy.
EvalStats evaluate_model(const nn::CausalLM& model, DataSource& data, Device device);

struct EvalRequest {
  std::string path;      // run, checkpoint or model directory
  std::string data_dir;  // token shards (gdn prepare-data); needed without a run
  int64_t batches = -1;  // validation batches (-1: train.eval_batches; 0: all)
  std::vector<std::string> sets;
};
// `gdn eval`: {"step" (null without trainer state), "val_loss", "val_ppl", "val_tokens",
// "val_bpb" | "val_accuracy"}. Throws when there is no validation data, when the data was made
// with another tokenizer than the model's, and when the loss is not finite.
nlohmann::json evaluate_model_dir(const EvalRequest& request);

// `gdn forward`'s model, from CONFIG.yaml (`yaml`; "" when not given) and/or the model of a
// directory (`weights`; "" when not given). With a directory the model is its config.json's
// (checked against the YAML when there is one, as model_config_of does) and `weights_dir` is
// where the weights are; with the YAML alone it is the YAML's, initialised from train.seed.
struct ForwardModel {
  RunConfig cfg;            // the YAML's or the defaults, with `sets`; cfg.model is the model
  std::string weights_dir;  // "" without --weights
};
ForwardModel resolve_forward_model(const std::string& yaml, const std::vector<std::string>& sets,
                                   const std::string& weights);

}  // namespace gdn::train
