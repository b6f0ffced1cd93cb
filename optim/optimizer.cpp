// Optimizer base: parameter validation, state buffers and their accounting, step bookkeeping,
// state_dict / load_state_dict.
#include "optim/optimizer.h"

#include <set>

#include "src/core/allocator.h"
#include "src/ops/ops.h"

namespace gdn::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)) {
  set_lr(lr);
  std::set<std::string> names;
  std::set<const TensorImpl*> seen;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    GDN_CHECK(group.names.empty() || group.names.size() == group.params.size(), "param group ", g,
              " has ", group.names.size(), " names for ", group.params.size(), " parameters");
    GDN_CHECK(group.weight_decay >= 0.0, "param group ", g, ": weight_decay must be >= 0, got ",
              group.weight_decay);
    GDN_CHECK(group.lr_scale >= 0.0, "param group ", g, ": lr_scale must be >= 0, got ",
              group.lr_scale);
    if (group.names.empty())
      for (size_t i = 0; i < group.params.size(); ++i)
        group.names.push_back("group" + std::to_string(g) + "." + std::to_string(i));
    for (size_t i = 0; i < group.params.size(); ++i) {
      const std::string& name = group.names[i];
      const Tensor& p = group.params[i];
      GDN_CHECK(p.defined(), "parameter '", name, "' is an undefined tensor");
      GDN_CHECK(p.dtype() == DType::float32 || p.dtype() == DType::float64, "parameter '", name,
                "' has dtype ", dtype_name(p.dtype()),
                "; optimizers update float32 (master weights) or float64 parameters");
      GDN_CHECK(p.is_leaf(), "parameter '", name, "' is not a leaf tensor");
      GDN_CHECK(p.is_contiguous(), "parameter '", name, "' is not contiguous (shape ",
                shape_str(p.shape()), ", strides ", shape_str(p.strides()), ")");
      GDN_CHECK(names.insert(name).second, "parameter name '", name,
                "' appears more than once in the param groups");
      GDN_CHECK(seen.insert(p.impl_ptr().get()).second, "parameter '", name,
                "' is the same tensor as an earlier parameter (list tied weights once)");
      Slot slot;
      slot.name = name;
      slot.param = p;
      slot.group = g;
      slots_.push_back(std::move(slot));
    }
  }
}

void Optimizer::set_lr(double lr) {
  GDN_CHECK(lr >= 0.0, "learning rate must be >= 0, got ", lr);
  lr_ = lr;
}

int64_t Optimizer::num_params() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += s.param.numel();
  return n;
}

Tensor& Optimizer::add_state(Slot& slot, const std::string& key, DType dtype) {
  MemoryCategoryScope scope(MemCategory::optim);
  slot.state.emplace_back(key, ops::zeros(slot.param.shape(), dtype, slot.param.device()));
  return slot.state.back().second;
}

Tensor& Optimizer::state(Slot& slot, const std::string& key) {
  for (auto& [k, t] : slot.state)
    if (k == key) return t;
  GDN_FAIL(name(), ": parameter '", slot.name, "' has no state '", key, "'");
}

void Optimizer::step() {
  ++step_count_;
  std::vector<Update> updates;
  for (Slot& slot : slots_) {
    Tensor grad = slot.param.grad();
    if (!grad.defined()) continue;
    GDN_CHECK(grad.shape() == slot.param.shape(), name(), ": grad of '", slot.name, "' has shape ",
              shape_str(grad.shape()), ", the parameter ", shape_str(slot.param.shape()));
    GDN_CHECK(grad.dtype() == slot.param.dtype(), name(), ": grad of '", slot.name, "' has dtype ",
              dtype_name(grad.dtype()), ", the parameter ", dtype_name(slot.param.dtype()));
    GDN_CHECK(grad.device() == slot.param.device(), name(), ": grad of '", slot.name, "' is on ",
              grad.device().str(), ", the parameter on ", slot.param.device().str());
    if (!grad.is_contiguous()) {
      MemoryCategoryScope scope(MemCategory::temp);
      grad = ops::contiguous_copy(grad);
    }
    ++slot.step;
    const ParamGroup& group = groups_[slot.group];
    updates.push_back({&slot, grad, lr_ * group.lr_scale, group.weight_decay});
  }
  update_all(updates);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Slot& slot : slots_) {
    Tensor grad = slot.param.grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      slot.param.set_grad(Tensor());
    } else {
      ops::zero_(grad);
    }
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.scalars["step"] = double(step_count_);
  out.scalars["lr"] = lr_;
  for (const Slot& slot : slots_) {
    out.scalars[slot.name + ".step"] = double(slot.step);
    for (const auto& [key, t] : slot.state) out.tensors[slot.name + "." + key] = t;
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  auto scalar = [&](const std::string& key) {
    auto it = state.scalars.find(key);
    GDN_CHECK(it != state.scalars.end(), name(), " state: missing scalar '", key, "'");
    return it->second;
  };
  // Validate everything before changing anything, so a bad checkpoint leaves us untouched.
  std::set<std::string> known_tensors, known_scalars = {"step", "lr"};
  for (const Slot& slot : slots_) {
    known_scalars.insert(slot.name + ".step");
    for (const auto& [key, t] : slot.state) {
      const std::string full = slot.name + "." + key;
      known_tensors.insert(full);
      auto it = state.tensors.find(full);
      GDN_CHECK(it != state.tensors.end(), name(), " state: missing tensor '", full, "'");
      const Tensor& src = it->second;
      GDN_CHECK(src.defined(), name(), " state: tensor '", full, "' is undefined");
      GDN_CHECK(src.shape() == t.shape(), name(), " state: tensor '", full, "' has shape ",
                shape_str(src.shape()), ", expected ", shape_str(t.shape()));
      GDN_CHECK(src.dtype() == t.dtype(), name(), " state: tensor '", full, "' has dtype ",
                dtype_name(src.dtype()), ", expected ", dtype_name(t.dtype()));
    }
  }
  for (const auto& [key, t] : state.tensors)
    GDN_CHECK(known_tensors.count(key), name(), " state: unknown tensor '", key, "'");
  for (const auto& [key, v] : state.scalars)
    GDN_CHECK(known_scalars.count(key), name(), " state: unknown scalar '", key, "'");
  const double step = scalar("step");
  GDN_CHECK(step >= 0 && step == double(int64_t(step)), name(),
            " state: 'step' must be a non-negative integer, got ", step);
  for (const Slot& slot : slots_) {
    const double s = scalar(slot.name + ".step");
    GDN_CHECK(s >= 0 && s == double(int64_t(s)) && s <= step, name(), " state: '", slot.name,
              ".step' must be an integer in [0, step=", step, "], got ", s);
  }
  const double lr = scalar("lr");
  GDN_CHECK(lr >= 0.0, name(), " state: 'lr' must be >= 0, got ", lr);

  step_count_ = int64_t(step);
  lr_ = lr;
  for (Slot& slot : slots_) {
    slot.step = int64_t(scalar(slot.name + ".step"));
    for (auto& [key, t] : slot.state) ops::copy_(t, state.tensors.at(slot.name + "." + key));
  }
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const Slot& slot : slots_)
    for (const auto& [key, t] : slot.state) bytes += int64_t(t.nbytes());
  return bytes;
}

std::vector<Tensor> all_params(const std::vector<ParamGroup>& groups) {
  std::vector<Tensor> out;
  for (const ParamGroup& g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

}  // namespace gdn::optim
