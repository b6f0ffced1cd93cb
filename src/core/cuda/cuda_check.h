// Check macros for CUDA, cuBLAS and NCCL calls: the failing expression, the library's own
// message, file and line.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "src/core/error.h"

#define GDN_CUDA_CHECK(expr)                                                 \
  do {                                                                       \
    cudaError_t gdn_err_ = (expr);                                           \
    if (gdn_err_ != cudaSuccess)                                             \
      GDN_FAIL("CUDA error in ", #expr, ": ", cudaGetErrorString(gdn_err_)); \
  } while (0)

#define GDN_CUBLAS_CHECK(expr)                                                   \
  do {                                                                           \
    cublasStatus_t gdn_st_ = (expr);                                             \
    if (gdn_st_ != CUBLAS_STATUS_SUCCESS)                                        \
      GDN_FAIL("cuBLAS error in ", #expr, ": ", cublasGetStatusString(gdn_st_)); \
  } while (0)
