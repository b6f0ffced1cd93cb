// The model and optimizer of a run, built as the trainer builds them. The memory profile builds
// them here too, so it measures what a step of the trainer allocates (src/train/memory_profile.h).
#pragma once
#include <memory>
#include <vector>

#include "layers/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "src/train/run_config.h"

namespace gdn::train {

// fp32 master weights on `device`, initialised from train.seed, with the run's compute dtype
// (train.dtype) and checkpointing.
std::unique_ptr<nn::CausalLM> build_run_model(const RunConfig& cfg, Device device);

// The run's optimizer (train.optimizer and its keys) over the model's parameter groups
// (train.weight_decay, decay_embeddings). With ZeRO-1 over several ranks: the shard of `rank`,
// the layout of the whole (the unsharded optimizer on meta), each parameter's owner and the
// parameters in the layout's order. `layout`: build the layout (the memory profile, which stands
// for one rank, leaves it out: on meta it would count as that rank's memory).
struct RunOptimizer {
  std::unique_ptr<optim::Optimizer> opt, layout;
  std::vector<int> owners;
  std::vector<Tensor> sharded_params;
};
RunOptimizer build_run_optimizer(const RunConfig& cfg, const nn::CausalLM& model, int world_size,
                                 int rank, bool layout = true);

// The learning-rate schedule of train.*.
optim::LrSchedule make_schedule(const TrainConfig& t);

}  // namespace gdn::train
