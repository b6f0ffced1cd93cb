// Where the trainer's batches come from: token shards (prepared on first use from text files,
// or the default corpus, into RUN_DIR/data) or the synthetic MQAR task. Both give batches
// that are a pure function of (seed, rank, step), so resuming replays exactly; with W ranks of
// batch B, rank r gets rows [r * B, (r + 1) * B) of the one-process batch of W * B rows.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/model.h"
#include "src/data/loader.h"
#include "src/data/tokenizer.h"
#include "src/train/run_config.h"

namespace gdn::train {

struct EvalStats {
  double loss = 0;       // mean nats per predicted token
  double ppl = 0;        // exp(loss)
  double bpb = 0;        // bits per byte (text; 0 when unknown)
  double accuracy = -1;  // MQAR recall accuracy (-1 when not applicable)
  int64_t tokens = 0;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual data::Batch next() = 0;
  virtual int64_t position() const = 0;  // the next training batch index
  virtual void set_position(int64_t step) = 0;
  // Validation batches in a fixed order (restart each call); false when done.
  virtual void reset_eval() = 0;
  virtual bool next_eval(data::Batch& b) = 0;
  virtual double bytes_per_token() const { return 0; }  // val split, for bits per byte
  virtual int64_t vocab_size() const = 0;               // tokens the data uses
  virtual const data::Tokenizer* tokenizer() const { return nullptr; }
  // Whether the loss scores only flagged targets (prompt/completion data: the completions).
  virtual bool loss_masked() const { return false; }
  // Whether validation reports recall accuracy (MQAR) besides the loss.
  virtual bool reports_accuracy() const { return false; }
  virtual std::string describe() const = 0;
  // How the training rows are made: "documents", "stream" or "synthetic" (trainer_state.json).
  virtual std::string packing() const = 0;
};

// Builds the data of a run: shards in data.dir, or prepared into RUN_DIR/data from
// data.inputs (or the default corpus) when data.dir is empty; or MQAR for data.task = mqar.
std::unique_ptr<DataSource> make_data_source(const RunConfig& cfg, const std::string& run_dir,
                                             int rank = 0, int world_size = 1);

// Targets a batch scores (not -100): packing masks a varying number per row.
int64_t scored_targets(const data::Batch& b);

// The mean loss of a batch over its scored targets; packed rows (Batch::cu_seqlens) run as one
// row of B * T with their boundaries (fla's layout: the kernels take cu_seqlens with B = 1).
Tensor batch_loss(const nn::CausalLM& model, const data::Batch& b, Device device);

// Forward and backward of one step's micro-batches: micro-batch m's mean loss is scaled by
// n_m * W / N (n_m = scored[m] its scored targets, scored_targets(batches[m]) counted once by the
// caller; N = scored_total those of the whole step over all W ranks,
// W as the gradient reducer averages over ranks), so the gradients sum to those of the mean loss
// over every scored target of the step, as if the unscored ones were absent (unmasked, every n_m
// is equal and the scale is 1 / grad_accum). before_last_backward runs just before the last
// backward. Returns this rank's share of the step's mean loss; with stop_at_nonfinite it stops
// at the first non-finite loss (the step is skipped anyway).
double accumulate_step_gradients(const nn::CausalLM& model, const std::vector<data::Batch>& batches,
                                 const std::vector<int64_t>& scored, Device device,
                                 double scored_total, int world_size, bool stop_at_nonfinite,
                                 const std::function<void()>& before_last_backward = {});

// The data directory a run uses (data.dir, or RUN_DIR/data).
std::string data_dir_of(const RunConfig& cfg, const std::string& run_dir);

}  // namespace gdn::train
