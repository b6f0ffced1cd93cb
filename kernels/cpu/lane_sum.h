// Sums that vectorise in a fixed order, for the CPU kernels' reductions.
#pragma once
#include <cstdint>

namespace gdn::cpu {

// Sums in kLanes<A> interleaved partial sums (lane j takes the terms i = j mod lanes, then the
// lanes are added in order): one 512-bit register of independent accumulators, so the loop
// vectorises where a single running sum would wait on every add. The order is fixed by n alone.
// Always inlined: a kernel's clones (kernels/cpu/simd.h) compile it for their instruction set.
template <typename A>
inline constexpr int64_t kLanes = 64 / int64_t(sizeof(A));

template <typename A, class Term>
inline __attribute__((always_inline)) A lane_sum(int64_t n, const Term& term) {
  constexpr int64_t L = kLanes<A>;
  A part[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int64_t j = 0; j < L; ++j) part[j] += term(i + j);
  for (int64_t j = 0; i < n; ++i, ++j) part[j] += term(i);
  A s = 0;
  for (int64_t j = 0; j < L; ++j) s += part[j];
  return s;
}

template <typename A>
inline __attribute__((always_inline)) A dot(const A* x, const A* y, int64_t n) {
  return lane_sum<A>(n, [&](int64_t i) { return x[i] * y[i]; });
}

}  // namespace gdn::cpu
