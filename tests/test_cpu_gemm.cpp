// cpu::gemm (kernels/cpu/gemm.cpp) above the size where it cuts C into blocks for the threads:
// every transpose, both cut directions (C taller than wide and wider than tall), an uneven cut,
// the cut along K, leading dimensions wider than the matrices, beta 0 and not, fp32 and fp64,
// against an fp64 loop; and the same bits with 1, 2 and 3 threads. ctest runs tests with one OpenMP
// thread, so the test sets the thread counts itself.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace {

struct Case {
  int64_t M, N, K;
};
// Each has M * N * K above the cut's threshold (2^21 multiply-adds). The last two are weight
// gradients' shapes (K at least twice M and N), cut along K: 2 slices, and 4 uneven ones.
const Case kCases[] = {
    {300, 70, 128}, {40, 333, 200}, {129, 131, 130}, {64, 50, 1024}, {37, 90, 4500}};

template <typename T>
struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<T> A, B, C0;
};

// A is M x K (K x M when transposed), B K x N (N x K), C M x N; each row 3 elements wider.
template <typename T>
Operands<T> operands(const Case& c, bool ta, bool tb, uint32_t seed) {
  Operands<T> o;
  o.lda = (ta ? c.M : c.K) + 3;
  o.ldb = (tb ? c.K : c.N) + 3;
  o.ldc = c.N + 3;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto fill = [&](std::vector<T>& v, int64_t n) {
    v.resize(size_t(n));
    for (T& x : v) x = T(normal(rng));
  };
  fill(o.A, (ta ? c.K : c.M) * o.lda);
  fill(o.B, (tb ? c.N : c.K) * o.ldb);
  fill(o.C0, c.M * o.ldc);
  return o;
}

template <typename T>
std::vector<T> run(const Case& c, bool ta, bool tb, T alpha, T beta, const Operands<T>& o,
                   int threads) {
  std::vector<T> C = o.C0;
  omp_set_num_threads(threads);
  gdn::cpu::gemm(ta, tb, c.M, c.N, c.K, alpha, o.A.data(), o.lda, o.B.data(), o.ldb, beta, C.data(),
                 o.ldc);
  omp_set_num_threads(1);
  return C;
}

template <typename T>
void check_case(const Case& c, bool ta, bool tb, T beta, double tol) {
  const T alpha = T(0.7);
  const Operands<T> o = operands<T>(c, ta, tb, uint32_t(c.M * 7 + c.N * 3 + ta * 2 + tb));
  const std::string what = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                           std::to_string(c.K) + " ta=" + std::to_string(ta) +
                           " tb=" + std::to_string(tb) + " beta=" + std::to_string(double(beta));
  const std::vector<T> one = run(c, ta, tb, alpha, beta, o, 1);
  const std::vector<T> two = run(c, ta, tb, alpha, beta, o, 2);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double ref = 0, scale = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = o.A[size_t(ta ? k * o.lda + i : i * o.lda + k)];
        const double b = o.B[size_t(tb ? j * o.ldb + k : k * o.ldb + j)];
        ref += a * b;
        scale += std::abs(a * b);
      }
      const double c0 = o.C0[size_t(i * o.ldc + j)];
      ref = double(alpha) * ref + double(beta) * c0;
      scale = double(alpha) * scale + std::abs(double(beta) * c0);
      ASSERT_NEAR(double(two[size_t(i * o.ldc + j)]), ref, tol * scale)
          << what << " at (" << i << ", " << j << ")";
    }
  // The padding between rows of C is left alone.
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < o.ldc; ++j)
      ASSERT_EQ(two[size_t(i * o.ldc + j)], o.C0[size_t(i * o.ldc + j)]) << what;
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(T)), 0)
      << what << ": 1 and 2 threads differ";
  const std::vector<T> three = run(c, ta, tb, alpha, beta, o, 3);
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(T)), 0)
      << what << ": 1 and 3 threads differ";
}

template <typename T>
void check_all(double tol) {
  for (const Case& c : kCases)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (T beta : {T(0), T(1.3)}) check_case<T>(c, ta, tb, beta, tol);
}

TEST(CpuGemm, CutIntoBlocksPerThreadFloat) {
  check_all<float>(1e-5);
}

TEST(CpuGemm, CutIntoBlocksPerThreadDouble) {
  check_all<double>(1e-13);
}

}  // namespace
