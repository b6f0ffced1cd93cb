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

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"
#include "src/data/mqar.h"
#include "src/dist/communicator.h"
#include "src/dist/consistency.h"
#include "src/dist/grad_reducer.h"
#include "src/dist/zero.h"
#include "src/ops/ops.h"
#include "src/train/flops.h"
#include "src/train/memory_profile.h"
#include "src/train/model_io.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/gemm.h"
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::train {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};
void on_sigint(int) {
  g_interrupted = true;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string device_name(Device d) {
#if defined(GDN_WITH_CUDA)
  if (d.is_cuda()) return cuda::device_name(d.index);
#endif
  return d.str();
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& t,
                                                 std::vector<optim::ParamGroup> groups) {
  if (t.optimizer == "adamw") {
    optim::AdamWOptions o;
    o.lr = t.lr;
    o.beta1 = t.betas[0];
    o.beta2 = t.betas[1];
    o.eps = t.eps;
    return std::make_unique<optim::AdamW>(std::move(groups), o);
  }
  optim::SgdOptions o;
  o.lr = t.lr;
  o.momentum = t.momentum;
  return std::make_unique<optim::Sgd>(std::move(groups), o);
}

}  // namespace

Trainer::Trainer(RunConfig cfg, TrainerOptions options)
    : cfg_(std::move(cfg)), options_(std::move(options)) {
  std::string ckpt;
  if (!options_.resume.empty()) {
    ckpt = resolve_checkpoint(options_.resume);
    run_dir_ = run_dir_of(options_.resume);
  } else {
    run_dir_ = cfg_.train.out_dir;
  }
  device_ = parse_device(cfg_.train.device);
  comm_ = options_.comm;
  if (!comm_) {
    const dist::LaunchInfo launch = dist::launch_info();
    // One process per GPU: "auto" and "cuda" take the device of the local rank.
    if (launch.world_size > 1 && device_.is_cuda()) {
      GDN_CHECK(cfg_.train.device == "auto" || cfg_.train.device == "cuda",
                "train.device: ", cfg_.train.device, " names one GPU for all ", launch.world_size,
                " ranks; use `cuda` (or `auto`) so each rank takes the GPU of its local rank");
      device_ = Device::cuda(launch.local_rank % cuda_device_count());
    }
    comm_ = dist::make_communicator(cfg_.dist.backend, device_, cfg_.dist.timeout_s);
  }
#if defined(GDN_WITH_CUDA)
  cuda::set_allow_tf32(cfg_.train.allow_tf32);
#endif
  const bool main_rank = rank() == 0;
  if (!main_rank) options_.quiet = true;  // rank 0 reports for the run
  if (!options_.read_only && main_rank) fs::create_directories(run_dir_);
  const DType compute = parse_dtype(cfg_.train.dtype);

  // Rank 0 prepares RUN_DIR/data when it is missing; the other ranks open it afterwards.
  if (main_rank) data_ = make_data_source(cfg_, run_dir_, 0, world_size());
  if (world_size() > 1) comm_->barrier();
  if (!main_rank) data_ = make_data_source(cfg_, run_dir_, rank(), world_size());
  GDN_CHECK(data_->vocab_size() <= cfg_.model.vocab_size, "the data uses ", data_->vocab_size(),
            " token ids but model.vocab_size is ", cfg_.model.vocab_size);

  Generator gen(uint64_t(cfg_.train.seed));
  nn::InitContext ctx;
  ctx.device = device_;
  ctx.dtype = DType::float32;  // fp32 master weights
  ctx.gen = &gen;
  model_ = std::make_unique<nn::CausalLM>(cfg_.model, ctx);
  model_->compute_dtype = compute;
  model_->checkpointing = cfg_.train.checkpointing;

  auto groups = optim::build_param_groups(model_->named_parameters(), cfg_.train.weight_decay,
                                          cfg_.train.decay_embeddings);
  if (cfg_.dist.zero1 && world_size() > 1) {
    // ZeRO-1: this rank's optimizer holds the state of the parameters it owns only.
    sharded_params_ = optim::all_params(groups);
    std::vector<int64_t> numels;
    for (const Tensor& p : sharded_params_) numels.push_back(p.numel());
    owners_ = dist::assign_shards(numels, world_size());
    opt_layout_ = make_optimizer(cfg_.train, dist::meta_param_groups(groups));
    groups = dist::shard_param_groups(groups, owners_, rank());
  }
  opt_ = make_optimizer(cfg_.train, groups);
  schedule_.kind = optim::parse_schedule(cfg_.train.schedule);
  schedule_.max_lr = cfg_.train.lr;
  schedule_.min_lr = cfg_.train.min_lr;
  schedule_.warmup_steps = cfg_.train.warmup_steps;
  schedule_.total_steps = cfg_.train.steps;
  schedule_.validate();

  state_.seed = uint64_t(cfg_.train.seed);
  if (!ckpt.empty()) {
    load_weights(ckpt, *model_);
    if (opt_layout_) {
      // The checkpoint holds every parameter's state: keep this rank's shard.
      const std::string path = (fs::path(ckpt) / "optimizer.safetensors").string();
      try {
        opt_->load_state_dict(
            dist::shard_optimizer_state(read_optimizer_state(ckpt, opt_->name()), *opt_));
      } catch (const Error& e) {
        GDN_FAIL(path, ": ", e.what());
      }
    } else {
      load_optimizer(ckpt, *opt_);
    }
    state_ = load_trainer_state(ckpt);
    // The data position is a global step: any world size continues from it; the rows match the
    // uninterrupted run's when the global batch is the same.
    data_->set_position(state_.data_step);
    const int64_t global_batch = cfg_.train.batch_size * world_size();
    if (!options_.quiet && state_.global_batch > 0 && state_.global_batch != global_batch)
      std::fprintf(stderr,
                   "gdn: note: the checkpoint's global batch was %lld rows (%lld ranks), now "
                   "%lld (%d ranks): the data continues with different rows than before\n",
                   (long long)state_.global_batch, (long long)state_.world_size,
                   (long long)global_batch, world_size());
    if (!options_.quiet)
      std::fprintf(stderr, "gdn: resumed from %s at step %lld\n", ckpt.c_str(),
                   (long long)state_.step);
  }
  state_.world_size = world_size();
  state_.global_batch = cfg_.train.batch_size * world_size();
  if (world_size() > 1) init_data_parallel();
  if (!options_.read_only && main_rank) {
    std::ofstream f(fs::path(run_dir_) / "config.yaml");
    f << cfg_.to_yaml();
    metrics_ = std::make_unique<MetricsLog>((fs::path(run_dir_) / "metrics.jsonl").string(),
                                            ckpt.empty() ? 0 : state_.step);
  }
  flops_per_token_ = train_flops_per_token(cfg_.model, cfg_.data.seq_len);
  peak_flops_ =
      device_peak_flops(device_name(device_), compute == DType::bfloat16, cfg_.train.allow_tf32);
  if (!options_.quiet) {
    std::fprintf(
        stderr, "gdn: model %s parameters (%lld layers, hidden %lld, kernel %s) on %s, %s\n",
        format_count(double(model_->num_parameters())).c_str(),
        (long long)cfg_.model.num_hidden_layers, (long long)cfg_.model.hidden_size,
        gdr::impl_name(cfg_.model.kernel), device_name(device_).c_str(), cfg_.train.dtype.c_str());
    std::fprintf(stderr, "gdn: data %s\n", data_->describe().c_str());
    if (world_size() > 1)
      std::fprintf(stderr,
                   "gdn: data-parallel over %d ranks (%s), global batch %lld, %zu gradient "
                   "bucket(s)%s\n",
                   world_size(), comm_->backend(), (long long)state_.global_batch,
                   reducer_->buckets().size(), opt_layout_ ? ", ZeRO-1" : "");
    std::fprintf(stderr, "gdn: run dir %s\n", run_dir_.c_str());
  }
}

Trainer::~Trainer() = default;

int Trainer::rank() const {
  return comm_->rank();
}

int Trainer::world_size() const {
  return comm_->size();
}

void Trainer::init_data_parallel() {
  // Disagreeing ranks would hang or silently train different models: fail on every rank.
  dist::check_ranks_agree(*comm_,
                          {{"config hash", int64_t(dist::hash_string(cfg_.to_yaml()))},
                           {"parameter count", model_->num_parameters()},
                           {"step", state_.step}},
                          "Start every rank with the same config, --set overrides and --resume.");
  // Rank 0's weights everywhere (init is seeded the same, but a replica must never drift).
  std::vector<std::unique_ptr<dist::Work>> works;
  for (const Tensor& p : model_->parameters()) works.push_back(comm_->broadcast_async(p, 0));
  for (auto& w : works) w->wait();
  check_same_parameters("after the initial broadcast");
  reducer_ = std::make_unique<dist::GradReducer>(model_->parameters(), comm_,
                                                 cfg_.dist.bucket_mb * (int64_t(1) << 20));
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

double Trainer::train_step() {
  opt_->set_lr(schedule_.lr_at(state_.step));
  zero_grads();
  double loss_sum = 0;
  const int64_t accum = cfg_.train.grad_accum;
  for (int64_t m = 0; m < accum; ++m) {
    data::Batch b = data_->next();
    Tensor in = ops::to_device(b.inputs, device_), tgt = ops::to_device(b.targets, device_);
    Tensor loss = model_->loss(in, tgt);
    const double lv = loss.item();
    loss_sum += lv;
    // No point continuing this step; with several ranks every backward must run (collectives).
    if (!std::isfinite(lv) && !reducer_) break;
    if (reducer_ && m == accum - 1) reducer_->arm();  // its hooks start the all-reduces
    ops::mul(loss, 1.0 / double(accum)).backward();
  }
  if (reducer_) reducer_->finish();
  state_.data_step = data_->position();
  if (world_size() > 1) {
    std::vector<double> v{loss_sum};  // the mean over every rank's tokens
    comm_->all_reduce_host(v);
    loss_sum = v[0] / double(world_size());
  }
  return loss_sum / double(accum);
}

TrainerState Trainer::run() {
  GDN_CHECK(!options_.read_only, "Trainer::run on a read-only trainer");
  if (options_.profile_memory && rank() == 0) {
    // One step of this run's shapes on its device, before the real steps (freed after).
    MemoryProfile p = profile_training_step(cfg_, device_.str(), cfg_.train.batch_size,
                                            cfg_.data.seq_len, world_size());
    std::fprintf(stderr, "gdn: memory of one training step:\n%s", profile_table(p).c_str());
  }
  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  // mpirun turns Ctrl-C into SIGTERM + SIGKILL but forwards SIGUSR1 to every rank: `kill -USR1
  // <mpirun pid>` saves and stops a data-parallel run (any run, in fact).
  auto previous_usr1 = std::signal(SIGUSR1, on_sigint);
  const int64_t tokens_per_step =
      cfg_.train.batch_size * cfg_.train.grad_accum * cfg_.data.seq_len * world_size();
  double run_start = now_s();
  const double elapsed_before = state_.elapsed_s;
  int64_t start_step = state_.step;
  while (state_.step < cfg_.train.steps) {
    const double t0 = now_s();
    const double loss = train_step();
    std::vector<Tensor> params = model_->parameters();
    const double norm = cfg_.train.clip_grad_norm > 0
                            ? optim::clip_grad_norm(params, cfg_.train.clip_grad_norm)
                            : optim::grad_norm(params);
    last_grad_norm_ = norm;
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      const std::string what =
          str_cat("non-finite ", std::isfinite(loss) ? "gradient norm" : "loss", " at step ",
                  state_.step + 1, " (loss ", loss, ", grad norm ", norm, ")");
      if (cfg_.train.on_nonfinite == "stop") {
        std::signal(SIGINT, previous);
        std::signal(SIGUSR1, previous_usr1);
        GDN_FAIL(what, "; stopped without saving (train.on_nonfinite: stop). The last good ",
                 "checkpoint is in ", run_dir_, "; lower train.lr or set train.on_nonfinite: skip");
      }
      std::fprintf(stderr, "gdn: %s: skipping the update\n", what.c_str());
      zero_grads();
      state_.skipped_steps++;
      if (metrics_)
        metrics_->write({{"step", state_.step + 1}, {"skipped", true}, {"loss", nullptr}});
    } else {
      step_optimizer();
    }
    state_.step++;
    state_.tokens_seen += tokens_per_step;
    const double dt = now_s() - t0;
    state_.elapsed_s = elapsed_before + (now_s() - run_start);
    if (std::isfinite(loss)) log_step(loss, norm, dt, tokens_per_step);
    if (world_size() > 1) {
      // Every rank stops at the same step when any of them was interrupted.
      std::vector<double> flag{g_interrupted ? 1.0 : 0.0};
      comm_->all_reduce_host(flag);
      if (flag[0] > 0) g_interrupted = true;
    }
    const bool stop_now =
        options_.stop_after >= 0 && state_.step - start_step >= options_.stop_after;
    const bool last = state_.step == cfg_.train.steps;
    if (cfg_.train.eval_every > 0 && (state_.step % cfg_.train.eval_every == 0 || last)) log_eval();
    if ((cfg_.train.save_every > 0 && state_.step % cfg_.train.save_every == 0) || last ||
        g_interrupted || stop_now)
      save();
    if (stop_now) break;
    if (g_interrupted) {
      if (rank() == 0)
        std::fprintf(stderr, "\ngdn: interrupted: saved step %lld to %s; resume with --resume %s\n",
                     (long long)state_.step, checkpoint_path(run_dir_, state_.step).c_str(),
                     run_dir_.c_str());
      break;
    }
  }
  if (state_.step == start_step && state_.step >= cfg_.train.steps && !options_.quiet)
    std::fprintf(stderr, "gdn: already at step %lld of %lld: nothing to do\n",
                 (long long)state_.step, (long long)cfg_.train.steps);
  std::signal(SIGINT, previous);
  std::signal(SIGUSR1, previous_usr1);
  return state_;
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
    window_loss_ = window_seconds_ = window_comm_s_ = window_wait_s_ = 0;
    window_steps_ = window_tokens_ = 0;
    return;
  }
  const double mean_loss = window_loss_ / double(window_steps_);
  const double tps = window_seconds_ > 0 ? double(window_tokens_) / window_seconds_ : 0;
  const double mfu =
      peak_flops_ > 0 ? tps * flops_per_token_ / (peak_flops_ * double(world_size())) : 0;
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
                   {"mem_bytes", mem.total},
                   {"peak_mem_bytes", mem.peak},
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
                               mem.total, eta)
                     .c_str());
  window_loss_ = window_seconds_ = window_comm_s_ = window_wait_s_ = 0;
  window_steps_ = window_tokens_ = 0;
}

EvalStats Trainer::evaluate() {
  autograd::NoGradGuard no_grad;
  EvalStats s;
  data_->reset_eval();
  data::Batch b;
  double nats = 0, correct = 0;
  while (data_->next_eval(b)) {
    Tensor in = ops::to_device(b.inputs, device_), tgt = ops::to_device(b.targets, device_);
    // Weight each batch by the positions it scores (targets other than -100).
    int64_t n = 0;
    for (double t : b.targets.to_vector()) n += t != -100;
    if (n == 0) continue;
    if (data_->reports_accuracy()) {
      Tensor logits = model_->logits(in);
      Tensor flat = ops::cast(ops::reshape(logits, {-1, cfg_.model.vocab_size}), DType::float32);
      nats += ops::cross_entropy(flat, ops::reshape(tgt, {-1}), -100).item() * double(n);
      correct += data::mqar_accuracy(logits, b.targets) * double(n);
    } else {
      nats += model_->loss(in, tgt).item() * double(n);
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
  if (opt_layout_) {
    // ZeRO-1: the full state, gathered on rank 0: the same file as without sharding.
    const optim::OptimizerState full =
        dist::gather_optimizer_state(*comm_, *opt_, *opt_layout_, owners_);
    if (rank() == 0) save_checkpoint(run_dir_, *model_, opt_->name(), full, state_);
  } else if (rank() == 0) {
    save_checkpoint(run_dir_, *model_, *opt_, state_);
  }
  if (rank() == 0) prune_checkpoints(run_dir_, cfg_.train.keep_checkpoints);
  if (world_size() > 1) comm_->barrier();  // no rank reads a checkpoint before it is whole
}

}  // namespace gdn::train
