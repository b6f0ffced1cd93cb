// SGD with momentum, exactly as torch.optim.SGD:
//   d = g + wd p;  buf = d on the first update, else momentum buf + (1 - dampening) d;
//   d = nesterov ? d + momentum buf : buf;  p -= lr d
// (the momentum lines only when momentum > 0). Weight decay here is L2 (coupled into the
// gradient), as torch's SGD does. One fused kernel per parameter tensor (kernels/{cpu,cuda}/sgd);
// the momentum buffer ("momentum_buffer", fp32 for fp32 parameters) exists only when
// momentum > 0 and is allocated at construction under MemCategory::optim.
#pragma once
#include "kernels/optim_update.h"
#include "optim/optimizer.h"

namespace gdn::optim {

using SgdOptions = kern::SgdHyper;  // lr, momentum, dampening, nesterov

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, const SgdOptions& options = {});
  const char* name() const override { return "SGD"; }
  const SgdOptions& options() const { return options_; }

 protected:
  void update(Slot& slot, const Tensor& grad, double lr, double weight_decay) override;

 private:
  SgdOptions options_;
};

}  // namespace gdn::optim
