// CPU tests of the host-side arithmetic behind the CUDA kernels (no GPU needed):
//   - the row-major -> column-major cuBLAS argument mapping (kernels/cuda/gemm_mapping.h), run
//     through a naive GEMM that reads its arguments exactly as cuBLAS does (column-major,
//     op(X) = X^T for CUBLAS_OP_T), against a naive row-major GEMM, for every transpose
//     combination, vectors, padded leading dimensions and empty inner dims; and cuBLAS's
//     leading-dimension rules;
//   - the launch arithmetic (kernels/cuda/launch_math.h): row splits of the two-pass column sums
//     cover every row once with a bounded number of parts, block sizes, embedding tiles, and the
//     GEMM batches of grouped value heads pair every value tile with its key tile exactly once.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "kernels/cuda/gemm_mapping.h"
#include "kernels/cuda/launch_math.h"

namespace gdn::cuda {
namespace {

// C = op(A) op(B), row-major; A is [M, K] (or [K, M] when trans_a), B is [K, N] (or [N, K]).
void row_major_gemm(const RowMajorGemm& g, const std::vector<double>& A,
                    const std::vector<double>& B, std::vector<double>& C) {
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < g.K; ++l) {
        const double a = g.trans_a ? A[l * g.lda + i] : A[i * g.lda + l];
        const double b = g.trans_b ? B[j * g.ldb + l] : B[l * g.ldb + j];
        acc += a * b;
      }
      C[i * g.ldc + j] = acc;
    }
}

// cuBLAS's gemm, literally: column-major, element (i, j) of X at X[i + j * ld].
void cublas_like_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* A,
                      int64_t lda, const double* B, int64_t ldb, double* C, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double a = ta ? A[l + i * lda] : A[i + l * lda];  // op(A)(i, l)
        const double b = tb ? B[j + l * ldb] : B[l + j * ldb];  // op(B)(l, j)
        acc += a * b;
      }
      C[i + j * ldc] = acc;
    }
}

TEST(GemmMapping, MatchesRowMajorForEveryTransposeAndShape) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t shapes[][3] = {{3, 5, 7}, {1, 4, 6}, {4, 1, 6}, {5, 6, 1},
                               {1, 1, 9}, {8, 8, 8}, {2, 3, 0}, {17, 3, 2}};
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int64_t pad : {0, 3}) {
          RowMajorGemm g;
          g.trans_a = ta;
          g.trans_b = tb;
          g.M = s[0];
          g.N = s[1];
          g.K = s[2];
          // Stored shapes: A [M, K] or [K, M]; B [K, N] or [N, K]; ld = stored columns + pad.
          const int64_t a_rows = ta ? g.K : g.M, a_cols = ta ? g.M : g.K;
          const int64_t b_rows = tb ? g.N : g.K, b_cols = tb ? g.K : g.N;
          g.lda = std::max<int64_t>(a_cols, 1) + pad;
          g.ldb = std::max<int64_t>(b_cols, 1) + pad;
          g.ldc = std::max<int64_t>(g.N, 1) + pad;
          std::vector<double> A(std::max<int64_t>(a_rows, 1) * g.lda),
              B(std::max<int64_t>(b_rows, 1) * g.ldb);
          for (auto& x : A) x = u(rng);
          for (auto& x : B) x = u(rng);
          std::vector<double> want(g.M * g.ldc, -7), got(g.M * g.ldc, -7);
          row_major_gemm(g, A, B, want);
          const ColumnMajorGemm c = to_column_major(g);
          EXPECT_EQ(column_major_error(c), nullptr) << s[0] << " " << s[1] << " " << s[2];
          // The swap: cuBLAS's first operand is B's buffer, its second A's.
          cublas_like_gemm(c.trans_first, c.trans_second, c.m, c.n, c.k, B.data(), c.ld_first,
                           A.data(), c.ld_second, got.data(), c.ldc);
          for (size_t i = 0; i < want.size(); ++i)
            EXPECT_EQ(got[i], want[i]) << "M N K " << s[0] << " " << s[1] << " " << s[2]
                                       << " trans " << ta << tb << " pad " << pad << " at " << i;
        }
}

TEST(GemmMapping, LeadingDimensionRules) {
  RowMajorGemm g{false, false, 4, 6, 5, 5, 6, 6};
  EXPECT_EQ(column_major_error(to_column_major(g)), nullptr);
  RowMajorGemm bad_a = g;
  bad_a.lda = 4;  // A [4, 5] needs a row stride >= 5
  EXPECT_NE(column_major_error(to_column_major(bad_a)), nullptr);
  RowMajorGemm bad_b = g;
  bad_b.ldb = 5;
  EXPECT_NE(column_major_error(to_column_major(bad_b)), nullptr);
  RowMajorGemm bad_c = g;
  bad_c.ldc = 5;
  EXPECT_NE(column_major_error(to_column_major(bad_c)), nullptr);
  RowMajorGemm t = g;  // A^T stored [5, 4]: row stride >= 4 is enough
  t.trans_a = true;
  t.lda = 4;
  EXPECT_EQ(column_major_error(to_column_major(t)), nullptr);
}

TEST(LaunchMath, RowSplitCoversEveryRowOnce) {
  for (int64_t n : {0, 1, 31, 32, 33, 1000, 8191, 8192, 8193, 100000, 1 << 20}) {
    const RowSplit s = split_rows(n);
    if (n == 0) {
      EXPECT_EQ(s.parts, 0);
      continue;
    }
    EXPECT_GE(s.rows_per_part, 32);
    EXPECT_LE(s.parts, kMaxParts) << n;
    EXPECT_GE(s.parts * s.rows_per_part, n) << n;        // every row is in a part
    EXPECT_LT((s.parts - 1) * s.rows_per_part, n) << n;  // no empty part
  }
}

TEST(LaunchMath, BlockSizesAndTiles) {
  for (int64_t d : {1, 7, 32, 33, 64, 100, 128, 129, 256, 5000}) {
    const int t = row_threads(d);
    EXPECT_EQ(t & (t - 1), 0) << d;  // a power of two (tree reductions)
    EXPECT_GE(t, 32);
    EXPECT_LE(t, 256);
    EXPECT_GE(t, std::min<int64_t>(d, 256)) << d;
  }
  EXPECT_EQ(grid_1d(0, 256), 1u);
  EXPECT_EQ(grid_1d(257, 256), 2u);
  EXPECT_EQ(grid_1d(int64_t(1) << 40, 256), 1u << 20);
  for (int64_t v : {1, 16, 17, 1000, 32000, 50257, 1 << 20}) {
    const int64_t r = embedding_rows_per_block(v);
    EXPECT_GE(r, 16);
    EXPECT_LE(ceil_div(v, r), 512) << v;
  }
}

TEST(LaunchMath, ChunkBatchesPairEveryValueTileWithItsKeyTile) {
  for (int64_t B : {1, 2})
    for (int64_t H : {1, 3, 4})
      for (int64_t G : {1, 2, 4})
        for (int64_t NT : {1, 2, 5, 9}) {
          const int64_t HV = H * G;
          const auto batches = chunk_batches(B * H, G, NT);
          if (G == 1) {
            EXPECT_EQ(batches.size(), 1u);
          }
          std::set<int64_t> seen;
          for (const ChunkBatch& b : batches)
            for (int64_t n = 0; n < b.count; ++n) {
              const int64_t vt = b.value_first + n * b.value_step;
              const int64_t kt = b.key_first + n * b.key_step;
              EXPECT_TRUE(seen.insert(vt).second) << "value tile " << vt << " twice";
              // value tile s * NT + c, s = b * HV + hv  ->  key tile (b * H + hv / G) * NT + c
              const int64_t s = vt / NT, c = vt % NT;
              EXPECT_EQ(kt, ((s / HV) * H + (s % HV) / G) * NT + c)
                  << "B " << B << " H " << H << " G " << G << " NT " << NT;
            }
          EXPECT_EQ(int64_t(seen.size()), B * HV * NT);
          EXPECT_EQ(*seen.rbegin(), B * HV * NT - 1);
        }
}

}  // namespace
}  // namespace gdn::cuda
