// CPU sum of squares in fp64, for global gradient-norm clipping. Deterministic: the sum runs
// over fixed-size blocks whose partial sums are added in block order, so the result does not
// depend on the number of threads.
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cpu {

// *out = sum_i x[i]^2, accumulated in fp64. T is float, double, bf16 or fp16; x contiguous.
template <typename T>
void sum_squares(const T* x, int64_t n, double* out);

}  // namespace gdn::cpu
