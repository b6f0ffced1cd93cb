// Module: a node of the model tree with named parameters and submodules. Names are
// hierarchical ("model.layers.0.attn.q_proj.weight", fla's and Hugging Face's), parameters are
// leaf tensors allocated under MemCategory::param. Each module's forward runs inside a
// ScopeGuard of its name so autograd nodes (and memory reports) know which layer made them.
// InitContext says where and how modules create their parameters.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/trace_events.h"
#include "src/autograd/node.h"
#include "src/core/tensor.h"
#include "src/core/trace.h"
#include "src/ops/ops.h"

namespace gdn::nn {

using NamedTensor = std::pair<std::string, Tensor>;

struct InitContext {
  Device device = Device::cpu();
  DType dtype = DType::float32;  // parameter (master) dtype
  Generator* gen = nullptr;      // null: default generator
  double std = 0.02;             // initializer_range
};

// A new parameter tensor tagged `param` (uninitialised; the module fills it).
Tensor new_parameter(const Shape& shape, const InitContext& ctx);

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters of this module and all below it, in registration order, with full names.
  std::vector<NamedTensor> named_parameters(const std::string& prefix = "") const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  // The slot of a parameter by full name (to load weights into); null if absent.
  Tensor* find_parameter(const std::string& full_name);
  // This module and every module below it, parents first.
  std::vector<const Module*> modules() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  const std::string& name() const { return name_; }

 protected:
  // `slot` must live as long as the module (a member); the tensor becomes a leaf that
  // requires grad.
  void register_parameter(const std::string& name, Tensor* slot);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    m->name_ = name;
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) const;
  std::string name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Opens the module's name scope (and a profiler range, and a span of the trace named by the
// module's path) for the duration of a forward.
class ModuleScope {
 public:
  explicit ModuleScope(const Module& m)
      : guard_(m.name()), range_(m.name()), span_("module", autograd::current_scope()) {}

 private:
  autograd::ScopeGuard guard_;
  TraceRange range_;
  trace::Span span_;
};

}  // namespace gdn::nn
