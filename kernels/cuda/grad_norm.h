// CUDA fp64 sum of squares, for global gradient-norm clipping. Deterministic (no atomics): a
// fixed number of blocks, chosen from n alone, write partial sums to `workspace`, and one block
// adds them in a fixed tree order into *out. Both pointers are device memory.
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cuda {

// Doubles of workspace sum_squares needs.
constexpr int kSumSquaresWorkspace = 256;

// *out (device) = sum_i x[i]^2 in fp64. T is float, double, bf16 or fp16; x contiguous.
template <typename T>
void sum_squares(const T* x, int64_t n, double* workspace, double* out, void* stream);

}  // namespace gdn::cuda
