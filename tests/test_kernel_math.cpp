// CPU tests of the per-thread math the CUDA kernels run (kernels/cuda/kernel_math.h, the same
// __host__ __device__ functions), against the CPU kernels:
//   - the max-reduction combine: folding strided partials in the order of both CUDA reduce
//     kernels (8 row groups combined in order; a block's threads combined as a tree) gives the
//     CPU's first NaN / first maximum, with ties, signed zeros and NaNs;
//   - the column-by-column unit lower triangular inverse, columns run in any order (as threads
//     do), equals the CPU's row-by-row forward substitution and inverts I + M;
//   - the per-step chunk gate gradient equals the CPU's store_gate_grad.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/kernel_math.h"

namespace gdn::cuda {
namespace {

// The CUDA reduce_columns_kernel: 8 threads stride j, combined in y order.
MaxArg<float> columns_kernel_max(const std::vector<float>& x) {
  MaxArg<float> part[8];
  for (int y = 0; y < 8; ++y) {
    part[y] = {0.f, -1};
    for (size_t j = y; j < x.size(); j += 8)
      part[y] = better(part[y], MaxArg<float>{x[j], int64_t(j)});
  }
  MaxArg<float> best = part[0];
  for (int y = 1; y < 8; ++y) best = better(best, part[y]);
  return best;
}

// The CUDA reduce_rows_kernel: `threads` stride j, then a shared-memory tree.
MaxArg<float> rows_kernel_max(const std::vector<float>& x, int threads) {
  std::vector<MaxArg<float>> part(threads, MaxArg<float>{0.f, -1});
  for (int t = 0; t < threads; ++t)
    for (size_t j = t; j < x.size(); j += threads)
      part[t] = better(part[t], MaxArg<float>{x[j], int64_t(j)});
  for (int s = threads / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; ++t) part[t] = better(part[t], part[t + s]);
  return part[0];
}

TEST(KernelMath, MaxCombineMatchesCpuFirstNanElseFirstMax) {
  std::mt19937 rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + int(rng() % 700);
    std::vector<float> x(n);
    for (auto& v : x) v = float(int(rng() % 9)) - 4.f;  // many ties
    if (trial % 3 == 0) x[rng() % n] = nan;
    if (trial % 5 == 0) x[rng() % n] = nan;
    if (trial % 7 == 0) std::fill(x.begin(), x.end(), -0.f), x[rng() % n] = 0.f;
    float out;
    int64_t arg;
    cpu::reduce<float>(cpu::Reduce::max, x.data(), 1, n, 1, &out, &arg);
    for (const MaxArg<float>& got :
         {columns_kernel_max(x), rows_kernel_max(x, 32), rows_kernel_max(x, 256)}) {
      ASSERT_EQ(got.i, arg) << "trial " << trial << " n " << n;
      if (std::isnan(out))
        EXPECT_TRUE(std::isnan(got.v));
      else
        EXPECT_EQ(std::signbit(got.v), std::signbit(out));
    }
  }
}

TEST(KernelMath, UnitLowerInverseColumnsInAnyOrderMatchCpu) {
  std::mt19937 rng(5);
  std::normal_distribution<double> n01(0, 1);
  for (int C : {16, 32, 64}) {  // the chunk sizes (the CPU inversion is blocked by 16)
    const int ld = 65;
    std::vector<double> m(C * ld, 0.0), cpu_a(C * C, 0.0);
    for (int r = 0; r < C; ++r)
      for (int l = 0; l < r; ++l) m[r * ld + l] = cpu_a[r * C + l] = 0.3 * n01(rng);
    const std::vector<double> M = cpu_a;
    std::vector<double> row_tmp(gdr::detail::invert_tmp_elems(C));
    gdr::detail::invert_unit_lower(cpu_a.data(), C, row_tmp.data());
    std::vector<int> order(C);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);  // threads run in no particular order
    for (int l : order) unit_lower_inverse_column(l, C, m.data(), ld);
    for (int r = 0; r < C; ++r)
      for (int l = 0; l < C; ++l) {
        const double got = r > l ? m[l * ld + r] : (r == l ? 1.0 : 0.0);
        EXPECT_NEAR(got, cpu_a[r * C + l], 1e-13 * (1 + std::abs(cpu_a[r * C + l])))
            << "C " << C << " at " << r << "," << l;
      }
    // (I + M) A = I
    for (int r = 0; r < C; ++r)
      for (int l = 0; l < C; ++l) {
        double acc = cpu_a[r * C + l];
        for (int j = 0; j < r; ++j) acc += M[r * C + j] * cpu_a[j * C + l];
        EXPECT_NEAR(acc, r == l ? 1.0 : 0.0, 1e-10);
      }
  }
}

TEST(KernelMath, GateGradMatchesCpuStoreGateGrad) {
  std::mt19937 rng(9);
  std::normal_distribution<double> n01(0, 1);
  for (int C : {16, 32, 64})
    for (int rows : {C, C - 5, 1}) {
      std::vector<double> a(C), X(C * C), col(C), want(C, 0.0);
      for (auto& v : a) v = n01(rng);
      for (auto& v : X) v = n01(rng);
      const double c = n01(rng);
      gdr::detail::store_gate_grad(a.data(), X.data(), c, rows, C, col.data(), want.data(), 1);
      for (int t = 0; t < rows; ++t)
        EXPECT_NEAR(gate_grad_at(t, a.data(), X.data(), c, C), want[t],
                    1e-12 * (1 + std::abs(want[t])))
            << "C " << C << " t " << t;
    }
}

}  // namespace
}  // namespace gdn::cuda
