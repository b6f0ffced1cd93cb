// checkpoint(): a custom Function whose backward re-runs the forward with grad on and
// backpropagates through that fresh graph.
#include "src/autograd/checkpoint.h"

#include "src/autograd/function.h"
#include "src/ops/ops.h"

namespace gdn::autograd {

namespace {

class CheckpointFunction final : public Function {
 public:
  CheckpointFunction(std::string name, CheckpointFn fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  const char* name() const override { return name_.c_str(); }

  std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) override {
    ctx.save_for_backward(in);  // only the inputs are kept
    return fn_(in);
  }

  std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& grads) override {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < ctx.saved().size(); ++i) {
      const Tensor& s = ctx.saved()[i];
      Tensor x = s.defined() ? s.detach() : Tensor();
      if (x.defined() && ctx.needs_input_grad(i)) x.set_requires_grad(true);
      xs.push_back(x);
    }
    std::vector<Tensor> outs;
    {
      EnableGradGuard grad_on;
      outs = fn_(xs);
    }
    std::vector<Tensor> roots, seeds;
    for (size_t i = 0; i < outs.size() && i < grads.size(); ++i)
      if (grads[i].defined() && outs[i].requires_grad()) {
        roots.push_back(outs[i]);
        seeds.push_back(grads[i]);
      }
    if (!roots.empty()) run_backward(roots, seeds, false);
    std::vector<Tensor> dx;
    for (const Tensor& x : xs) dx.push_back(x.defined() && x.requires_grad() ? x.grad() : Tensor());
    return dx;
  }

 private:
  std::string name_;
  CheckpointFn fn_;
};

}  // namespace

std::vector<Tensor> checkpoint(const std::string& name, CheckpointFn fn,
                               const std::vector<Tensor>& inputs) {
  return autograd::apply(std::make_shared<CheckpointFunction>(name, std::move(fn)), inputs);
}

}  // namespace gdn::autograd
