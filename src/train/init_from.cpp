// A run that starts from a model's weights (init_from.h).
#include "src/train/init_from.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "src/core/error.h"
#include "src/data/hf_tokenizer.h"
#include "src/train/checkpoint.h"
#include "src/train/model_dir.h"
#include "src/train/model_io.h"

namespace gdn::train {

namespace {

namespace fs = std::filesystem;

// FNV-1a 64 over the bytes of `files`, in order, read in blocks.
std::string files_hash(const std::vector<std::string>& files) {
  uint64_t h = 1469598103934665603ull;
  std::vector<char> block(size_t(1) << 20);
  for (const std::string& path : files) {
    std::ifstream f(path, std::ios::binary);
    GDN_CHECK(f, "cannot read '", path, "'");
    while (f) {
      f.read(block.data(), std::streamsize(block.size()));
      const std::streamsize n = f.gcount();
      for (std::streamsize i = 0; i < n; ++i)
        h = (h ^ uint8_t(block[size_t(i)])) * 1099511628211ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

}  // namespace

nlohmann::json InitFrom::to_json() const {
  nlohmann::json j = {{"dir", dir}, {"weights_hash", weights_hash}, {"strict", strict}};
  if (!strict) j["loaded"] = loaded, j["skipped"] = skipped, j["fresh"] = fresh;
  return j;
}

std::string init_model_dir(const std::string& path) {
  return resolve_model_dir(path).dir;
}

bool yaml_has_model_section(const std::string& yaml_path) {
  if (yaml_path.empty() || !fs::is_regular_file(yaml_path)) return false;
  const YAML::Node root = YAML::LoadFile(yaml_path);
  return root.IsMap() && root["model"] && root["model"].IsMap() && root["model"].size() > 0;
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

InitFrom load_init_weights(const TrainConfig& t, nn::CausalLM& model) {
  InitFrom r;
  r.dir = init_model_dir(t.init_from);
  r.strict = t.init_strict;
  r.weights_hash = files_hash(weight_files(r.dir));
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
