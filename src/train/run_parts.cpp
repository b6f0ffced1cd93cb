#include "src/train/run_parts.h"

#include "optim/adamw.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"
#include "src/dist/zero.h"

namespace gdn::train {

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& t,
                                                 std::vector<optim::ParamGroup> groups) {
  if (t.optimizer == OptimizerKind::adamw) {
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

std::unique_ptr<nn::CausalLM> build_run_model(const RunConfig& cfg, Device device) {
  Generator gen(uint64_t(cfg.train.seed));
  nn::InitContext ctx;
  ctx.device = device;
  ctx.dtype = DType::float32;  // fp32 master weights
  ctx.gen = &gen;
  auto model = std::make_unique<nn::CausalLM>(cfg.model, ctx);
  model->compute_dtype = cfg.train.dtype;
  model->checkpointing = cfg.train.checkpointing;
  return model;
}

RunOptimizer build_run_optimizer(const RunConfig& cfg, const nn::CausalLM& model, int world_size,
                                 int rank, bool layout) {
  RunOptimizer r;
  auto groups = optim::build_param_groups(model.named_parameters(), cfg.train.weight_decay,
                                          cfg.train.decay_embeddings);
  if (cfg.dist.zero1 && world_size > 1) {
    // ZeRO-1: this rank's optimizer holds the state of the parameters it owns only.
    r.sharded_params = optim::all_params(groups);
    std::vector<int64_t> numels;
    for (const Tensor& p : r.sharded_params) numels.push_back(p.numel());
    r.owners = dist::assign_shards(numels, world_size);
    if (layout) r.layout = make_optimizer(cfg.train, dist::meta_param_groups(groups));
    groups = dist::shard_param_groups(groups, r.owners, rank);
  }
  r.opt = make_optimizer(cfg.train, groups);
  return r;
}

optim::LrSchedule make_schedule(const TrainConfig& t) {
  optim::LrSchedule s;
  s.kind = t.schedule;
  s.max_lr = t.lr;
  s.min_lr = t.min_lr;
  s.warmup_steps = t.warmup_steps;
  s.total_steps = t.steps;
  s.validate();
  return s;
}

}  // namespace gdn::train
