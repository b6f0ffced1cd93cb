// Gradient accumulation over micro-batches.
//
// Backward adds into p.grad(), so n micro-batch backward passes leave the sum of their
// gradients. To get the gradient of the mean loss over the whole batch, either
//   - divide each micro-batch loss by n before backward (what the trainer does, as nanoGPT:
//     no extra pass over the grads), or
//   - backward the plain losses and call scale_grads(params, 1.0 / n) once before clipping and
//     the optimizer step (useful when the divisor is only known at the end, e.g. the number of
//     non-ignored tokens over all micro-batches).
// Both give the same gradient up to rounding.
#pragma once
#include <vector>

#include "src/core/tensor.h"

namespace gdn::optim {

// grad *= factor for every parameter with a defined grad (a non-contiguous grad is replaced by
// a contiguous scaled copy). No autograd.
void scale_grads(const std::vector<Tensor>& params, double factor);

}  // namespace gdn::optim
