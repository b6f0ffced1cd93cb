// Activation checkpointing: run a function without keeping what its ops would save for
// backward, and recompute it (with grad) during the backward pass. Trades one extra forward of
// the wrapped part for its saved activations.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// fn must be deterministic (it runs twice). Parameters used inside get their gradients during
// the recompute. At least one input must require grad for anything inside to get gradients.
std::vector<Tensor> checkpoint(const std::string& name, CheckpointFn fn,
                               const std::vector<Tensor>& inputs);

}  // namespace gdn::autograd
