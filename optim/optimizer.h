// Optimizer: the base of AdamW and SGD. It owns the parameter list (in groups with their own
// weight decay and lr scale), the per-parameter state buffers (allocated once, at construction,
// under MemCategory::optim, so memory reports see them before the first step), the step counts,
// and the state_dict / load_state_dict pair that lets the trainer checkpoint and resume
// bit-exactly. Subclasses add their buffers and implement one parameter's update.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::optim {

// Parameters sharing hyper-parameters. `names` are the parameters' model names (state_dict keys
// are built from them); when empty, "group{g}.{i}" is used. Each group's learning rate is
// lr() * lr_scale.
struct ParamGroup {
  std::vector<std::string> names;
  std::vector<Tensor> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;
};

// An optimizer's checkpointable state. `tensors` holds each parameter's buffers under
// "<param name>.<buffer>" (e.g. "model.norm.weight.exp_avg"); `scalars` holds "step" (calls of
// step()), "lr", and "<param name>.step" (updates that parameter received; it skips steps where
// its gradient was undefined, as torch does).
struct OptimizerState {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  // Validates every parameter: a floating (float32 or float64) contiguous leaf tensor,
  // appearing once across the groups, with a unique name.
  Optimizer(std::vector<ParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* name() const = 0;

  // One update of every parameter whose grad is defined (the others are skipped and their
  // per-parameter step count does not advance). Grads must match their parameter's shape, dtype
  // and device.
  void step();
  // Drops the grads (set_to_none) or zeroes them in place.
  void zero_grad(bool set_to_none = true);

  void set_lr(double lr);
  double lr() const { return lr_; }
  int64_t step_count() const { return step_count_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  int64_t num_params() const;  // elements over all parameters

  // The state: the tensors alias the live buffers (no copy), so write them out before the next
  // step() or copy them to keep a snapshot.
  OptimizerState state_dict() const;
  // Copies `state` into the buffers. Every key must be present with the same shape and dtype,
  // and no key may be unknown: errors name the key. Devices may differ (copied across).
  void load_state_dict(const OptimizerState& state);
  // Bytes of the state buffers (the MemCategory::optim bytes this optimizer holds).
  int64_t state_bytes() const;

 protected:
  // One parameter and its state.
  struct Slot {
    std::string name;
    Tensor param;
    size_t group = 0;
    int64_t step = 0;                                   // updates so far
    std::vector<std::pair<std::string, Tensor>> state;  // named buffers, e.g. "exp_avg"
  };

  // Adds a zero-filled buffer shaped like the slot's parameter, on its device, allocated under
  // MemCategory::optim. Subclasses call it from their constructor.
  Tensor& add_state(Slot& slot, const std::string& key, DType dtype);
  Tensor& state(Slot& slot, const std::string& key);

  // Updates one parameter in place. slot.step already counts this update (1 on the first);
  // `lr` is the group's (lr() * lr_scale), `grad` is contiguous and matches the parameter.
  virtual void update(Slot& slot, const Tensor& grad, double lr, double weight_decay) = 0;
  // A step's updates, checked and counted. update_all applies them; the default calls update()
  // for each, in order; a subclass may apply them together (AdamW: one pass on the CPU).
  struct Update {
    Slot* slot;
    Tensor grad;
    double lr, weight_decay;
  };
  virtual void update_all(std::vector<Update>& updates) {
    for (Update& u : updates) update(*u.slot, u.grad, u.lr, u.weight_decay);
  }

  std::vector<Slot>& slots() { return slots_; }

 private:
  std::vector<ParamGroup> groups_;
  std::vector<Slot> slots_;
  double lr_ = 0.0;
  int64_t step_count_ = 0;
};

// Every parameter of the groups, in group order.
std::vector<Tensor> all_params(const std::vector<ParamGroup>& groups);

}  // namespace gdn::optim
