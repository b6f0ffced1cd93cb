// The training loop.
//   step s (0-based): lr = schedule(s); grads = sum over grad_accum micro-batches of
//   d(loss_i / grad_accum); clip to train.clip_grad_norm; optimizer step; state.step = s + 1.
// A non-finite loss or gradient norm stops the run (no checkpoint is written) or skips the
// update (train.on_nonfinite: skip), never reaching the weights.
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
#include "src/ops/ops.h"
#include "src/train/flops.h"
#include "src/train/memory_profile.h"
#include "src/train/model_io.h"
#if defined(GDN_WITH_CUDA)
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
  if (!options_.read_only) fs::create_directories(run_dir_);
  device_ = parse_device(cfg_.train.device);
  const DType compute = parse_dtype(cfg_.train.dtype);

  data_ = make_data_source(cfg_, run_dir_);
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
  if (cfg_.train.optimizer == "adamw") {
    optim::AdamWOptions o;
    o.lr = cfg_.train.lr;
    o.beta1 = cfg_.train.betas[0];
    o.beta2 = cfg_.train.betas[1];
    o.eps = cfg_.train.eps;
    opt_ = std::make_unique<optim::AdamW>(groups, o);
  } else {
    optim::SgdOptions o;
    o.lr = cfg_.train.lr;
    o.momentum = cfg_.train.momentum;
    opt_ = std::make_unique<optim::Sgd>(groups, o);
  }
  schedule_.kind = optim::parse_schedule(cfg_.train.schedule);
  schedule_.max_lr = cfg_.train.lr;
  schedule_.min_lr = cfg_.train.min_lr;
  schedule_.warmup_steps = cfg_.train.warmup_steps;
  schedule_.total_steps = cfg_.train.steps;
  schedule_.validate();

  state_.seed = uint64_t(cfg_.train.seed);
  if (!ckpt.empty()) {
    load_weights(ckpt, *model_);
    load_optimizer(ckpt, *opt_);
    state_ = load_trainer_state(ckpt);
    data_->set_position(state_.data_step);
    if (!options_.quiet)
      std::fprintf(stderr, "gdn: resumed from %s at step %lld\n", ckpt.c_str(),
                   (long long)state_.step);
  }
  if (!options_.read_only) {
    std::ofstream f(fs::path(run_dir_) / "config.yaml");
    f << cfg_.to_yaml();
    metrics_ = std::make_unique<MetricsLog>((fs::path(run_dir_) / "metrics.jsonl").string(),
                                            ckpt.empty() ? 0 : state_.step);
  }
  flops_per_token_ = train_flops_per_token(cfg_.model, cfg_.data.seq_len);
  peak_flops_ = device_peak_flops(device_name(device_), compute == DType::bfloat16);
  if (!options_.quiet) {
    std::fprintf(stderr,
                 "gdn: model %s parameters (%lld layers, hidden %lld, kernel %s) on %s, %s\n",
                 format_count(double(model_->num_parameters())).c_str(),
                 (long long)cfg_.model.num_hidden_layers, (long long)cfg_.model.hidden_size,
                 cfg_.model.kernel.c_str(), device_name(device_).c_str(), cfg_.train.dtype.c_str());
    std::fprintf(stderr, "gdn: data %s\n", data_->describe().c_str());
    std::fprintf(stderr, "gdn: run dir %s\n", run_dir_.c_str());
  }
}

Trainer::~Trainer() = default;

double Trainer::train_step() {
  opt_->set_lr(schedule_.lr_at(state_.step));
  opt_->zero_grad(true);
  double loss_sum = 0;
  const int64_t accum = cfg_.train.grad_accum;
  for (int64_t m = 0; m < accum; ++m) {
    data::Batch b = data_->next();
    Tensor in = ops::to_device(b.inputs, device_), tgt = ops::to_device(b.targets, device_);
    Tensor loss = model_->loss(in, tgt);
    const double lv = loss.item();
    loss_sum += lv;
    if (!std::isfinite(lv)) break;  // no point continuing this step
    ops::mul(loss, 1.0 / double(accum)).backward();
  }
  state_.data_step = data_->position();
  return loss_sum / double(accum);
}

TrainerState Trainer::run() {
  GDN_CHECK(metrics_, "Trainer::run on a read-only trainer");
  if (options_.profile_memory) {
    // One step of this run's shapes on its device, before the real steps (freed after).
    MemoryProfile p =
        profile_training_step(cfg_, device_.str(), cfg_.train.batch_size, cfg_.data.seq_len);
    std::fprintf(stderr, "gdn: memory of one training step:\n%s", profile_table(p).c_str());
  }
  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  const int64_t tokens_per_step = cfg_.train.batch_size * cfg_.train.grad_accum * cfg_.data.seq_len;
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
        GDN_FAIL(what, "; stopped without saving (train.on_nonfinite: stop). The last good ",
                 "checkpoint is in ", run_dir_, "; lower train.lr or set train.on_nonfinite: skip");
      }
      std::fprintf(stderr, "gdn: %s: skipping the update\n", what.c_str());
      opt_->zero_grad(true);
      state_.skipped_steps++;
      metrics_->write({{"step", state_.step + 1}, {"skipped", true}, {"loss", nullptr}});
    } else {
      opt_->step();
    }
    state_.step++;
    state_.tokens_seen += tokens_per_step;
    const double dt = now_s() - t0;
    state_.elapsed_s = elapsed_before + (now_s() - run_start);
    if (std::isfinite(loss)) log_step(loss, norm, dt, tokens_per_step);
    const bool stop_now =
        options_.stop_after >= 0 && state_.step - start_step >= options_.stop_after;
    const bool last = state_.step == cfg_.train.steps;
    if (cfg_.train.eval_every > 0 && (state_.step % cfg_.train.eval_every == 0 || last)) log_eval();
    if ((cfg_.train.save_every > 0 && state_.step % cfg_.train.save_every == 0) || last ||
        g_interrupted || stop_now)
      save();
    if (stop_now) break;
    if (g_interrupted) {
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
  return state_;
}

void Trainer::log_step(double loss, double grad_norm, double step_seconds, int64_t step_tokens) {
  window_loss_ += loss;
  window_seconds_ += step_seconds;
  window_steps_ += 1;
  window_tokens_ += step_tokens;
  if (state_.step % cfg_.train.log_every != 0 && state_.step != cfg_.train.steps) return;
  const double mean_loss = window_loss_ / double(window_steps_);
  const double tps = window_seconds_ > 0 ? double(window_tokens_) / window_seconds_ : 0;
  const double mfu = peak_flops_ > 0 ? tps * flops_per_token_ / peak_flops_ : 0;
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
  if (!options_.quiet)
    std::fprintf(stderr, "%s\n",
                 progress_line(state_.step, cfg_.train.steps, mean_loss, opt_->lr(), tps, mfu,
                               mem.total, eta)
                     .c_str());
  window_loss_ = window_seconds_ = 0;
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
  metrics_->write(rec);
  if (!options_.quiet)
    std::fprintf(stderr, "step %lld | val loss %.4f | ppl %.2f%s\n", (long long)state_.step, e.loss,
                 e.ppl, e.bpb > 0 ? str_cat(" | bpb ", e.bpb).c_str() : "");
}

void Trainer::save() {
  save_checkpoint(run_dir_, *model_, *opt_, state_);
  prune_checkpoints(run_dir_, cfg_.train.keep_checkpoints);
}

}  // namespace gdn::train
