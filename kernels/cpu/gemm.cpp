// BLAS wrappers. A large GEMM is cut into blocks of C shared out over the OpenMP threads, each a
// single-threaded BLAS call (a weight gradient's, into slices of K); batched GEMMs split the batch
// over the threads when there are enough matrices, and otherwise cut each product so.
#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/blas_select.h"
#include "kernels/cpu/parallel_rows.h"

namespace gdn::cpu {

namespace {
// Before main, before any GEMM: OpenBLAS's kernels for this CPU (blas_select.h). Every program
// that links the GEMMs (gdn, the tests, the examples) runs it.
[[maybe_unused]] const bool kBlasSelected = (blas_kernels(), true);

inline CBLAS_TRANSPOSE tr(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B,
              int(ldb), beta, C, int(ldc));
}
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
               int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B,
              int(ldb), beta, C, int(ldc));
}
}  // namespace

// Below this many multiply-adds a GEMM runs as one BLAS call (which threads it or not as it
// sees fit); above it gemm cuts C into blocks for the threads itself. OpenBLAS's own split of
// these shapes over 2 threads ran at 118-171 GFLOP/s where one block per thread ran at 195-206
// (2048 x 256..1536 x 256..2048, Zen 4).
constexpr int64_t kSplitMinWork = int64_t(1) << 21;
// The cut: up to kMaxBlocks blocks (enough for a few threads each), none narrower than
// kMinBlockExtent rows or columns.
constexpr int64_t kMaxBlocks = 8, kMinBlockExtent = 64;

int num_threads() {
  int n = omp_get_max_threads();
  return n < 1 ? 1 : n;
}

namespace {

// Whether a GEMM's blocks go to the threads: not from inside a parallel region (BLAS then runs
// on the calling thread alone), nor with one thread.
bool on_threads() {
  return !omp_in_parallel() && num_threads() > 1;
}

// A weight gradient's shape: K (the tokens) at least twice M and N. Cut by rows, each block
// re-packs all of B; cut along K, each block packs its own slice of A and B once (256x256x2048:
// 161 -> 178 GFLOP/s, 256x768x2048: 172 -> 189, on 2 threads).
bool cut_along_k(int64_t M, int64_t N, int64_t K) {
  return K >= 2 * std::max(M, N);
}

// C = alpha op(A) op(B) + beta C as `slices` products over consecutive slices of K: the first into
// C (with beta), the others into buffers of their own, then added to C in slice order. The number
// of slices depends on K alone, so the bits do not depend on the threads.
template <typename T>
void gemm_k_slices(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                   int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  const int64_t slices = std::clamp<int64_t>(K / 1024, 2, 4);
  // Slices 1.. of C, M x N each. Kept between calls (at most 3 weight gradients' worth): fresh
  // pages for each call would cost page faults every step.
  thread_local std::vector<T> partial;
  partial.resize(size_t((slices - 1) * M * N));
  T* const part = partial.data();  // the calling thread's, named before the other threads run
  const bool parallel = on_threads();
  parallel_rows(slices, parallel, "gemm_k_slices", [&](int64_t s) {
    const int64_t lo = K * s / slices, hi = K * (s + 1) / slices;
    const T* a = trans_a ? A + lo * lda : A + lo;
    const T* b = trans_b ? B + lo : B + lo * ldb;
    if (s == 0)
      blas_gemm(trans_a, trans_b, M, N, hi - lo, alpha, a, lda, b, ldb, beta, C, ldc);
    else
      blas_gemm(trans_a, trans_b, M, N, hi - lo, alpha, a, lda, b, ldb, T(0),
                part + (s - 1) * M * N, N);
  });
  parallel_rows(M, parallel, "gemm_k_slices", [&](int64_t i) {
    T* c = C + i * ldc;
    for (int64_t s = 1; s < slices; ++s) {
      const T* p = part + (s - 1) * M * N + i * N;
      for (int64_t j = 0; j < N; ++j) c[j] += p[j];
    }
  });
}

}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // BLAS may not scale C when K == 0
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  if (M * N * K < kSplitMinWork) {
    blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (cut_along_k(M, N, K)) {
    gemm_k_slices(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Blocks of C along its longer side, each a single-threaded BLAS call over the whole of K
  // (BLAS runs on the calling thread inside a parallel region). Their number depends on the shape
  // alone, never on the threads, so the bits of C do not either (BLAS's sums can depend on the
  // extent of the block it is given).
  const bool by_rows = M >= N;
  const int64_t extent = by_rows ? M : N;
  const int64_t blocks = std::clamp<int64_t>(extent / kMinBlockExtent, 1, kMaxBlocks);
  parallel_rows(blocks, on_threads(), "gemm", [&](int64_t blk) {
    const int64_t lo = extent * blk / blocks, hi = extent * (blk + 1) / blocks;
    if (by_rows) {
      const T* a = trans_a ? A + lo : A + lo * lda;
      blas_gemm(trans_a, trans_b, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + lo * ldc, ldc);
    } else {
      const T* b = trans_b ? B + lo * ldb : B + lo;
      blas_gemm(trans_a, trans_b, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  });
}

template <typename T>
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                          const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                          int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c,
                          int64_t batch) {
  if (batch <= 0) return;
  if (batch == 1 || omp_in_parallel()) {
    for (int64_t b = 0; b < batch; ++b)
      gemm(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
           C + b * stride_c, ldc);
    return;
  }
  // Small matrices: one GEMM per thread. Large ones: gemm cuts each into blocks for the threads.
  const bool per_thread = batch >= num_threads() && M * N * K < kSplitMinWork;
  if (per_thread) {
    parallel_rows(batch, true, "gemm_strided_batched", [&](int64_t b) {
      gemm(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
           C + b * stride_c, ldc);
    });
  } else {
    for (int64_t b = 0; b < batch; ++b)
      gemm(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
           C + b * stride_c, ldc);
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm_strided_batched<float>(bool, bool, int64_t, int64_t, int64_t, float,
                                          const float*, int64_t, int64_t, const float*, int64_t,
                                          int64_t, float, float*, int64_t, int64_t, int64_t);
template void gemm_strided_batched<double>(bool, bool, int64_t, int64_t, int64_t, double,
                                           const double*, int64_t, int64_t, const double*, int64_t,
                                           int64_t, double, double*, int64_t, int64_t, int64_t);

}  // namespace gdn::cpu
