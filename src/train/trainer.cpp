// The training loop.
//   step s (0-based): lr = schedule(s); grads = sum over grad_accum micro-batches of
//   d(loss_i / grad_accum); clip to train.clip_grad_norm; optimizer step; state.step = s + 1.
// A non-finite loss or gradient norm stops the run (no checkpoint is written) or skips the
// update (train.on_nonfinite: skip), never reaching the weights.
// Data-parallel (world_size > 1): each rank's micro-batches are its rows of the global batch;
// the GradReducer averages the gradients during the last backward of a step, so clipping and
// the update see the same gradients on every rank; losses and eval sums are averaged over
// ranks; rank 0 alone writes metrics and checkpoints.
#include "src/train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "kernels/trace_events.h"
#include "optim/clip.h"
#include "src/data/mqar.h"
#include "src/dist/communicator.h"
#include "src/dist/consistency.h"
#include "src/dist/grad_reducer.h"
#include "src/dist/zero.h"
#include "src/io/atomic_file.h"
#include "src/ops/ops.h"
#include "src/train/memory_profile.h"
#include "src/train/trace_file.h"

namespace gdn::train {

namespace {

// The first stopping signal this process received (0: none), and whether to acknowledge it on
// stderr; lock-free atomics, so the handler may touch them.
std::atomic<int> g_signal{0};
std::atomic<bool> g_announce{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) {
    static const char msg[] =
        "\ngdn: signal received: saving at the end of this step (send another to stop at once)\n";
    if (g_announce) {
      const ssize_t n = ::write(2, msg, sizeof msg - 1);  // async-signal-safe, unlike stdio
      (void)n;
    }
    return;
  }
  // A second signal: stop now (the last whole checkpoint stays; writes are atomic).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Routes SIGINT (Ctrl-C), SIGTERM and SIGHUP (what schedulers send before preemption or a
// closed terminal) and SIGUSR1 to on_stop_signal while alive; puts the previous handlers back.
// mpirun turns its own SIGINT/SIGTERM into SIGTERM + SIGKILL of the ranks but forwards SIGUSR1
// to every rank: `kill -USR1 <mpirun pid>` saves and stops a data-parallel run.
class StopSignalHandlers {
 public:
  StopSignalHandlers() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // system calls in flight (I/O, MPI) carry on
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &previous_[i]);
  }
  ~StopSignalHandlers() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopSignalHandlers(const StopSignalHandlers&) = delete;
  StopSignalHandlers& operator=(const StopSignalHandlers&) = delete;

 private:
  static constexpr std::array<int, 4> kSignals{SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  std::array<struct sigaction, 4> previous_{};
};

}  // namespace

int Trainer::rank() const {
  return comm_->rank();
}

int Trainer::world_size() const {
  return comm_->size();
}

void Trainer::check_same_parameters(const std::string& when) {
  dist::check_ranks_agree(
      *comm_, {{"parameter checksum", int64_t(dist::tensors_checksum(model_->parameters()))}},
      "The replicas' weights differ " + when + ".");
}

void Trainer::zero_grads() {
  if (reducer_)
    reducer_->zero_grads();  // grads are views into the all-reduce buckets
  else
    opt_->zero_grad(true);
}

void Trainer::step_optimizer() {
  opt_->step();
  if (opt_layout_) dist::broadcast_from_owners(*comm_, sharded_params_, owners_);
}

// The step's loss is the mean over every scored target of all micro-batches and ranks
// (accumulate_step_gradients weighs each micro-batch by its count of them).
double Trainer::train_step() {
  opt_->set_lr(schedule_.lr_at(state_.step));
  trace::Span zero_span("phase", "zero_grad");
  zero_grads();
  zero_span.end();
  std::vector<data::Batch> batches;
  std::vector<int64_t> scored;   // each micro-batch's scored targets
  std::vector<double> total{0};  // the step's, over every rank
  trace::Span data_span("phase", "data");
  for (int64_t m = 0; m < cfg_.train.grad_accum; ++m) {
    batches.push_back(data_->next());
    scored.push_back(scored_targets(batches.back()));
    total[0] += double(scored.back());
  }
  if (world_size() > 1) comm_->all_reduce_host(total);
  data_span.end();
  // With several ranks every backward must run (collectives), finite or not.
  double loss_sum =
      accumulate_step_gradients(*model_, batches, scored, device_, total[0], world_size(),
                                /*stop_at_nonfinite=*/!reducer_, [&] {
                                  if (reducer_) reducer_->arm();  // starts the all-reduces
                                });
  if (reducer_) reducer_->finish();
  state_.data_step = data_->position();
  if (world_size() > 1) {
    std::vector<double> v{loss_sum};  // each rank's share of the mean over every target
    comm_->all_reduce_host(v);
    loss_sum = v[0];
  }
  return loss_sum;
}

TrainerState Trainer::run() {
  GDN_CHECK(!options_.read_only, "Trainer::run on a read-only trainer");
  if (options_.profile_memory && rank() == 0) print_memory_profile();
  g_signal = 0;
  g_announce = rank() == 0 && !options_.quiet;
  stop_signal_ = 0;
  const StopSignalHandlers stop_signal_handlers;
  const int64_t tokens_per_step =
      cfg_.train.batch_size * cfg_.train.grad_accum * cfg_.data.seq_len * world_size();
  double run_start = now_s();
  const double elapsed_before = state_.elapsed_s;
  int64_t start_step = state_.step;
  while (state_.step < cfg_.train.steps) {
    trace_before_step(state_.step - start_step);
    trace::Span step_span("step", "step " + std::to_string(state_.step + 1));
    const double t0 = now_s();
    const int64_t allocs_before = memory_stats(device_).num_allocs;
    const double loss = train_step();
    trace::Span clip_span("phase", "clip");
    const double norm = clip_gradients();
    clip_span.end();
    trace::Span optimizer_span("phase", "optimizer");
    if (!std::isfinite(loss) || !std::isfinite(norm))
      skip_nonfinite_step(loss, norm);
    else
      step_optimizer();
    optimizer_span.end();
    state_.step++;
    state_.tokens_seen += tokens_per_step;
    const double dt = now_s() - t0;
    window_allocs_ += memory_stats(device_).num_allocs - allocs_before;
    state_.elapsed_s = elapsed_before + (now_s() - run_start);
    step_span.end();
    trace_after_step(dt, state_.step == cfg_.train.steps);
    if (std::isfinite(loss)) log_step(loss, norm, dt, tokens_per_step);
    // Sampled once per step (and agreed over ranks): every rank takes the same branches below.
    const int sig = agree_on_interrupt();
    const bool stop_now =
        options_.stop_after >= 0 && state_.step - start_step >= options_.stop_after;
    const bool last = state_.step == cfg_.train.steps;
    if (cfg_.train.eval_every > 0 && (state_.step % cfg_.train.eval_every == 0 || last)) log_eval();
    if ((cfg_.train.save_every > 0 && state_.step % cfg_.train.save_every == 0) || last || sig ||
        stop_now)
      save();
    if (sig) {
      stop_signal_ = sig;
      if (rank() == 0)
        std::fprintf(stderr, "\ngdn: %s: saved step %lld to %s; resume with --resume %s\n",
                     signal_name(sig), (long long)state_.step,
                     checkpoint_path(run_dir_, state_.step).c_str(), run_dir_.c_str());
      break;
    }
    if (stop_now) break;
  }
  g_announce = false;
  if (state_.step == start_step && state_.step >= cfg_.train.steps && !options_.quiet)
    std::fprintf(stderr, "gdn: already at step %lld of %lld: nothing to do\n",
                 (long long)state_.step, (long long)cfg_.train.steps);
  return state_;
}

// --trace: kTraceWarmup steps of this run untraced (the allocator's cache, the plans), then
// kTraceSteps traced, or what the run has left.
constexpr int64_t kTraceWarmup = 2, kTraceSteps = 3;

void Trainer::trace_before_step(int64_t steps_done) {
  if (options_.trace_path.empty() || trace_done_ || trace_first_step_ >= 0 || rank() != 0) return;
  const int64_t left = cfg_.train.steps - state_.step;
  if (steps_done < kTraceWarmup && left > kTraceSteps) return;
  trace_first_step_ = state_.step + 1;
  trace::begin_capture();
}

void Trainer::trace_after_step(double step_seconds, bool last) {
  if (trace_first_step_ < 0 || trace_done_) return;
  trace_seconds_ += step_seconds;
  if (++trace_steps_ < kTraceSteps && !last) return;
  trace_done_ = true;
  const std::vector<trace::Event> events = trace::end_capture();
  const TraceSummary s{trace_first_step_, trace_steps_, 1e3 * trace_seconds_};
  io::write_file_atomic(options_.trace_path, chrome_trace_json(events, s));
  std::fprintf(stderr, "gdn: traced steps %lld-%lld into %s (open it in ui.perfetto.dev):\n%s",
               (long long)s.first_step, (long long)(s.first_step + s.steps - 1),
               options_.trace_path.c_str(), trace_table(events, s).c_str());
}

void Trainer::print_memory_profile() const {
  // One step of this run's shapes on its device, before the real steps (freed after).
  MemoryProfile p = profile_training_step(cfg_, device_.str(), cfg_.train.batch_size,
                                          cfg_.data.seq_len, world_size());
  std::fprintf(stderr, "gdn: memory of one training step:\n%s", profile_table(p).c_str());
}

double Trainer::clip_gradients() {
  std::vector<Tensor> params = model_->parameters();
  last_grad_norm_ = cfg_.train.clip_grad_norm > 0
                        ? optim::clip_grad_norm(params, cfg_.train.clip_grad_norm)
                        : optim::grad_norm(params);
  return last_grad_norm_;
}

void Trainer::skip_nonfinite_step(double loss, double grad_norm) {
  const std::string what =
      str_cat("non-finite ", std::isfinite(loss) ? "gradient norm" : "loss", " at step ",
              state_.step + 1, " (loss ", loss, ", grad norm ", grad_norm, ")");
  if (cfg_.train.on_nonfinite == OnNonfinite::stop) {
    const std::string last = latest_checkpoint(run_dir_);
    GDN_FAIL(what, "; stopped without saving (train.on_nonfinite: stop). ",
             last.empty() ? str_cat("No checkpoint was saved before it (train.save_every ",
                                    cfg_.train.save_every, ")")
                          : str_cat("The last good checkpoint is ", last, " (gdn train --resume ",
                                    run_dir_, ")"),
             "; lower train.lr or set train.on_nonfinite: skip");
  }
  std::fprintf(stderr, "gdn: %s: skipping the update\n", what.c_str());
  zero_grads();
  state_.skipped_steps++;
  if (metrics_) metrics_->write({{"step", state_.step + 1}, {"skipped", true}, {"loss", nullptr}});
}

int Trainer::agree_on_interrupt() {
  const int mine = g_signal;
  if (world_size() == 1) return mine;
  // A signal that arrives after this exchange waits for the next step, on every rank alike.
  for (int64_t sig : comm_->all_gather_host({int64_t(mine)}))
    if (sig != 0) return int(sig);
  return 0;
}

void Trainer::log_step(double loss, double grad_norm, double step_seconds, int64_t step_tokens) {
  window_loss_ += loss;
  window_seconds_ += step_seconds;
  window_steps_ += 1;
  window_tokens_ += step_tokens;
  if (reducer_) {
    window_comm_s_ += reducer_->comm_seconds();
    window_wait_s_ += reducer_->wait_seconds();
  }
  if (state_.step % cfg_.train.log_every != 0 && state_.step != cfg_.train.steps) return;
  if (!metrics_) {  // ranks other than 0 log nothing
    reset_window();
    return;
  }
  const double mean_loss = window_loss_ / double(window_steps_);
  const double tps = window_seconds_ > 0 ? double(window_tokens_) / window_seconds_ : 0;
  const double mfu =
      peak_flops_ > 0 ? tps * flops_per_token_ / (peak_flops_ * double(world_size())) : 0;
  const double step_ms = 1e3 * window_seconds_ / double(window_steps_);
  const double of_gemm_bound = step_ms > 0 ? gemm_bound_ms_ / step_ms : 0;
  const MemoryStats mem = memory_stats(device_);
  const double eta =
      tps > 0 ? double(cfg_.train.steps - state_.step) * double(step_tokens) / tps : 0;
  metrics_->write({{"step", state_.step},
                   {"loss", mean_loss},
                   {"lr", opt_->lr()},
                   {"grad_norm", grad_norm},
                   {"tokens_per_s", tps},
                   {"tokens", state_.tokens_seen},
                   {"mfu", mfu},
                   {"step_ms", step_ms},
                   {"gemm_bound_ms", gemm_bound_ms_},
                   {"of_gemm_bound", of_gemm_bound},
                   {"mem_bytes", mem.total},
                   {"peak_mem_bytes", mem.peak},
                   {"allocs_per_step", double(window_allocs_) / double(window_steps_)},
                   {"elapsed_s", state_.elapsed_s}});
  if (reducer_)
    metrics_->write({{"step", state_.step},
                     {"world_size", world_size()},
                     {"allreduce_s", window_comm_s_ / double(window_steps_)},
                     {"allreduce_wait_s", window_wait_s_ / double(window_steps_)},
                     {"step_s", window_seconds_ / double(window_steps_)}});
  if (!options_.quiet)
    std::fprintf(stderr, "%s\n",
                 progress_line(state_.step, cfg_.train.steps, mean_loss, opt_->lr(), tps, mfu,
                               mem.total, eta, of_gemm_bound)
                     .c_str());
  reset_window();
}

void Trainer::reset_window() {
  window_loss_ = window_seconds_ = window_comm_s_ = window_wait_s_ = 0;
  window_steps_ = window_tokens_ = window_allocs_ = 0;
}

EvalStats Trainer::evaluate() {
  autograd::NoGradGuard no_grad;
  EvalStats s;
  data_->reset_eval();
  data::Batch b;
  double nats = 0, correct = 0;
  while (data_->next_eval(b)) {
    // Weight each batch by the positions it scores (targets other than -100).
    const int64_t n = scored_targets(b);
    if (n == 0) continue;
    if (data_->reports_accuracy()) {
      Tensor in = ops::to_device(b.inputs, device_), tgt = ops::to_device(b.targets, device_);
      Tensor logits = model_->logits(in);
      Tensor flat = ops::cast(ops::reshape(logits, {-1, cfg_.model.vocab_size}), DType::float32);
      nats += ops::cross_entropy(flat, ops::reshape(tgt, {-1}), -100).item() * double(n);
      correct += data::mqar_accuracy(logits, b.targets) * double(n);
    } else {
      nats += batch_loss(*model_, b, device_).item() * double(n);
    }
    s.tokens += n;
  }
  if (world_size() > 1) {
    // Rank r scored windows r, r + W, ...: together the windows of one process of batch W * B.
    std::vector<double> v{nats, correct, double(s.tokens)};
    comm_->all_reduce_host(v);
    nats = v[0];
    correct = v[1];
    s.tokens = int64_t(v[2]);
  }
  if (s.tokens == 0) return s;
  s.loss = nats / double(s.tokens);
  if (data_->reports_accuracy()) s.accuracy = correct / double(s.tokens);
  s.ppl = std::exp(s.loss);
  if (data_->bytes_per_token() > 0) s.bpb = s.loss / std::log(2.0) / data_->bytes_per_token();
  return s;
}

void Trainer::log_eval() {
  EvalStats e = evaluate();
  if (e.tokens == 0) return;
  if (state_.best_val_loss == 0 || e.loss < state_.best_val_loss) state_.best_val_loss = e.loss;
  nlohmann::json rec = {
      {"step", state_.step}, {"val_loss", e.loss}, {"val_ppl", e.ppl}, {"val_tokens", e.tokens}};
  if (e.bpb > 0) rec["val_bpb"] = e.bpb;
  if (!metrics_) return;  // rank 0 logs
  metrics_->write(rec);
  if (!options_.quiet)
    std::fprintf(stderr, "step %lld | val loss %.4f | ppl %.2f%s\n", (long long)state_.step, e.loss,
                 e.ppl, e.bpb > 0 ? str_cat(" | bpb ", e.bpb).c_str() : "");
}

void Trainer::save() {
  if (world_size() > 1) check_same_parameters(str_cat("at step ", state_.step));
  try {
    if (opt_layout_) {
      // ZeRO-1: the full state, gathered on rank 0: the same file as without sharding.
      const optim::OptimizerState full =
          dist::gather_optimizer_state(*comm_, *opt_, *opt_layout_, owners_);
      if (rank() == 0) save_checkpoint(run_dir_, *model_, opt_->name(), full, state_);
    } else if (rank() == 0) {
      save_checkpoint(run_dir_, *model_, *opt_, state_);
    }
  } catch (const std::exception& e) {
    GDN_FAIL("cannot save the checkpoint of step ", state_.step, " in ", run_dir_, ": ", e.what(),
             "; the run stopped (the checkpoints before it and 'latest' are kept)");
  }
  if (rank() == 0) prune_checkpoints(run_dir_, cfg_.train.keep_checkpoints);
  if (world_size() > 1) comm_->barrier();  // no rank reads a checkpoint before it is whole
}

}  // namespace gdn::train
