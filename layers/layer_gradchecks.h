// Gradient checks of every layer (inputs and parameters) and of the gated-delta-rule kernels
// through autograd, at small fp64 sizes: fp64 central finite differences against autograd.
// Backs tests/test_gradcheck_layers.cpp and `gdn gradcheck --layer/--kernel`.
#pragma once
#include <string>
#include <vector>

#include "layers/config.h"
#include "layers/module.h"
#include "src/autograd/gradcheck.h"

namespace gdn::nn {

// The checks' building blocks, shared with the layer tests (tests/test_attention_layer.cpp):
// fp64 parameters drawn from gen with std (larger than 0.02, so every path carries signal), and a
// softmax attention entry (no layers set) with rope_theta 100, a base small enough that every pair
// turns by a visible angle over a few positions.
InitContext fp64_ctx(Generator* gen, double std = 0.3);
AttentionConfig gradcheck_attention_config(int64_t heads, int64_t kv_heads, int64_t window,
                                           bool bias);

std::vector<std::string> layer_gradcheck_names();
// Large parameters are checked on a seeded subset of `max_elements` entries (0: every entry).
autograd::GradcheckReport run_layer_gradcheck(const std::string& name, uint64_t seed = 0,
                                              int64_t max_elements = 24);

// Kernel checks: two per implementation (the registry's: recurrent, chunked, chunked_fat, fused,
// ssd): NAME on one sequence, NAME_packed on three packed ones (cu_seqlens).
std::vector<std::string> kernel_gradcheck_names();
autograd::GradcheckReport run_kernel_gradcheck(const std::string& name, uint64_t seed = 0);

}  // namespace gdn::nn
