// Row-major GEMM on the CPU through BLAS (OpenBLAS, OpenMP build):
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// op(X) is X or X^T. Leading dimensions are row strides in elements. Called from inside an
// OpenMP parallel region it runs on the calling thread only (no oversubscription).
#pragma once
#include <cstdint>

namespace gdn::cpu {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// A batch of equally shaped GEMMs with fixed strides between matrices (stride 0 broadcasts).
template <typename T>
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                          const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                          int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c,
                          int64_t batch);

// Number of threads our own OpenMP loops use (omp_get_max_threads, at least 1).
int num_threads();

}  // namespace gdn::cpu
