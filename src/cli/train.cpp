// `gdn train CONFIG.yaml [--set key=value ...] [--resume DIR]` (`gdn eval`: src/cli/eval.cpp).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/dist/communicator.h"
#include "src/train/trainer.h"

namespace gdn::cli {

namespace {

struct TrainArgs {
  std::string config, resume;
  std::vector<std::string> sets;
  bool quiet = false, profile_memory = false;
};

void run_train(const TrainArgs& a) {
  std::string config = a.config;
  if (config.empty()) {
    GDN_CHECK(!a.resume.empty(), "gdn train needs CONFIG.yaml or --resume DIR");
    // Resuming without a config: the run's own resolved config.
    config = (std::filesystem::path(train::run_dir_of(a.resume)) / "config.yaml").string();
  }
  train::RunConfig cfg = train::load_run_config(config, a.sets);
  train::TrainerOptions o;
  o.resume = a.resume;
  o.quiet = a.quiet;
  o.profile_memory = a.profile_memory;
  train::Trainer t(cfg, o);
  train::TrainerState s = t.run();
  if (t.rank() != 0) return;  // one summary per run, from rank 0
  std::printf("%s\n", nlohmann::json({{"step", s.step},
                                      {"tokens", s.tokens_seen},
                                      {"best_val_loss", s.best_val_loss},
                                      {"run_dir", t.run_dir()}})
                          .dump()
                          .c_str());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a model from a YAML config");
  cmd->add_option("config", a->config, "YAML config (model, data, train, dist sections)");
  cmd->add_option("--set", a->sets, "override a key: --set train.steps=100 (repeatable)")
      ->expected(1)
      ->take_all();
  cmd->add_option("--resume", a->resume,
                  "continue a run: its directory (latest checkpoint) or a checkpoint directory");
  cmd->add_flag("--quiet", a->quiet, "no progress lines");
  cmd->add_flag("--profile-memory", a->profile_memory,
                "print the memory profile of the first step");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace gdn::cli
