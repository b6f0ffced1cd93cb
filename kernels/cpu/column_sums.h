// Column sums of an n x d row-major term, each column summed over the rows in order (so the
// bits do not depend on the thread count): threads own blocks of 16 columns (a cache line of
// fp32) and walk the rows, the block's columns innermost and contiguous, so the loop vectorises
// where a column-at-a-time loop would stride through memory. The parameter gradients of the
// norms (dw) use it.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

namespace gdn::cpu {

// store(j, sum_{i < n} term(i, j)) for every j < d.
template <typename A, typename Term, typename Store>
GDN_CPU_CLONES void column_sums(int64_t n, int64_t d, bool parallel, const Term& term,
                                const Store& store) {
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel if (parallel)
  {
    GDN_TRACE_WORKER("column sums");
#pragma omp for schedule(static)
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const int64_t j0 = cb * kBlock, m = std::min(kBlock, d - j0);
      A acc[kBlock] = {};
      for (int64_t i = 0; i < n; ++i)
        for (int64_t jj = 0; jj < m; ++jj) acc[jj] += term(i, j0 + jj);
      for (int64_t jj = 0; jj < m; ++jj) store(j0 + jj, acc[jj]);
    }
  }
}

}  // namespace gdn::cpu
