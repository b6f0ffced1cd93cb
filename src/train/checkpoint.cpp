// Checkpoint save / resolve / load.
#include "src/train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/io/safetensors.h"
#include "src/train/model_io.h"

namespace gdn::train {

namespace fs = std::filesystem;

namespace {

void write_text_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    GDN_CHECK(f, "cannot write ", tmp.string());
    f << text;
    f.flush();
    GDN_CHECK(f.good(), "error writing ", tmp.string(), " (disk full?)");
  }
  fs::rename(tmp, path);
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path);
  GDN_CHECK(f, "cannot read ", path.string());
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

std::string checkpoint_path(const std::string& run_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", (long long)step);
  return (fs::path(run_dir) / "checkpoints" / name).string();
}

void save_checkpoint(const std::string& run_dir, const nn::CausalLM& model,
                     const optim::Optimizer& opt, const TrainerState& state) {
  save_checkpoint(run_dir, model, opt.name(), opt.state_dict(), state);
}

void save_checkpoint(const std::string& run_dir, const nn::CausalLM& model,
                     const std::string& optimizer_name, const optim::OptimizerState& os,
                     const TrainerState& state) {
  const std::string dir = checkpoint_path(run_dir, state.step);
  fs::create_directories(fs::path(dir).parent_path());
  const std::string tmp = dir + ".partial";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // The model directory first (its own atomic write), then the trainer state into it.
  save_pretrained(tmp, model, DType::float32);
  save_run_tokenizer(tmp, run_dir);  // the tokenizer travels with the model (and sets bos/eos)
  io::NamedTensors tensors(os.tensors.begin(), os.tensors.end());
  std::map<std::string, std::string> meta{{"optimizer", optimizer_name}};
  char buf[64];
  for (const auto& [k, v] : os.scalars) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    meta["scalar:" + k] = buf;
  }
  io::save_safetensors((fs::path(tmp) / "optimizer.safetensors").string(), tensors, meta);
  nlohmann::json js = {{"step", state.step},
                       {"tokens_seen", state.tokens_seen},
                       {"data_step", state.data_step},
                       {"seed", state.seed},
                       {"best_val_loss", state.best_val_loss},
                       {"skipped_steps", state.skipped_steps},
                       {"elapsed_s", state.elapsed_s},
                       {"world_size", state.world_size},
                       {"global_batch", state.global_batch},
                       {"format", "gdn-trainer-state-1"}};
  write_text_atomic(fs::path(tmp) / "trainer_state.json", js.dump(2) + "\n");
  replace_directory(tmp, dir);
  write_text_atomic(fs::path(run_dir) / "latest", fs::path(dir).filename().string() + "\n");
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "trainer_state.json")) return p.string();
  if (fs::exists(p / "latest")) {
    std::string name = read_text(p / "latest");
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    const fs::path ck = p / "checkpoints" / name;
    GDN_CHECK(fs::exists(ck / "trainer_state.json"), (p / "latest").string(), " names '", name,
              "' but ", ck.string(), " holds no checkpoint");
    return ck.string();
  }
  GDN_FAIL("'", path, "' is neither a run directory (no 'latest' file) nor a checkpoint ",
           "directory (no trainer_state.json)");
}

std::string run_dir_of(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "trainer_state.json") && p.parent_path().filename() == "checkpoints")
    return p.parent_path().parent_path().string();
  return p.string();
}

TrainerState load_trainer_state(const std::string& dir) {
  const fs::path p = fs::path(dir) / "trainer_state.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(p));
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(p.string(), ": not valid JSON: ", e.what());
  }
  TrainerState s;
  try {
    s.step = j.at("step");
    s.tokens_seen = j.at("tokens_seen");
    s.data_step = j.at("data_step");
    s.seed = j.at("seed");
    s.best_val_loss = j.value("best_val_loss", 0.0);
    s.skipped_steps = j.value("skipped_steps", int64_t(0));
    s.elapsed_s = j.value("elapsed_s", 0.0);
    s.world_size = j.value("world_size", int64_t(1));
    s.global_batch = j.value("global_batch", int64_t(0));
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(p.string(), ": ", e.what());
  }
  return s;
}

optim::OptimizerState read_optimizer_state(const std::string& dir,
                                           const std::string& optimizer_name) {
  const std::string path = (fs::path(dir) / "optimizer.safetensors").string();
  std::map<std::string, std::string> meta;
  auto tensors = io::load_safetensors(path, &meta);
  GDN_CHECK(meta["optimizer"] == optimizer_name, path, ": saved by optimizer '", meta["optimizer"],
            "', but this run uses '", optimizer_name, "'");
  optim::OptimizerState os;
  for (auto& [k, t] : tensors) os.tensors[k] = t;
  for (const auto& [k, v] : meta)
    if (k.rfind("scalar:", 0) == 0) os.scalars[k.substr(7)] = std::stod(v);
  return os;
}

void load_optimizer(const std::string& dir, optim::Optimizer& opt) {
  const optim::OptimizerState os = read_optimizer_state(dir, opt.name());
  try {
    opt.load_state_dict(os);
  } catch (const Error& e) {
    GDN_FAIL((fs::path(dir) / "optimizer.safetensors").string(), ": ", e.what());
  }
}

void prune_checkpoints(const std::string& run_dir, int64_t keep) {
  if (keep <= 0) return;
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (!fs::exists(dir)) return;
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0 &&
        e.path().extension() != ".partial")
      all.push_back(e.path());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i]);
}

}  // namespace gdn::train
