// save_pretrained / load_weights.
#include "src/train/model_io.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "src/io/safetensors.h"
#include "src/ops/ops.h"

namespace gdn::train {

namespace fs = std::filesystem;

void replace_directory(const std::string& tmp, const std::string& dir) {
  std::error_code ec;
  const fs::path old = dir + ".old";
  fs::remove_all(old, ec);
  if (fs::exists(dir)) fs::rename(dir, old);
  fs::rename(tmp, dir);
  fs::remove_all(old, ec);
}

void save_pretrained(const std::string& dir, const nn::CausalLM& model, DType dtype) {
  GDN_CHECK(dtype == DType::float32 || dtype == DType::bfloat16,
            "save_pretrained: weights are written as float32 or bfloat16, not ", dtype_name(dtype));
  const std::string tmp = dir + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  nlohmann::json cfg = model.cfg.to_hf_json();
  cfg["torch_dtype"] = dtype == DType::bfloat16 ? "bfloat16" : "float32";
  {
    std::ofstream f(fs::path(tmp) / "config.json");
    GDN_CHECK(f, "cannot write ", tmp, "/config.json");
    f << cfg.dump(2) << "\n";
    GDN_CHECK(f.good(), "error writing ", tmp, "/config.json");
  }
  io::save_safetensors((fs::path(tmp) / "model.safetensors").string(), model.named_parameters(),
                       {{"format", "pt"}}, dtype);
  replace_directory(tmp, dir);
}

nn::ModelConfig load_config_json(const std::string& dir) {
  const fs::path p = fs::path(dir) / "config.json";
  std::ifstream f(p);
  GDN_CHECK(f, "cannot open ", p.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(p.string(), ": not valid JSON: ", e.what());
  }
  try {
    return nn::ModelConfig::from_hf_json(j);
  } catch (const Error& e) {
    GDN_FAIL(p.string(), ": ", e.what());
  }
}

void load_weights(const std::string& dir, nn::CausalLM& model) {
  const std::string path = (fs::path(dir) / "model.safetensors").string();
  auto tensors = io::load_safetensors(path);
  std::set<std::string> wanted;
  for (const auto& [name, p] : model.named_parameters()) wanted.insert(name);
  std::set<std::string> seen;
  for (auto& [name, t] : tensors) {
    if (model.cfg.tie_word_embeddings && name == "lm_head.weight") continue;  // tied copy
    Tensor* slot = model.find_parameter(name);
    GDN_CHECK(slot, path, ": unexpected tensor '", name, "' (not a parameter of this model)");
    GDN_CHECK(t.shape() == slot->shape(), path, ": tensor '", name, "' has shape ",
              shape_str(t.shape()), " but the model expects ", shape_str(slot->shape()));
    GDN_CHECK(is_floating(t.dtype()), path, ": tensor '", name, "' has dtype ",
              dtype_name(t.dtype()), ", expected a floating type");
    autograd::NoGradGuard ng;
    ops::copy_(*slot, t);
    seen.insert(name);
  }
  for (const auto& name : wanted)
    GDN_CHECK(seen.count(name), path, ": missing tensor '", name, "'");
}

}  // namespace gdn::train
