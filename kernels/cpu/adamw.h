// CPU fused AdamW update: one pass over a parameter tensor updating the parameter and both
// moments in place (math in kernels/optim_update.h). T is float or double; the moments are
// acc_t<T> (fp32 for fp32 parameters, fp64 for fp64). All pointers contiguous, n elements.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/optim_update.h"

namespace gdn::cpu {

template <typename T>
void adamw_step(T* param, const T* grad, acc_t<T>* exp_avg, acc_t<T>* exp_avg_sq, int64_t n,
                const kern::AdamWStep& step);

// One parameter tensor of a multi-tensor update, with its own hyper-parameters (group lr and
// weight decay, its own step count).
template <typename T>
struct AdamWTensor {
  T* param;
  const T* grad;
  acc_t<T>* exp_avg;
  acc_t<T>* exp_avg_sq;
  int64_t n;
  kern::AdamWStep step;
};

// Every tensor of `tensors` in one parallel pass: the elements are cut into equal blocks across
// tensors, so the many small tensors of a model (norm weights, biases) share one OpenMP region
// instead of each running its own or none. Element for element the same as adamw_step.
template <typename T>
void adamw_step_many(const std::vector<AdamWTensor<T>>& tensors);

}  // namespace gdn::cpu
