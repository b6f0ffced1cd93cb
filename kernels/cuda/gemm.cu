// cuBLAS wrappers for row-major GEMMs (kernels/cuda/gemm.h). The row-major -> column-major
// argument mapping lives in kernels/cuda/gemm_mapping.h (tested on the CPU); this file only makes
// the calls: S/D GEMM for float/double, GemmEx with fp32 compute for bf16/fp16, the 64-bit cuBLAS
// API so no size is truncated to int.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_mapping.h"
#include "kernels/cuda/launch_math.h"

namespace gdn::cuda {

namespace {

#define GDN_KCUBLAS_CHECK(expr)                                                          \
  do {                                                                                   \
    cublasStatus_t gdn_kst_ = (expr);                                                    \
    if (gdn_kst_ != CUBLAS_STATUS_SUCCESS)                                               \
      throw std::runtime_error(std::string("cuBLAS error in ") + #expr + ": " +          \
                               cublasGetStatusString(gdn_kst_) + " (" + __FILE__ + ":" + \
                               std::to_string(__LINE__) + ")");                          \
  } while (0)

cublasHandle_t handle_for(cudaStream_t stream) {
  return handle_per_stream<cublasHandle_t>(stream, [](cudaStream_t s) {
    cublasHandle_t h = nullptr;
    GDN_KCUBLAS_CHECK(cublasCreate(&h));
    GDN_KCUBLAS_CHECK(cublasSetStream(h, s));
    // Deterministic and no TF32 (set_allow_tf32 changes it per call): fp32 GEMMs in fp32.
    GDN_KCUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    return h;
  });
}

std::atomic<bool> g_allow_tf32{false};

inline cublasOperation_t op(bool trans) {
  return trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// K == 0: the product is empty and C = beta C (zero when beta == 0, never reading C then).
template <typename T>
__global__ void scale_matrices_kernel(T* C, int64_t M, int64_t N, int64_t ldc, int64_t stride_c,
                                      int64_t batch, double beta) {
  const int64_t total = batch * M * N;
  GDN_GRID_LOOP(i, total) {
    const int64_t b = i / (M * N), r = (i / N) % M, c = i % N;
    T* p = C + b * stride_c + r * ldc + c;
    *p = beta == 0 ? from_acc<T>(acc_t<T>(0)) : from_acc<T>(acc_t<T>(beta) * to_acc(*p));
  }
}

template <typename T>
cudaDataType_t data_type() {
  if constexpr (std::is_same_v<T, bf16>)
    return CUDA_R_16BF;
  else
    return CUDA_R_16F;
}

}  // namespace

void set_allow_tf32(bool allow) {
  g_allow_tf32 = allow;
}
bool allow_tf32() {
  return g_allow_tf32;
}

template <typename T>
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                          const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                          int64_t stride_b, double beta, T* C, int64_t ldc, int64_t stride_c,
                          int64_t batch, void* stream) {
  if (M == 0 || N == 0 || batch <= 0) return;
  cudaStream_t s = as_stream(stream);
  if (K == 0) {
    scale_matrices_kernel<T>
        <<<grid_1d(batch * M * N, 256), 256, 0, s>>>(C, M, N, ldc, stride_c, batch, beta);
    GDN_KCUDA_LAUNCHED("gemm (K = 0)");
    return;
  }
  const ColumnMajorGemm c = to_column_major({trans_a, trans_b, M, N, K, lda, ldb, ldc});
  if (const char* err = column_major_error(c))
    throw std::invalid_argument(std::string("cuda::gemm: ") + err + " (M " + std::to_string(M) +
                                ", N " + std::to_string(N) + ", K " + std::to_string(K) + ", lda " +
                                std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                                std::to_string(ldc) + ")");
  cublasHandle_t h = handle_for(s);
  // cuBLAS's first operand is B's buffer, its second A's (gemm_mapping.h).
  if constexpr (std::is_same_v<T, float>) {
    const float a = float(alpha), b = float(beta);
    GDN_KCUBLAS_CHECK(
        cublasSetMathMode(h, g_allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    GDN_KCUBLAS_CHECK(cublasSgemmStridedBatched_64(
        h, op(c.trans_first), op(c.trans_second), c.m, c.n, c.k, &a, B, c.ld_first, stride_b, A,
        c.ld_second, stride_a, &b, C, c.ldc, stride_c, batch));
  } else if constexpr (std::is_same_v<T, double>) {
    GDN_KCUBLAS_CHECK(cublasDgemmStridedBatched_64(
        h, op(c.trans_first), op(c.trans_second), c.m, c.n, c.k, &alpha, B, c.ld_first, stride_b, A,
        c.ld_second, stride_a, &beta, C, c.ldc, stride_c, batch));
  } else {
    const float a = float(alpha), b = float(beta);
    const cudaDataType_t dt = data_type<T>();
    GDN_KCUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
        h, op(c.trans_first), op(c.trans_second), c.m, c.n, c.k, &a, B, dt, c.ld_first, stride_b, A,
        dt, c.ld_second, stride_a, &b, C, dt, c.ldc, stride_c, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
  }
}

#define INST(T)                                                                                   \
  template void gemm_strided_batched<T>(bool, bool, int64_t, int64_t, int64_t, double, const T*,  \
                                        int64_t, int64_t, const T*, int64_t, int64_t, double, T*, \
                                        int64_t, int64_t, int64_t, void*);
INST(float)
INST(double)
INST(bf16)
INST(fp16)

}  // namespace gdn::cuda
