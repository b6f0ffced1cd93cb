// `gdn eval DIR [--data DATA_DIR] [--batches N] [--set k=v ...]`: validation loss, perplexity and
// bits per byte (MQAR: recall accuracy) as one JSON line. DIR is a run directory (its latest
// checkpoint and the run's data), a checkpoint directory, or any Hugging Face model directory
// (config.json + model.safetensors), which needs --data. A loss that is not finite is an error.
#include <cstdio>

#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/train/model_dir.h"

namespace gdn::cli {

void add_eval_command(CLI::App& app) {
  auto r = std::make_shared<train::EvalRequest>();
  auto* ev = app.add_subcommand("eval", "Validation loss, perplexity and bits per byte of a model");
  ev->add_option("dir", r->path,
                 "run directory (latest checkpoint), checkpoint directory, or model directory "
                 "(config.json + model.safetensors)")
      ->required();
  ev->add_option("--data", r->data_dir,
                 "token shards to score (gdn prepare-data; default: the run's data)");
  ev->add_option("--batches", r->batches,
                 "validation batches (default: train.eval_batches; 0 = all)")
      ->check(whole_number(0));
  ev->add_option("--set", r->sets, "override a config key: --set data.seq_len=512")
      ->expected(1)
      ->take_all();
  ev->callback([r] { std::printf("%s\n", train::evaluate_model_dir(*r).dump().c_str()); });
}

}  // namespace gdn::cli
