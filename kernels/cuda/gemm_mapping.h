// The one place where a row-major GEMM becomes a column-major cuBLAS call. A plain header (no
// CUDA), so the mapping is tested on the CPU (tests/test_gemm_mapping.cpp).
//
// A row-major matrix X [r, c] with row stride ld occupies memory exactly as the column-major
// matrix X^T [c, r] with leading dimension ld. So the row-major product C = op(A) op(B) is, read
// column-major, C^T = op(B)^T op(A)^T: cuBLAS gets B's buffer as its first operand and A's as its
// second, m and n swap, and each operand keeps its own transpose flag (B's buffer read
// column-major is already B^T, or B when trans_b).
#pragma once
#include <cstdint>

namespace gdn::cuda {

// C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C, all row-major; op(X) = X^T when trans_x (then
// X is stored [K, M] / [N, K]); lda, ldb, ldc are row strides in elements.
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// The cuBLAS arguments, in cuBLAS's order: C_cm[m, n] = op(first)[m, k] op(second)[k, n], column
// major. `first` is the buffer of B, `second` the buffer of A (the swap above).
struct ColumnMajorGemm {
  bool trans_first = false, trans_second = false;  // CUBLAS_OP_T when true
  int64_t m = 0, n = 0, k = 0;
  int64_t ld_first = 0, ld_second = 0, ldc = 0;
};

inline ColumnMajorGemm to_column_major(const RowMajorGemm& g) {
  ColumnMajorGemm c;
  c.trans_first = g.trans_b;
  c.trans_second = g.trans_a;
  c.m = g.N;
  c.n = g.M;
  c.k = g.K;
  c.ld_first = g.ldb;
  c.ld_second = g.lda;
  c.ldc = g.ldc;
  return c;
}

// cuBLAS's own argument rules (lda >= max(1, rows of the stored column-major operand), ...):
// nullptr when they hold, else which one fails. Checked before every call so that a bad layout is
// reported by name instead of as CUBLAS_STATUS_INVALID_VALUE.
inline const char* column_major_error(const ColumnMajorGemm& c) {
  auto at_least_1 = [](int64_t x) { return x < 1 ? int64_t(1) : x; };
  if (c.m < 0 || c.n < 0 || c.k < 0) return "negative size";
  if (c.ld_first < at_least_1(c.trans_first ? c.k : c.m)) return "leading dim of B too small";
  if (c.ld_second < at_least_1(c.trans_second ? c.n : c.k)) return "leading dim of A too small";
  if (c.ldc < at_least_1(c.m)) return "leading dim of C too small";
  return nullptr;
}

}  // namespace gdn::cuda
