// Decay / no-decay parameter groups from parameter names (rules in param_groups.h).
#include "optim/param_groups.h"

#include <set>

namespace gdn::optim {

namespace {
bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

bool decays(const std::string& name, bool decay_embeddings) {
  if (contains(name, "norm")) return false;
  if (name == "bias" || ends_with(name, ".bias")) return false;
  if (contains(name, "A_log") || contains(name, "dt_bias")) return false;
  if (!decay_embeddings && contains(name, "embed")) return false;
  return true;
}

std::vector<ParamGroup> build_param_groups(const NamedParams& named, double weight_decay,
                                           bool decay_embeddings) {
  GDN_CHECK(weight_decay >= 0.0, "build_param_groups: weight_decay must be >= 0, got ",
            weight_decay);
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, p] : named) {
    GDN_CHECK(p.defined(), "build_param_groups: parameter '", name, "' is undefined");
    if (!p.requires_grad()) continue;
    if (!seen.insert(p.impl_ptr().get()).second) continue;
    ParamGroup& g = groups[decays(name, decay_embeddings) ? 0 : 1];
    g.names.push_back(name);
    g.params.push_back(p);
  }
  return groups;
}

}  // namespace gdn::optim
