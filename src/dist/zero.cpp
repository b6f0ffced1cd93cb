// ZeRO-1 helpers: shard assignment, sharded param groups, owner broadcasts, and the gather /
// scatter of optimizer state for checkpoints.
#include "src/dist/zero.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace gdn::dist {

namespace {

// "model.norm.weight.exp_avg" -> "model.norm.weight" (buffer names hold no dots).
std::string param_of_key(const std::string& key) {
  const size_t dot = key.rfind('.');
  GDN_CHECK(dot != std::string::npos, "optimizer state key '", key, "' has no parameter name");
  return key.substr(0, dot);
}

std::vector<std::string> all_names(const std::vector<optim::ParamGroup>& groups) {
  std::vector<std::string> out;
  for (const auto& g : groups) out.insert(out.end(), g.names.begin(), g.names.end());
  return out;
}

}  // namespace

std::vector<int> assign_shards(const std::vector<int64_t>& numels, int world_size) {
  GDN_CHECK(world_size >= 1, "assign_shards: world_size must be >= 1, got ", world_size);
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t(0));
  // Largest first; equal sizes keep their order (stable), so the result is deterministic.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<int64_t> load(size_t(world_size), 0);
  std::vector<int> owner(numels.size(), 0);
  for (size_t i : order) {
    const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[size_t(r)] += numels[i];
  }
  return owner;
}

std::vector<optim::ParamGroup> shard_param_groups(const std::vector<optim::ParamGroup>& groups,
                                                  const std::vector<int>& owners, int rank) {
  std::vector<optim::ParamGroup> out;
  size_t k = 0;
  for (const auto& g : groups) {
    GDN_CHECK(g.names.size() == g.params.size(),
              "shard_param_groups: every parameter needs a name (state keys are built from it)");
    optim::ParamGroup s;
    s.weight_decay = g.weight_decay;
    s.lr_scale = g.lr_scale;
    for (size_t i = 0; i < g.params.size(); ++i, ++k) {
      GDN_CHECK(k < owners.size(), "shard_param_groups: ", owners.size(),
                " owners for more parameters");
      if (owners[k] != rank) continue;
      s.names.push_back(g.names[i]);
      s.params.push_back(g.params[i]);
    }
    out.push_back(std::move(s));
  }
  GDN_CHECK(k == owners.size(), "shard_param_groups: ", owners.size(), " owners for ", k,
            " parameters");
  return out;
}

std::vector<optim::ParamGroup> meta_param_groups(const std::vector<optim::ParamGroup>& groups) {
  std::vector<optim::ParamGroup> out = groups;
  for (auto& g : out)
    for (auto& p : g.params) p = Tensor::empty(p.shape(), p.dtype(), Device::meta());
  return out;
}

void broadcast_from_owners(Communicator& comm, const std::vector<Tensor>& params,
                           const std::vector<int>& owners) {
  GDN_CHECK(params.size() == owners.size(), "broadcast_from_owners: ", params.size(),
            " parameters but ", owners.size(), " owners");
  if (comm.size() == 1) return;
  std::vector<std::unique_ptr<Work>> works;
  for (size_t i = 0; i < params.size(); ++i)
    works.push_back(comm.broadcast_async(params[i], owners[i]));
  for (auto& w : works) w->wait();
}

optim::OptimizerState gather_optimizer_state(Communicator& comm, const optim::Optimizer& local,
                                             const optim::Optimizer& layout,
                                             const std::vector<int>& owners) {
  const std::vector<std::string> names = all_names(layout.param_groups());
  GDN_CHECK(names.size() == owners.size(), "gather_optimizer_state: ", names.size(),
            " parameters but ", owners.size(), " owners");
  std::map<std::string, int> owner_of;
  for (size_t i = 0; i < names.size(); ++i) owner_of[names[i]] = owners[i];
  const optim::OptimizerState mine = local.state_dict(), full = layout.state_dict();
  optim::OptimizerState out;
  const bool root = comm.rank() == 0;
  // Tensors: one broadcast per key from its owner, in the (sorted) key order every rank shares.
  for (const auto& [key, shape_only] : full.tensors) {
    const int owner = owner_of.at(param_of_key(key));
    Tensor buf;
    if (owner == comm.rank()) {
      auto it = mine.tensors.find(key);
      GDN_CHECK(it != mine.tensors.end(), "gather_optimizer_state: rank ", comm.rank(), " owns '",
                key, "' but holds no such state");
      buf = it->second;
    } else {
      buf = Tensor::empty(shape_only.shape(), shape_only.dtype(), comm.device());
    }
    comm.broadcast(buf, owner);
    if (root) out.tensors[key] = buf;
  }
  // Per-parameter update counts: each owner contributes its own, the sum is the full list.
  std::vector<double> steps(names.size(), 0.0);
  for (size_t i = 0; i < names.size(); ++i)
    if (owners[i] == comm.rank()) steps[i] = mine.scalars.at(names[i] + ".step");
  comm.all_reduce_host(steps);
  if (root) {
    out.scalars["step"] = mine.scalars.at("step");
    out.scalars["lr"] = mine.scalars.at("lr");
    for (size_t i = 0; i < names.size(); ++i) out.scalars[names[i] + ".step"] = steps[i];
  }
  return out;
}

optim::OptimizerState shard_optimizer_state(const optim::OptimizerState& full,
                                            const optim::Optimizer& local) {
  const std::vector<std::string> names = all_names(local.param_groups());
  const std::set<std::string> mine(names.begin(), names.end());
  optim::OptimizerState out;
  for (const auto& [key, t] : full.tensors)
    if (mine.count(param_of_key(key))) out.tensors[key] = t;
  for (const auto& [key, v] : full.scalars)
    if (key == "step" || key == "lr" || mine.count(param_of_key(key))) out.scalars[key] = v;
  return out;
}

}  // namespace gdn::dist
