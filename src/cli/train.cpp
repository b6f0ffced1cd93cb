// `gdn train CONFIG.yaml [--set key=value ...] [--resume DIR | --overwrite]` (`gdn eval`:
// src/cli/eval.cpp). `gdn train` exits 0 when done, 1 on an error, 128 + N when signal N stopped
// it (after saving a checkpoint).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/dist/communicator.h"
#include "src/train/trainer.h"

namespace gdn::cli {

namespace {

struct TrainArgs {
  std::string config, init_from;
  std::vector<std::string> sets;
  train::TrainerOptions options;  // --resume, --overwrite, --quiet, --profile-memory, --trace
};

void run_train(const TrainArgs& a) {
  std::string config = a.config;
  if (config.empty()) {
    GDN_CHECK(!a.options.resume.empty(), "gdn train needs CONFIG.yaml or --resume DIR");
    // Resuming without a config: the run's own resolved config.
    config = (std::filesystem::path(train::run_dir_of(a.options.resume)) / "config.yaml").string();
  }
  std::vector<std::string> sets = a.sets;
  if (!a.init_from.empty()) sets.push_back("train.init_from=" + a.init_from);
  train::RunConfig cfg = train::load_run_config(config, sets);
  train::Trainer t(cfg, a.options);
  train::TrainerState s = t.run();
  if (t.rank() == 0)  // one summary per run, from rank 0
    std::printf("%s\n", nlohmann::json(
                            {{"step", s.step},
                             {"tokens", s.tokens_seen},
                             // null: the run never evaluated
                             {"best_val_loss", s.best_val_loss > 0 ? nlohmann::json(s.best_val_loss)
                                                                   : nlohmann::json(nullptr)},
                             {"run_dir", t.run_dir()}})
                            .dump()
                            .c_str());
  // Stopped by a signal, after saving: 128 + N on every rank, as a shell reports a killed job,
  // so a scheduler or script sees the run is unfinished (main returns this code, quietly).
  if (t.stop_signal() != 0) {
    std::fflush(stdout);
    // mpirun ends the job when a rank exits non-zero: none leaves before rank 0 has reported.
    if (t.world_size() > 1) t.comm().barrier();
    throw CLI::RuntimeError(128 + t.stop_signal());
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a model from a YAML config");
  cmd->add_option("config", a->config, "YAML config (model, data, train, dist sections)");
  cmd->add_option("--set", a->sets, "override a key: --set train.steps=100 (repeatable)")
      ->expected(1)
      ->take_all();
  cmd->add_option("--resume", a->options.resume,
                  "continue a run: its directory (latest checkpoint) or a checkpoint directory");
  cmd->add_flag("--overwrite", a->options.overwrite,
                "start afresh in a train.out_dir that holds a run: deletes its checkpoints, "
                "latest, metrics.jsonl and config.yaml (keeps data/)");
  cmd->add_option("--init-from", a->init_from,
                  "start from a model's weights (train.init_from): a run, checkpoint or model "
                  "directory; its config.json is the model, optimizer and schedule start fresh");
  cmd->add_flag("--quiet", a->options.quiet, "no progress lines");
  cmd->add_flag("--profile-memory", a->options.profile_memory,
                "print the memory profile of the first step");
  cmd->add_option("--trace", a->options.trace_path,
                  "write a Chrome trace (Perfetto, chrome://tracing) of 3 steps after 2 of "
                  "warm-up to FILE.json, and print the ops by time");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace gdn::cli
