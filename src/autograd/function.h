// Custom Functions: ops with an explicit forward and backward (the fused kernels join autograd
// this way). forward runs without recording and saves what backward needs through the context;
// apply() records one node whose backward calls Function::backward.
#pragma once
#include <memory>
#include <vector>

#include "src/autograd/node.h"

namespace gdn::autograd {

class FunctionCtx {
 public:
  void save_for_backward(std::vector<Tensor> ts) { saved_ = std::move(ts); }
  const std::vector<Tensor>& saved() const { return saved_; }
  // Which inputs need a gradient (false ones may be returned undefined).
  bool needs_input_grad(size_t i) const { return i < needs_grad_.size() && needs_grad_[i]; }

 private:
  friend std::vector<Tensor> apply(const std::shared_ptr<class Function>&,
                                   const std::vector<Tensor>&);
  std::vector<Tensor> saved_;
  std::vector<bool> needs_grad_;
};

class Function {
 public:
  virtual ~Function() = default;
  virtual const char* name() const = 0;
  virtual std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& inputs) = 0;
  // One gradient per input (undefined where not needed), given one per output (undefined
  // where the output got no gradient).
  virtual std::vector<Tensor> backward(FunctionCtx& ctx,
                                       const std::vector<Tensor>& grad_outputs) = 0;
};

std::vector<Tensor> apply(const std::shared_ptr<Function>& fn, const std::vector<Tensor>& inputs);

}  // namespace gdn::autograd
