// The trainer: model, optimizer, schedule and data from a RunConfig; the training loop with
// gradient accumulation, clipping, non-finite detection, periodic validation, checkpoints
// (atomic, resumable exactly), metrics.jsonl and a progress line; SIGINT, SIGTERM, SIGHUP and
// SIGUSR1 save at the end of the step and stop. A run directory that holds a run is never
// started over unless asked (TrainerOptions::overwrite).
// Data-parallel under mpirun (README "Data-parallel training"): every rank runs this loop on
// its rows of the global batch; gradients are averaged by a dist::GradReducer during backward,
// rank 0 alone logs and writes checkpoints.
#pragma once
#include <memory>
#include <string>

#include "layers/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "src/train/checkpoint.h"
#include "src/train/data_source.h"
#include "src/train/metrics.h"
#include "src/train/run_config.h"

namespace gdn::io {
class RunLock;
}  // namespace gdn::io

namespace gdn::dist {
class Communicator;
class GradReducer;
}  // namespace gdn::dist

namespace gdn::train {

struct TrainerOptions {
  std::string resume;           // run dir or checkpoint dir; empty: fresh run
  bool overwrite = false;       // fresh run into a directory holding a run: delete that run first
  bool quiet = false;           // no progress lines on stderr
  bool profile_memory = false;  // print the memory profile of the first step
  bool read_only = false;       // eval/generate: touch nothing in the run directory
  int64_t stop_after = -1;      // stop (saving) after this many steps of this run: tests of resume
  // Chrome trace of a few steps after warm-up (src/train/trace_file.h), and its table on stderr.
  std::string trace_path;
  // The ranks to train over; null: from dist.backend when launched by mpirun, else one process.
  std::shared_ptr<dist::Communicator> comm;
};

class Trainer {
 public:
  Trainer(RunConfig cfg, TrainerOptions options = {});
  ~Trainer();
  // Trains to cfg.train.steps; returns the final state. A signal stops it after saving.
  TrainerState run();
  // The signal that stopped run() (SIGINT, SIGTERM, SIGHUP, SIGUSR1; with several ranks, the
  // one every rank agreed on), 0 when it was not stopped by one.
  int stop_signal() const { return stop_signal_; }
  // Validation over up to train.eval_batches batches.
  EvalStats evaluate();
  // One optimizer step (all micro-batches); returns the mean loss. Exposed for tests.
  double train_step();

  nn::CausalLM& model() { return *model_; }
  optim::Optimizer& optimizer() { return *opt_; }
  const RunConfig& config() const { return cfg_; }
  const TrainerState& state() const { return state_; }
  DataSource& data() { return *data_; }
  Device device() const { return device_; }
  const std::string& run_dir() const { return run_dir_; }
  dist::Communicator& comm() { return *comm_; }
  int rank() const;
  int world_size() const;

 private:
  // The construction steps, in the order the constructor takes them (trainer_setup.cpp).
  std::string resolve_run_dir();  // run_dir_ (locked); returns the checkpoint to resume ("": none)
  void lock_run_dir();            // lock_: this process owns run_dir_ (writers, rank 0)
  void connect_ranks();           // device_ and comm_: one GPU per local rank under mpirun
  void open_data();               // the run directory, then the data (rank 0 prepares it first)
  void build_model();             // fp32 master weights initialized from train.seed
  void build_optimizer();         // with ZeRO-1, this rank's shard; and the lr schedule
  void init_state(const std::string& checkpoint);  // fresh, or resumed from the checkpoint
  void start_from_model();                         // train.init_from
  // The checkpoint's model is this config's, its tokenizer the data's (else a named error).
  void check_resume_is_the_same_run(const std::string& checkpoint) const;
  void init_data_parallel();        // agreement checks, weights from rank 0, the gradient reducer
  void open_metrics(bool resumed);  // config.yaml, metrics.jsonl, the FLOP rates
  void print_banner() const;        // model, data, ranks and run dir on stderr

  void save();
  void log_step(double loss, double grad_norm, double step_seconds, int64_t step_tokens);
  void log_eval();
  void check_same_parameters(const std::string& when);
  void zero_grads();
  void step_optimizer();  // with ZeRO-1: this rank's shard, then every parameter from its owner
  // The steps of run().
  void print_memory_profile() const;                        // of one step of this run's shapes
  double clip_gradients();                                  // returns the norm before clipping
  void skip_nonfinite_step(double loss, double grad_norm);  // or fail (train.on_nonfinite)
  // The signal this step stops on: this process's, or with several ranks the first rank's that
  // got one, so every rank stops (and saves) at the same step. 0: go on.
  int agree_on_interrupt();
  void reset_window();
  // --trace: starts the capture at the right step of the run, ends it and writes the file.
  void trace_before_step(int64_t steps_done);
  void trace_after_step(double step_seconds, bool last);

  RunConfig cfg_;
  TrainerOptions options_;
  std::string run_dir_;
  std::unique_ptr<io::RunLock> lock_;  // held for the trainer's life (src/io/run_lock.h)
  Device device_;
  std::shared_ptr<dist::Communicator> comm_;
  std::unique_ptr<nn::CausalLM> model_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<dist::GradReducer> reducer_;  // world_size > 1
  // ZeRO-1: the unsharded optimizer on meta (state layout), the owner of each of its
  // parameters, and those parameters (the real ones, in the same order).
  std::unique_ptr<optim::Optimizer> opt_layout_;
  std::vector<int> owners_;
  std::vector<Tensor> sharded_params_;
  optim::LrSchedule schedule_;
  std::unique_ptr<DataSource> data_;
  std::unique_ptr<MetricsLog> metrics_;
  TrainerState state_;
  double flops_per_token_ = 0, peak_flops_ = 0;
  double gemm_bound_ms_ = 0;  // the step's GEMMs timed alone (src/train/gemm_bound.h); 0: unknown
  double last_grad_norm_ = 0;
  int stop_signal_ = 0;
  // Running window for the progress line.
  double window_loss_ = 0, window_seconds_ = 0;
  int64_t window_steps_ = 0, window_tokens_ = 0;
  int64_t window_allocs_ = 0;  // allocator calls by the window's steps (buffers not reused)
  double window_comm_s_ = 0, window_wait_s_ = 0;  // gradient all-reduce time (data-parallel)
  // --trace: the capture's first step (-1: not started) and the traced steps' time so far.
  int64_t trace_first_step_ = -1, trace_steps_ = 0;
  double trace_seconds_ = 0;
  bool trace_done_ = false;
};

}  // namespace gdn::train
