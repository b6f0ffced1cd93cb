// A run that starts from a model's weights (init_from.h).
#include "src/train/init_from.h"

#include "src/core/error.h"
#include "src/data/hf_tokenizer.h"
#include "src/io/content_hash.h"
#include "src/train/checkpoint.h"
#include "src/train/model_dir.h"
#include "src/train/model_io.h"

namespace gdn::train {

nlohmann::json InitFrom::to_json() const {
  nlohmann::json j = {{"dir", dir}, {"weights_hash", weights_hash}, {"strict", strict}};
  if (!strict) j["loaded"] = loaded, j["skipped"] = skipped, j["fresh"] = fresh;
  return j;
}

std::string init_model_dir(const std::string& path) {
  return resolve_model_dir(path).dir;
}

RunConfig config_for_init_from(RunConfig cfg, bool yaml_has_model,
                               const std::vector<std::string>& sets) {
  if (cfg.train.init_from.empty()) return cfg;
  const ModelDir md = resolve_model_dir(cfg.train.init_from);
  if (cfg.train.init_strict) {
    cfg.model = model_config_of(md, cfg, yaml_has_model, sets);
  } else {
    GDN_CHECK(yaml_has_model, "train.init_strict: false grows a model from ", md.dir,
              "'s weights: the config's model: section describes the new model, and it has none");
  }
  // The ids of the data must mean what they meant to the model.
  if (data::has_tokenizer_files(md.dir) && cfg.data.dir.empty() && cfg.data.tokenizer == "byte" &&
      cfg.data.task == Task::text)
    cfg.data.tokenizer = md.dir;
  cfg.validate();
  return cfg;
}

InitFrom load_init_weights(const std::string& dir, bool strict, nn::CausalLM& model) {
  InitFrom r;
  r.dir = dir;
  r.strict = strict;
  r.weights_hash = io::content_hash(weight_files(r.dir));
  if (r.strict) {
    load_weights(r.dir, model);
  } else {
    WeightsMatched m = load_matching_weights(r.dir, model);
    r.loaded = std::move(m.loaded);
    r.skipped = std::move(m.skipped);
    r.fresh = std::move(m.fresh);
  }
  return r;
}

}  // namespace gdn::train
