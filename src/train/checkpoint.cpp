// Checkpoint save / resolve / load.
#include "src/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "src/io/atomic_file.h"
#include "src/io/safetensors.h"
#include "src/train/model_io.h"

namespace gdn::train {

namespace fs = std::filesystem;

namespace {

// The step of a checkpoint directory name "step-NNNNNN", or -1 for any other name (".partial",
// ".old", ".tmp" and foreign entries are never checkpoints).
int64_t checkpoint_step(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (int64_t(1) << 55)) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// The checkpoint name RUN_DIR/latest holds ("" when there is no such file).
std::string latest_name(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir / "latest", ec)) return "";
  std::string name = io::read_regular_file((run_dir / "latest").string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ' || name.back() == '\r'))
    name.pop_back();
  return name;
}

// The checkpoints of a run, oldest first.
std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir)) {
    const int64_t step = checkpoint_step(e.path().filename().string());
    if (step >= 0 && e.is_directory()) found.emplace_back(step, e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

// Removes its paths when destroyed unless `done`: the temporaries of a save that failed.
struct RemoveUnlessDone {
  std::vector<std::string> paths;
  bool done = false;
  void remove() const {
    std::error_code ec;
    for (const std::string& p : paths) fs::remove_all(p, ec);
  }
  ~RemoveUnlessDone() {
    if (!done) remove();
  }
};

void remove_path(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  GDN_CHECK(!ec, "cannot remove ", p.string(), ": ", ec.message());
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
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  GDN_CHECK(!ec, "cannot create ", fs::path(dir).parent_path().string(), ": ", ec.message());
  const std::string tmp = dir + ".partial." + std::to_string(::getpid());
  // A failed write leaves nothing half-written; the older checkpoints and `latest` stay.
  RemoveUnlessDone cleanup{{tmp, io::temp_path_for(tmp)}};
  cleanup.remove();
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
                       {"data_pack", state.data_pack},
                       {"format", kTrainerStateFormat}};
  if (!state.init_from.is_null()) js["init_from"] = state.init_from;
  io::write_file_atomic((fs::path(tmp) / "trainer_state.json").string(), js.dump(2) + "\n");
  // Extra files of the model directory (the tokenizer's, ...) go into `tmp` here, before the
  // rename, so the checkpoint appears whole or not at all.
  replace_directory(tmp, dir);
  cleanup.done = true;
  io::write_file_atomic((fs::path(run_dir) / "latest").string(),
                        fs::path(dir).filename().string() + "\n");
}

std::string latest_checkpoint(const std::string& run_dir) {
  const std::string name = latest_name(run_dir);
  return name.empty() ? "" : (fs::path(run_dir) / "checkpoints" / name).string();
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "trainer_state.json")) return p.string();
  if (fs::exists(p / "latest")) {
    const std::string name = latest_name(p);
    const fs::path ck = p / "checkpoints" / name;
    GDN_CHECK(checkpoint_step(name) >= 0, (p / "latest").string(), " holds '", name,
              "', not a checkpoint name (step-NNNNNN)");
    if (!fs::exists(ck / "trainer_state.json")) {
      GDN_CHECK(!fs::is_directory(ck), (p / "latest").string(), " names '", name, "' but ",
                (ck / "trainer_state.json").string(), " is missing: the checkpoint is ",
                "incomplete (copied in part, or damaged); pass another checkpoint directory");
      std::string present;
      for (const fs::path& c : list_checkpoints(p / "checkpoints"))
        present += " " + c.filename().string();
      GDN_FAIL((p / "latest").string(), " names '", name, "' but ", ck.string(),
               " holds no checkpoint; ",
               present.empty() ? std::string("there are no checkpoints in the run")
                               : "its checkpoints are" + present + " (in " +
                                     (p / "checkpoints").string() + "): pass one instead");
    }
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

namespace {

// The fields of one trainer_state.json, read with their types and ranges checked; every error
// names the file and the field.
class StateFields {
 public:
  StateFields(const nlohmann::json& j, std::string file) : j_(j), file_(std::move(file)) {}

  // An integer >= min; `fallback` when absent, or an error when there is none.
  int64_t integer(const char* key, int64_t min, const int64_t* fallback = nullptr) const {
    const nlohmann::json* v = find(key, fallback != nullptr);
    if (!v) return *fallback;
    const bool fits = v->is_number_unsigned() ? v->get<uint64_t>() <= uint64_t(INT64_MAX)
                                              : v->is_number_integer();
    GDN_CHECK(fits && v->get<int64_t>() >= min, file_, ": field '", key,
              "' must be an integer >= ", min, ", not ", v->dump());
    return v->get<int64_t>();
  }
  uint64_t unsigned_integer(const char* key) const {
    const nlohmann::json* v = find(key, false);
    GDN_CHECK(v->is_number_unsigned(), file_, ": field '", key, "' must be an integer >= 0, not ",
              v->dump());
    return v->get<uint64_t>();
  }
  // A finite number >= 0; `fallback` when absent.
  double number(const char* key, double fallback) const {
    const nlohmann::json* v = find(key, true);
    if (!v) return fallback;
    GDN_CHECK(v->is_number() && std::isfinite(v->get<double>()) && v->get<double>() >= 0, file_,
              ": field '", key, "' must be a finite number >= 0, not ", v->dump());
    return v->get<double>();
  }
  void check_format() const {
    const nlohmann::json* v = find("format", false);
    GDN_CHECK(v->is_string() && v->get<std::string>() == kTrainerStateFormat, file_,
              ": field 'format' is ", v->dump(), ", not a format this build reads (\"",
              kTrainerStateFormat, "\")");
  }

 private:
  const nlohmann::json* find(const char* key, bool optional) const {
    const auto it = j_.find(key);
    if (it != j_.end()) return &*it;
    GDN_CHECK(optional, file_, ": field '", key, "' is missing");
    return nullptr;
  }
  const nlohmann::json& j_;
  std::string file_;
};

}  // namespace

TrainerState load_trainer_state(const std::string& dir) {
  const std::string path = (fs::path(dir) / "trainer_state.json").string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_regular_file(path));
  } catch (const nlohmann::json::exception& e) {
    GDN_FAIL(path, ": not valid JSON: ", e.what());
  }
  GDN_CHECK(j.is_object(), path, ": not a JSON object");
  const StateFields f(j, path);
  f.check_format();
  const int64_t zero = 0, one = 1;
  TrainerState s;
  s.step = f.integer("step", 0);
  s.tokens_seen = f.integer("tokens_seen", 0);
  s.data_step = f.integer("data_step", 0);
  s.seed = f.unsigned_integer("seed");
  s.best_val_loss = f.number("best_val_loss", 0.0);
  s.skipped_steps = f.integer("skipped_steps", 0, &zero);
  s.elapsed_s = f.number("elapsed_s", 0.0);
  s.world_size = f.integer("world_size", 1, &one);
  s.global_batch = f.integer("global_batch", 0, &zero);
  if (j.contains("data_pack") && j["data_pack"].is_string()) s.data_pack = j["data_pack"];
  if (j.contains("init_from") && j["init_from"].is_object()) s.init_from = j["init_from"];
  GDN_CHECK(s.skipped_steps <= s.step, path, ": field 'skipped_steps' (", s.skipped_steps,
            ") exceeds field 'step' (", s.step, ")");
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
  const std::vector<fs::path> all = list_checkpoints(fs::path(run_dir) / "checkpoints");
  const std::string latest = latest_name(run_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i)
    if (all[i].filename() != latest) remove_path(all[i]);  // `latest` must stay resumable
}

std::vector<std::string> run_traces(const std::string& run_dir) {
  const fs::path d(run_dir);
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(d / "latest", ec))) {
    std::string name;
    try {
      name = latest_name(d);
    } catch (const Error&) {
      name = "unreadable";
    }
    out.push_back("latest (" + name + ")");
  }
  if (fs::is_directory(d / "checkpoints", ec) && !fs::is_empty(d / "checkpoints", ec))
    out.push_back("checkpoints/");
  const fs::path m = d / "metrics.jsonl";
  if (fs::is_regular_file(m, ec) && fs::file_size(m, ec) > 0) out.push_back("metrics.jsonl");
  return out;
}

void remove_stale_temporaries(const std::string& run_dir) {
  const fs::path d(run_dir);
  io::remove_stale_temp_files(run_dir, {"latest", "metrics.jsonl", "config.yaml"});
  std::error_code ec;
  if (!fs::is_directory(d / "checkpoints", ec)) return;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(d / "checkpoints", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("step-", 0) == 0 && checkpoint_step(name) < 0 &&
        (name.find(".partial") != std::string::npos || name.find(".tmp") != std::string::npos ||
         name.find(".old") != std::string::npos))
      stale.push_back(it->path());
  }
  for (const fs::path& p : stale) remove_path(p);
}

void remove_run(const std::string& run_dir) {
  const fs::path d(run_dir);
  for (const char* name : {"latest", "checkpoints", "metrics.jsonl", "config.yaml", "tb"})
    remove_path(d / name);
  remove_stale_temporaries(run_dir);
}

}  // namespace gdn::train
