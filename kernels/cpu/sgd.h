// CPU fused SGD update (momentum, dampening, nesterov, weight decay as torch.optim.SGD): one
// pass over a parameter tensor (math in kernels/optim_update.h). T is float or double; the
// momentum buffer is acc_t<T> and may be null when step.momentum == 0.
#pragma once
#include <cstdint>

#include "kernels/optim_update.h"

namespace gdn::cpu {

template <typename T>
void sgd_step(T* param, const T* grad, acc_t<T>* momentum_buf, int64_t n,
              const kern::SgdStep& step);

}  // namespace gdn::cpu
