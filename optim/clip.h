// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2).
//
//   norm = sqrt(sum over parameters, in list order, of sum(grad^2))   (fp64 throughout)
//   if norm is finite and max_norm / (norm + 1e-6) < 1: every grad *= max_norm / (norm + 1e-6)
//
// Parameters whose grad is undefined contribute nothing. A non-finite norm (an inf or NaN in
// some grad) is returned as is and nothing is scaled, so the trainer can skip the step or stop.
// Deterministic: per-tensor sums come from fixed-order kernels (kernels/{cpu,cuda}/grad_norm)
// and are added in list order. Meta tensors contribute 0 (so on meta the norm is 0).
#pragma once
#include <vector>

#include "src/core/tensor.h"

namespace gdn::optim {

// The global L2 norm of the grads, without clipping.
double grad_norm(const std::vector<Tensor>& params);

// Clips as above and returns the norm before clipping. max_norm must be > 0 (to only measure,
// call grad_norm).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace gdn::optim
