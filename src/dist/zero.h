// ZeRO-1 (Rajbhandari et al., 2020, stage 1): the optimizer state is sharded across ranks.
// Every rank still gets the full averaged gradients (GradReducer) and clips them identically;
// each rank then updates only the parameters it owns, holding their optimizer state alone,
// and every parameter is broadcast from its owner. The update is elementwise, so the result is
// bit for bit the unsharded one. Checkpoints hold the full state (gathered on rank 0), so a
// run resumes with or without ZeRO-1 and with any world size.
#pragma once
#include <vector>

#include "optim/optimizer.h"
#include "src/dist/communicator.h"

namespace gdn::dist {

// The owner rank of each parameter (by element count): largest first, each to the rank with
// the fewest elements so far (ties: the lowest rank). Deterministic; balanced to within the
// largest parameter.
std::vector<int> assign_shards(const std::vector<int64_t>& numels, int world_size);

// The groups restricted to `rank`'s parameters (owners indexed in optim::all_params order);
// group hyper-parameters are kept, so a rank owning nothing has empty groups.
std::vector<optim::ParamGroup> shard_param_groups(const std::vector<optim::ParamGroup>& groups,
                                                  const std::vector<int>& owners, int rank);

// Shape-only (meta) copies of the groups' parameters: an optimizer built on them names every
// state key with its shape and dtype and allocates no memory.
std::vector<optim::ParamGroup> meta_param_groups(const std::vector<optim::ParamGroup>& groups);

// After each rank stepped its shard: params[i] from owners[i] to every rank.
void broadcast_from_owners(Communicator& comm, const std::vector<Tensor>& params,
                           const std::vector<int>& owners);

// The full state from the shards, complete on rank 0 (other ranks get an empty result).
// `layout` is the unsharded optimizer on meta (meta_param_groups), `owners` as above in the
// order of layout's parameters. Collective.
optim::OptimizerState gather_optimizer_state(Communicator& comm, const optim::Optimizer& local,
                                             const optim::Optimizer& layout,
                                             const std::vector<int>& owners);

// The entries of a full state that belong to `local`'s parameters (for load_state_dict).
optim::OptimizerState shard_optimizer_state(const optim::OptimizerState& full,
                                            const optim::Optimizer& local);

}  // namespace gdn::dist
