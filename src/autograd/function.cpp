// Custom Function application.
#include "src/autograd/function.h"

namespace gdn::autograd {

std::vector<Tensor> apply(const std::shared_ptr<Function>& fn, const std::vector<Tensor>& inputs) {
  auto ctx = std::make_shared<FunctionCtx>();
  for (const Tensor& t : inputs) ctx->needs_grad_.push_back(t.defined() && t.requires_grad());
  std::vector<Tensor> detached;
  for (const Tensor& t : inputs) detached.push_back(t.defined() ? t.detach() : Tensor());
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    outs = fn->forward(*ctx, detached);
  }
  if (needs_grad(inputs)) {
    std::vector<Tensor> saved = ctx->saved();
    ctx->save_for_backward({});  // the node owns the saved tensors (freed after backward)
    record(fn->name(), inputs, outs, std::move(saved),
           [fn, ctx](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
             ctx->save_for_backward(s);
             std::vector<Tensor> grads = fn->backward(*ctx, g);
             ctx->save_for_backward({});
             return grads;
           });
  }
  return outs;
}

}  // namespace gdn::autograd
