// Gradient checks of every layer (inputs and parameters) and of the gated-delta-rule kernels
// through autograd, at small fp64 sizes: fp64 central finite differences against autograd.
// Backs tests/test_gradcheck_layers.cpp and `gdn gradcheck --layer/--kernel`.
#pragma once
#include <string>
#include <vector>

#include "src/autograd/gradcheck.h"

namespace gdn::nn {

std::vector<std::string> layer_gradcheck_names();
// Large parameters are checked on a seeded subset of `max_elements` entries (0: every entry).
autograd::GradcheckReport run_layer_gradcheck(const std::string& name, uint64_t seed = 0,
                                              int64_t max_elements = 24);

// Kernel checks: two per implementation (the registry's: recurrent, chunked, chunked_fat, fused,
// ssd): NAME on one sequence, NAME_packed on three packed ones (cu_seqlens).
std::vector<std::string> kernel_gradcheck_names();
autograd::GradcheckReport run_kernel_gradcheck(const std::string& name, uint64_t seed = 0);

}  // namespace gdn::nn
