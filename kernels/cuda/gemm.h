// Row-major GEMM on CUDA through cuBLAS, the same contract as kernels/cpu/gemm.h:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C   (op(X) = X^T when trans_x)
// with row strides as leading dimensions and fixed strides between the matrices of a batch
// (stride 0 broadcasts A or B). float and double use cuBLAS S/D GEMM; bf16 and fp16 are stored
// in their type and multiplied with fp32 accumulation (cublasGemmStridedBatchedEx,
// CUBLAS_COMPUTE_32F). TF32 stays off (the default math mode) unless set_allow_tf32(true), so
// fp32 products are true fp32; results are bitwise reproducible run to run on one GPU either way.
// Pointers are device pointers; the call runs on `stream` with a cuBLAS handle kept per (thread,
// device, stream).
#pragma once
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::cuda {

// fp32 GEMMs on TF32 tensor cores (10-bit mantissa products, fp32 sums): process-wide, off by
// default; the trainer sets it from the config key train.allow_tf32.
void set_allow_tf32(bool allow);
bool allow_tf32();

template <typename T>
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                          const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                          int64_t stride_b, double beta, T* C, int64_t ldc, int64_t stride_c,
                          int64_t batch, void* stream);

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, double beta, T* C, int64_t ldc, void* stream) {
  gemm_strided_batched<T>(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0,
                          1, stream);
}

}  // namespace gdn::cuda
