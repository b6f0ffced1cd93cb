// A custom training loop against the library API: a 2-layer Gated DeltaNet learns to copy
// random token sequences shifted by one (predict x[t] at position t + 2 from the past), with
// AdamW, a cosine schedule and clipping, then reports the loss and accuracy.
//   build/example_custom_loop [steps]
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "layers/model.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"
#include "src/ops/ops.h"

using namespace gdn;

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 200, batch = 8, seq = 32, vocab = 16;

  nn::ModelConfig cfg;  // fla's field names
  cfg.hidden_size = 64;
  cfg.num_hidden_layers = 2;
  cfg.num_heads = 2;
  cfg.head_dim = 32;
  cfg.expand_v = 1.0;
  cfg.vocab_size = vocab;
  cfg.kernel = gdr::Impl::fused;
  cfg.chunk_size = 16;

  Generator init(0), data(1);
  nn::InitContext ctx;
  ctx.gen = &init;
  nn::CausalLM model(cfg, ctx);
  std::printf("parameters: %lld\n", (long long)model.num_parameters());

  optim::AdamWOptions o;
  o.lr = 3e-3;
  optim::AdamW opt(optim::build_param_groups(model.named_parameters(), 0.01), o);
  optim::LrSchedule sched;
  sched.max_lr = o.lr;
  sched.min_lr = o.lr / 10;
  sched.warmup_steps = 20;
  sched.total_steps = steps;

  // Targets: the token two positions back (the first two positions are ignored, -100).
  auto make_batch = [&](Tensor& ids, Tensor& tgt) {
    ids = ops::randint({batch, seq}, 0, vocab, DType::int64, Device::cpu(), &data);
    auto v = ids.to_vector();
    std::vector<double> t(v.size(), -100);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 2; i < seq; ++i) t[size_t(b * seq + i)] = v[size_t(b * seq + i - 2)];
    tgt = ops::from_vector(t, {batch, seq}, DType::int64);
  };

  for (int64_t step = 0; step < steps; ++step) {
    Tensor ids, tgt;
    make_batch(ids, tgt);
    opt.set_lr(sched.lr_at(step));
    opt.zero_grad();
    Tensor loss = model.loss(ids, tgt);
    loss.backward();
    const double norm = optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    if (step % 20 == 0 || step == steps - 1)
      std::printf("step %4lld  loss %.4f  grad norm %.3f  lr %.2e\n", (long long)step, loss.item(),
                  norm, opt.lr());
  }

  // Accuracy of the copy on a fresh batch.
  autograd::NoGradGuard no_grad;
  Tensor ids, tgt;
  make_batch(ids, tgt);
  auto logits = model.logits(ids).to_vector();
  auto t = tgt.to_vector();
  int64_t right = 0, total = 0;
  for (size_t p = 0; p < t.size(); ++p) {
    if (t[p] < 0) continue;
    size_t best = 0;
    for (size_t j = 1; j < size_t(vocab); ++j)
      if (logits[p * size_t(vocab) + j] > logits[p * size_t(vocab) + best]) best = j;
    right += double(best) == t[p];
    ++total;
  }
  std::printf("copy accuracy: %.1f%%\n", 100.0 * double(right) / double(total));
  return 0;
}
