// Trainer checkpoints: a Hugging Face model directory (config.json, model.safetensors) plus
// the trainer state beside it: optimizer.safetensors (moments; scalars in the metadata) and
// trainer_state.json (step, tokens, data position, RNG seed, best validation loss). Written to a
// temporary directory and renamed into place, then RUN_DIR/latest is replaced atomically, so a
// crash never leaves a half checkpoint and `--resume RUN_DIR` always finds a whole one. Also
// the run-directory rules: what counts as a run (never overwritten unasked), its removal for
// --overwrite, and pruning that never deletes the checkpoint `latest` names.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/model.h"
#include "optim/optimizer.h"

namespace gdn::train {

struct TrainerState {
  int64_t step = 0;         // optimizer steps completed
  int64_t tokens_seen = 0;  // training tokens consumed
  int64_t data_step = 0;    // the train loader's position (its next batch)
  uint64_t seed = 0;
  double best_val_loss = 0;   // 0: none yet
  int64_t skipped_steps = 0;  // steps skipped for non-finite loss or gradients
  double elapsed_s = 0;       // training time so far (across resumes)
  int64_t world_size = 1;     // data-parallel ranks of the run that saved it
  int64_t global_batch = 0;   // rows per micro-batch over all ranks (0: unknown, older files)
  // How the rows were made: "documents" or "stream" (src/data/packing.h), "synthetic" (MQAR);
  // "" in older files.
  std::string data_pack;
  // Where a run started (train.init_from): {"dir", "weights_hash", "strict", ...}; null when it
  // started from a random initialisation (src/train/init_from.h).
  nlohmann::json init_from;
};

// The trainer_state.json "format" this build writes and reads.
inline constexpr const char* kTrainerStateFormat = "gdn-trainer-state-1";

// RUN_DIR/checkpoints/step-000123 for step 123.
std::string checkpoint_path(const std::string& run_dir, int64_t step);

// Every file is written and checked in RUN_DIR/checkpoints/step-N.partial, which is renamed to
// step-N; then `latest` names it. A failed write (a full disk) removes the partial directory,
// keeps the previous checkpoints and `latest`, and throws naming the file.
void save_checkpoint(const std::string& run_dir, const nn::CausalLM& model,
                     const optim::Optimizer& opt, const TrainerState& state);
// The same from an optimizer state assembled elsewhere (ZeRO-1 gathers it from the ranks).
void save_checkpoint(const std::string& run_dir, const nn::CausalLM& model,
                     const std::string& optimizer_name, const optim::OptimizerState& opt_state,
                     const TrainerState& state);

// A run directory (its latest checkpoint) or a checkpoint directory -> the checkpoint
// directory; errors say what was looked for.
std::string resolve_checkpoint(const std::string& path);
// The checkpoint directory RUN_DIR/latest names, or "" when the run has saved none.
std::string latest_checkpoint(const std::string& run_dir);
// The run directory a checkpoint belongs to (its parent's parent), or `path` for a run dir.
std::string run_dir_of(const std::string& path);

// Reads and validates a checkpoint directory's trainer_state.json: a JSON object of format
// kTrainerStateFormat whose fields have their types and ranges (step, tokens_seen, data_step,
// skipped_steps <= step, global_batch: integers >= 0; world_size >= 1; seed an unsigned integer;
// best_val_loss, elapsed_s: finite numbers >= 0). Errors name the file and the field.
TrainerState load_trainer_state(const std::string& checkpoint_dir);
void load_optimizer(const std::string& checkpoint_dir, optim::Optimizer& opt);
// The saved optimizer state as it is (every parameter's); errors unless `optimizer_name` saved it.
optim::OptimizerState read_optimizer_state(const std::string& checkpoint_dir,
                                           const std::string& optimizer_name);

// Keeps the newest `keep` checkpoints of a run (0 keeps all), by step, and never deletes the one
// RUN_DIR/latest names.
void prune_checkpoints(const std::string& run_dir, int64_t keep);

// What in RUN_DIR shows that a run was there, described for a message ("latest (step-000600)",
// "checkpoints/", "metrics.jsonl"): the file `latest`, a non-empty checkpoints/ or a non-empty
// metrics.jsonl. Empty for a missing or fresh directory (config.yaml and prepared data/ alone
// are no run: a run that failed before its first step left nothing to lose).
std::vector<std::string> run_traces(const std::string& run_dir);

// Deletes a run for `gdn train --overwrite`: `latest` first (so a removal cut short never looks
// resumable), then checkpoints/, metrics.jsonl and config.yaml; data/ and anything else stays.
// Errors name the path that could not be removed.
void remove_run(const std::string& run_dir);

// Removes what writers interrupted in RUN_DIR left: `latest`, metrics.jsonl and config.yaml
// temporaries (NAME.tmp.PID of dead processes) and checkpoints/step-N.partial.PID (and .tmp, .old)
// directories. Called under the run's lock (src/io/run_lock.h), so no live writer owns them.
void remove_stale_temporaries(const std::string& run_dir);

}  // namespace gdn::train
