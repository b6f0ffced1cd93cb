// Tests of cpu::tile_gemm (kernels/cpu/tile_gemm.h), the GEMM of the attention tiles: fp32 (the
// AVX-512 micro-kernel where the CPU has it) and fp64 (BLAS) against a naive fp64 product, over
// row and column remainders of the micro-kernel's 6 x 64 blocks, K = 0, A row-major and
// transposed through its strides, alpha and beta (beta = 0 never reads C: NaN there stays
// unseen), padded leading dims whose padding is never written; the same bits for a row wherever
// it sits in a block; and the causal bands' skipped products.
#include "kernels/cpu/tile_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace gdn::cpu {
namespace {

struct Case {
  int64_t M, N, K;
  bool trans_a;  // A stored [K, M] (a_row = 1) instead of [M, K]
  double alpha, beta;
};

template <typename T>
void check(const Case& c, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t lda = (c.trans_a ? c.M : c.K) + 3, ldb = c.N + 5, ldc = c.N + 7;
  std::vector<T> a((c.trans_a ? c.K : c.M) * lda + 1), b(c.K * ldb + 1), cm(c.M * ldc);
  for (T& x : a) x = T(normal(gen));
  for (T& x : b) x = T(normal(gen));
  const T sentinel = T(12345);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < ldc; ++j)
      cm[i * ldc + j] =
          j < c.N ? (c.beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(normal(gen))) : sentinel;
  const std::vector<T> c0 = cm;
  const int64_t a_row = c.trans_a ? 1 : lda, a_col = c.trans_a ? lda : 1;
  tile_gemm<T>(c.M, c.N, c.K, T(c.alpha), a.data(), a_row, a_col, b.data(), ldb, T(c.beta),
               cm.data(), ldc);
  const double eps = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = cm[i * ldc + j];
      if (j >= c.N) {
        ASSERT_EQ(got, sentinel) << "padding written at " << i << ", " << j;
        continue;
      }
      double want = 0, scale = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double term = double(a[i * a_row + k * a_col]) * double(b[k * ldb + j]);
        want += term;
        scale += std::fabs(term);
      }
      want *= c.alpha;
      const double from_c = c.beta != 0 ? c.beta * double(c0[i * ldc + j]) : 0.0;
      want += from_c;
      const double tol = eps * (std::fabs(c.alpha) * scale + std::fabs(from_c) + 1);
      ASSERT_NEAR(double(got), want, tol) << "M " << c.M << " N " << c.N << " K " << c.K
                                          << " trans_a " << c.trans_a << " at " << i << ", " << j;
    }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t M : {1, 5, 6, 7, 13, 128})
    for (int64_t N : {1, 15, 16, 17, 64, 65, 130, 256})
      for (int64_t K : {0, 1, 3, 64, 257})
        for (bool trans_a : {false, true})
          all.push_back({M, N, K, trans_a, M % 2 ? 0.7 : 1.0, N % 3 == 0 ? 0.0 : 0.5});
  all.push_back({9, 33, 20, false, -1.25, 1.0});
  all.push_back({9, 33, 20, true, 0.125, 0.0});
  return all;
}

TEST(TileGemm, Fp32MatchesNaiveProduct) {
  uint64_t seed = 1;
  for (const Case& c : cases()) check<float>(c, seed++);
}

TEST(TileGemm, Fp64MatchesNaiveProduct) {
  uint64_t seed = 1000;
  for (const Case& c : cases()) check<double>(c, seed++);
}

// A row of C depends only on its row of A: the same bits whether it is computed as row 0 of a
// one-row call or as any row of a larger call (the attention backward relies on it: its one-pass
// and two-pass dq sums call the GEMM on the same rows in different calls).
TEST(TileGemm, RowBitsDoNotDependOnTheBlock) {
  const int64_t M = 19, N = 70, K = 33;
  std::mt19937_64 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N), whole(M * N), one(N);
  for (float& x : a) x = normal(gen);
  for (float& x : b) x = normal(gen);
  tile_gemm<float>(M, N, K, 0.3f, a.data(), K, 1, b.data(), N, 0.0f, whole.data(), N);
  for (int64_t i = 0; i < M; ++i) {
    tile_gemm<float>(1, N, K, 0.3f, a.data() + i * K, K, 1, b.data(), N, 0.0f, one.data(), N);
    for (int64_t j = 0; j < N; ++j) ASSERT_EQ(one[j], whole[i * N + j]) << i << ", " << j;
  }
}

// The causal bands: with A zero outside the band (a_lower, a_upper) the banded product has the
// bits of the full one; with c_lower the wanted entries (j <= i + offset) do, the others are left
// as they were or computed (never anything else). Offsets cut the 6 x 64 blocks anywhere, and
// reach past both ends.
TEST(TileGemm, BandsGiveTheFullProductsBits) {
  std::mt19937_64 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int64_t offset : {-200, -70, -3, 0, 1, 5, 64, 130, 300})
    for (const Band::Kind kind : {Band::c_lower, Band::a_lower, Band::a_upper}) {
      const int64_t M = 128, N = 100, K = 140;
      std::vector<float> a(M * K), b(K * N), full(M * N), banded(M * N, 777.0f);
      for (float& x : b) x = normal(gen);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) {
          const bool zero = (kind == Band::a_lower && k > i + offset) ||
                            (kind == Band::a_upper && k < i - offset);
          a[i * K + k] = zero ? 0.0f : normal(gen);
        }
      tile_gemm<float>(M, N, K, 0.5f, a.data(), K, 1, b.data(), N, 0.0f, full.data(), N);
      tile_gemm<float>(M, N, K, 0.5f, a.data(), K, 1, b.data(), N, 0.0f, banded.data(), N,
                       {kind, offset});
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const float got = banded[i * N + j], want = full[i * N + j];
          if (kind == Band::c_lower && j > i + offset)
            ASSERT_TRUE(got == want || got == 777.0f) << i << ", " << j;
          else
            ASSERT_EQ(got, want) << "kind " << kind << " offset " << offset << " at " << i << ", "
                                 << j;
        }
    }
}

}  // namespace
}  // namespace gdn::cpu
