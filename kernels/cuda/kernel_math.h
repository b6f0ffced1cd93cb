// The per-thread math of a few CUDA kernels, as __host__ __device__ functions in a plain header,
// so the CPU tests (tests/test_kernel_math.cpp) run exactly the code the GPU runs:
//   - the (value, index) combine of the max reduction (reduce.cu),
//   - one column of the unit lower triangular inverse (gdr_chunked.cuh),
//   - one step's gate gradient of a chunk (gdr_common.cuh).
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cuda {

// A partial max: the value and its index along the reduced dim (i = -1: empty).
template <typename A>
struct MaxArg {
  A v;
  int64_t i;
};

// Combines two partial maxima of disjoint index sets: the NaN wins (the smaller index if both
// are NaN), else the larger value, else the smaller index. Associative and commutative, so any
// tree of partials gives the CPU's sequential answer: the first NaN, else the first maximum.
template <typename A>
GDN_HD MaxArg<A> better(MaxArg<A> a, MaxArg<A> b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  const bool an = a.v != a.v, bn = b.v != b.v;
  if (an != bn) return an ? a : b;
  if (!an && a.v != b.v) return a.v > b.v ? a : b;
  return a.i < b.i ? a : b;
}

// Column l of A = (I + M)^-1 for a strictly lower M (C x C, row stride ld, in m's lower part):
//   A_rl = -M_rl - sum_{l < j < r} M_rj A_jl   (r > l; A_ll = 1, A_rl = 0 for r < l),
// the same values as the CPU's blocked inversion (gdr_internal.h: invert_unit_lower) up to
// rounding (the CPU sums by blocks of 16). A_rl goes to
// m[l, r], the unused upper triangle of row l: column l reads only M's strictly lower part and
// row l's upper part, so the columns can be computed in any order or all at once (one thread
// each) and none overwrites what another reads.
template <typename A>
GDN_HD void unit_lower_inverse_column(int l, int C, A* m, int ld) {
  for (int r = l + 1; r < C; ++r) {
    A acc = -m[r * ld + l];
    for (int j = l + 1; j < r; ++j) acc -= m[r * ld + j] * m[l * ld + j];
    m[l * ld + r] = acc;
  }
}

// dg_t of one padded chunk of C steps (the CPU's store_gate_grad, same summation order):
//   dg_t = c + sum_{i >= t} a_i + sum_{j < t} sum_{i >= t} X_ij   (X strictly lower, C x C).
template <typename A>
GDN_HD A gate_grad_at(int t, const A* a, const A* X, A c, int C) {
  A suffix = c;
  for (int i = C - 1; i >= t; --i) suffix += a[i];
  A cross = 0;
  for (int j = 0; j < t; ++j) {
    A col = 0;
    for (int i = C - 1; i >= t; --i) col += X[i * C + j];
    cross += col;
  }
  return suffix + cross;
}

}  // namespace gdn::cuda
