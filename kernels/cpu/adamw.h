// CPU fused AdamW update: one pass over a parameter tensor updating the parameter and both
// moments in place (math in kernels/optim_update.h). T is float or double; the moments are
// acc_t<T> (fp32 for fp32 parameters, fp64 for fp64). All pointers contiguous, n elements.
#pragma once
#include <cstdint>

#include "kernels/optim_update.h"

namespace gdn::cpu {

template <typename T>
void adamw_step(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq, int64_t n,
                const kern::AdamWStep& step);

}  // namespace gdn::cpu
