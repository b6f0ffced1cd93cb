// save_pretrained / load_config_json / load_weights / save_run_tokenizer.
#include "src/train/model_io.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "src/data/hf_tokenizer.h"
#include "src/io/atomic_file.h"
#include "src/io/safetensors.h"
#include "src/ops/ops.h"
#include "src/train/data_source.h"
#include "src/train/run_config.h"

namespace gdn::train {

namespace fs = std::filesystem;

namespace {

// The first NaN or infinite element of a host tensor of a floating dtype (-1: none), checked on
// the raw bits so no copy of a large tensor is made.
int64_t first_nonfinite(const Tensor& t) {
  const int64_t n = t.numel();
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  auto scan16 = [&](uint16_t exponent_mask) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      if ((v & exponent_mask) == exponent_mask) return i;
    }
    return int64_t(-1);
  };
  switch (t.dtype()) {
    case DType::float32:
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        if (!std::isfinite(v)) return i;
      }
      return -1;
    case DType::float64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        if (!std::isfinite(v)) return i;
      }
      return -1;
    case DType::bfloat16:
      return scan16(0x7F80);  // exponent all ones: inf or NaN
    case DType::float16:
      return scan16(0x7C00);
    default:
      return -1;
  }
}

}  // namespace

// The weight files of DIR: model.safetensors, or the shards of model.safetensors.index.json.
std::vector<std::string> weight_files(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single) || !fs::exists(index)) return {single.string()};
  nlohmann::json j;
  try {
    std::ifstream f(index);
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(index.string(), ": not valid JSON: ", e.what());
  }
  GDN_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), index.string(),
            ": no 'weight_map' object");
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    GDN_CHECK(file.is_string(), index.string(), ": weight_map['", name, "'] is not a file name");
    // A shard lies in the model directory: a path would read another directory's files.
    const std::string f = file.get<std::string>();
    GDN_CHECK(!f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
                  f.find('\\') == std::string::npos,
              index.string(), ": weight_map['", name, "'] is '", f,
              "': a shard must be a file name in the model directory (no path)");
    files.insert(f);
  }
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back((fs::path(dir) / f).string());
  return out;
}

void replace_directory(const std::string& tmp, const std::string& dir) {
  std::error_code ec;
  const fs::path old = dir + ".old." + std::to_string(::getpid());
  fs::remove_all(old, ec);
  if (fs::exists(dir)) fs::rename(dir, old);
  fs::rename(tmp, dir);
  fs::remove_all(old, ec);
}

void save_pretrained(const std::string& dir, const nn::CausalLM& model, DType dtype) {
  GDN_CHECK(dtype == DType::float32 || dtype == DType::bfloat16,
            "save_pretrained: weights are written as float32 or bfloat16, not ", dtype_name(dtype));
  const std::string tmp = io::temp_path_for(dir);
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

namespace {

// The loading of load_weights (strict: every check an error) and load_matching_weights (lenient:
// a tensor of another name or shape is skipped and listed, a missing parameter listed as fresh).
void load_weights_into(const std::string& dir, nn::CausalLM& model, WeightsMatched* lenient) {
  std::set<std::string> wanted;
  for (const auto& [name, p] : model.named_parameters()) wanted.insert(name);
  std::set<std::string> seen;
  const bool tied = model.cfg.tie_word_embeddings;
  const std::string embeddings = "model.embeddings.weight";
  std::string
      tied_head_file;  // where a tied lm_head.weight was stored (fallback for the embedding)
  Tensor tied_head;
  const std::vector<std::string> files = weight_files(dir);
  for (const std::string& path : files) {
    auto tensors = io::load_safetensors(path);
    for (auto& [name, t] : tensors) {
      GDN_CHECK(is_floating(t.dtype()), path, ": tensor '", name, "' has dtype ",
                dtype_name(t.dtype()), ", expected a floating type");
      const int64_t bad = first_nonfinite(t);
      if (bad >= 0) {
        const double v = ops::slice(ops::reshape(t, {-1}), 0, bad, bad + 1).item();
        GDN_FAIL(path, ": tensor '", name, "' holds a non-finite value (", v, " at flat index ",
                 bad, " of ", t.numel(), ")");
      }
      if (tied && name == "lm_head.weight") {  // the tied copy: the embedding is the weight
        tied_head = t;
        tied_head_file = path;
        continue;
      }
      Tensor* slot = model.find_parameter(name);
      if (lenient && (!slot || t.shape() != slot->shape())) {
        lenient->skipped.push_back(name + (slot ? ": shape " + shape_str(t.shape()) +
                                                      ", the model's " + shape_str(slot->shape())
                                                : ": not a parameter of this model"));
        continue;
      }
      GDN_CHECK(slot, path, ": unexpected tensor '", name, "' (not a parameter of this model)");
      GDN_CHECK(t.shape() == slot->shape(), path, ": tensor '", name, "' has shape ",
                shape_str(t.shape()), " but the model expects ", shape_str(slot->shape()));
      GDN_CHECK(!seen.count(name), path, ": tensor '", name, "' is stored twice");
      autograd::NoGradGuard ng;
      ops::copy_(*slot, t);
      seen.insert(name);
    }
  }
  // A tied model may store its one matrix under the head's name instead of the embedding's.
  Tensor* tied_slot = model.find_parameter(embeddings);
  if (lenient && tied && !seen.count(embeddings) && tied_head.defined() &&
      tied_head.shape() != tied_slot->shape()) {
    lenient->skipped.push_back("lm_head.weight: shape " + shape_str(tied_head.shape()) +
                               ", the model's tied embedding " + shape_str(tied_slot->shape()));
    tied_head = Tensor();
  }
  if (tied && !seen.count(embeddings) && tied_head.defined()) {
    Tensor* slot = tied_slot;
    GDN_CHECK(tied_head.shape() == slot->shape(), tied_head_file,
              ": tensor 'lm_head.weight' (tied to the embeddings) has shape ",
              shape_str(tied_head.shape()), " but the model expects ", shape_str(slot->shape()));
    autograd::NoGradGuard ng;
    ops::copy_(*slot, tied_head);
    seen.insert(embeddings);
  }
  const std::string where = files.size() == 1 ? files[0] : dir + " (sharded weights)";
  for (const auto& name : wanted) {
    if (lenient) {
      (seen.count(name) ? lenient->loaded : lenient->fresh).push_back(name);
      continue;
    }
    GDN_CHECK(seen.count(name), where, ": missing tensor '", name, "'");
  }
}

}  // namespace

void load_weights(const std::string& dir, nn::CausalLM& model) {
  load_weights_into(dir, model, nullptr);
}

WeightsMatched load_matching_weights(const std::string& dir, nn::CausalLM& model) {
  WeightsMatched m;
  load_weights_into(dir, model, &m);
  return m;
}

void save_run_tokenizer(const std::string& checkpoint_dir, const std::string& run_dir) {
  const fs::path config = fs::path(run_dir) / "config.yaml";
  std::string data_dir = (fs::path(run_dir) / "data").string();
  if (fs::exists(config)) {
    const RunConfig cfg = load_run_config(config.string(), {});
    if (cfg.data.task == Task::mqar) {  // synthetic tokens: no tokenizer, no bos or eos
      data::set_config_token_ids(checkpoint_dir, -1, -1);
      return;
    }
    data_dir = data_dir_of(cfg, run_dir);
  }
  if (!data::has_tokenizer_files(data_dir)) return;
  data::write_hf_tokenizer_files(checkpoint_dir, *data::load_hf_tokenizer(data_dir));
}

}  // namespace gdn::train
