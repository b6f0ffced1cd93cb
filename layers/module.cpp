// Module tree bookkeeping and parameter creation.
#include "layers/module.h"

namespace gdn::nn {

Tensor new_parameter(const Shape& shape, const InitContext& ctx) {
  MemoryCategoryScope cat(MemCategory::param);
  return ops::empty(shape, ctx.dtype, ctx.device);
}

void Module::register_parameter(const std::string& name, Tensor* slot) {
  GDN_CHECK(slot && slot->defined(), "register_parameter('", name, "') with no tensor");
  for (const auto& [n, p] : params_)
    GDN_CHECK(n != name, "parameter '", name, "' registered twice");
  slot->set_requires_grad(true);
  params_.emplace_back(name, slot);
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, Tensor*>>& out) const {
  for (const auto& [n, p] : params_) out.emplace_back(prefix.empty() ? n : prefix + "." + n, p);
  for (const auto& [n, m] : children_) m->collect(prefix.empty() ? n : prefix + "." + n, out);
}

std::vector<NamedTensor> Module::named_parameters(const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect(prefix, slots);
  std::vector<NamedTensor> out;
  out.reserve(slots.size());
  for (auto& [n, p] : slots) out.emplace_back(n, *p);
  return out;
}

std::vector<const Module*> Module::modules() const {
  std::vector<const Module*> out{this};
  for (const auto& [n, m] : children_)
    for (const Module* below : m->modules()) out.push_back(below);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

Tensor* Module::find_parameter(const std::string& full_name) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots);
  for (auto& [n, p] : slots)
    if (n == full_name) return p;
  return nullptr;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

}  // namespace gdn::nn
