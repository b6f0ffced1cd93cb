// Gradient-ready hooks: a callback per leaf tensor, run by the backward engine once per
// backward pass when every use of that leaf in the pass has delivered its gradient, i.e. when
// leaf.grad is final for the pass. Data-parallel training starts all-reducing a bucket of
// gradients from here while the rest of the backward still runs.
//
// The engine counts, per leaf, the graph edges that point at it; when the last of them has been
// processed (its gradient accumulated, or undefined), the leaf's hooks run, in the order added.
// A leaf used inside a checkpointed region gets its count from the recompute's own backward.
#pragma once
#include <cstdint>
#include <functional>

#include "src/core/tensor.h"

namespace gdn::autograd {

using GradReadyHook = std::function<void()>;

// Adds `hook` for `leaf` (a leaf tensor); returns an id for remove_grad_ready_hook.
uint64_t add_grad_ready_hook(const Tensor& leaf, GradReadyHook hook);
void remove_grad_ready_hook(uint64_t id);

// Removes its hook when destroyed.
class GradReadyHookHandle {
 public:
  GradReadyHookHandle() = default;
  GradReadyHookHandle(const Tensor& leaf, GradReadyHook hook)
      : id_(add_grad_ready_hook(leaf, std::move(hook))) {}
  ~GradReadyHookHandle() { reset(); }
  GradReadyHookHandle(GradReadyHookHandle&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  GradReadyHookHandle& operator=(GradReadyHookHandle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = 0;
    }
    return *this;
  }
  GradReadyHookHandle(const GradReadyHookHandle&) = delete;
  GradReadyHookHandle& operator=(const GradReadyHookHandle&) = delete;
  void reset() {
    if (id_) remove_grad_ready_hook(id_);
    id_ = 0;
  }

 private:
  uint64_t id_ = 0;
};

namespace detail {
// For the engine: whether any hook exists (so a backward without hooks counts nothing), and
// running the hooks of one leaf.
bool any_grad_ready_hooks();
void run_grad_ready_hooks(const TensorImpl* leaf);
}  // namespace detail

}  // namespace gdn::autograd
