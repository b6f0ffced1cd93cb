// AdamW (Loshchilov & Hutter), exactly as torch.optim.AdamW with amsgrad off: decoupled weight
// decay p -= lr*wd*p, then the bias-corrected Adam step
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) +
//   eps)
// with t the parameter's own update count. One fused kernel per parameter tensor on CUDA
// (kernels/cuda/adamw), one pass over all of them on the CPU (kernels/cpu/adamw). Moments exp_avg
// and exp_avg_sq are fp32 for fp32 parameters (fp64 for fp64 ones, used by the tests), allocated at
// construction under MemCategory::optim: 8 bytes per fp32 parameter element.
#pragma once
#include "kernels/optim_update.h"
#include "optim/optimizer.h"

namespace gdn::optim {

using AdamWOptions = kern::AdamWHyper;  // lr, beta1, beta2, eps

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = {});
  const char* name() const override { return "AdamW"; }
  const AdamWOptions& options() const { return options_; }

 protected:
  void update(Slot& slot, const Tensor& grad, double lr, double weight_decay) override;
  // The CPU parameters in one pass (kernels/cpu/adamw.h: adamw_step_many), the others one by one.
  void update_all(std::vector<Update>& updates) override;

 private:
  kern::AdamWStep step_of(const Slot& slot, double lr, double weight_decay) const;
  AdamWOptions options_;
};

}  // namespace gdn::optim
