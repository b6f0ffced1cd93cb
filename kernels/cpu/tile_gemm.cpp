// tile_gemm (kernels/cpu/tile_gemm.h). The AVX-512 micro-kernel holds an MR x (16 NV) block of C
// in MR * NV zmm accumulators; per k it loads NV vectors of row k of B and broadcasts MR entries
// of column k of A:  acc[i][v] += A(i, k) * B[k, 16 v : 16 v + 16].  The last vector of a block
// is masked for N not a multiple of 16. Blocks run column panel by column panel, so a panel of B
// (K x 16 NV) stays in cache while every row block of A passes over it.
#include "kernels/cpu/tile_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/gemm.h"

namespace gdn::cpu {

namespace {

constexpr int kRows = 6;     // MR: 6 x 4 accumulators + 4 row vectors of B + 1 broadcast <= 32
constexpr int kVectors = 4;  // NV: 64 columns, a head dim's worth

template <int MR, int NV>
__attribute__((target("avx512f"))) void micro_kernel(int64_t K, float alpha, const float* a,
                                                     int64_t a_row, int64_t a_col, const float* b,
                                                     int64_t ldb, float beta, float* c, int64_t ldc,
                                                     __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b_row = b + k * ldb;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = v + 1 < NV ? _mm512_loadu_ps(b_row + 16 * v)
                         : _mm512_maskz_loadu_ps(last, b_row + 16 * v);
    const float* a_col_k = a + k * a_col;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a_col_k[i * a_row]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* at = c + i * ldc + 16 * v;
      const __mmask16 m = v + 1 < NV ? __mmask16(0xffff) : last;
      __m512 r = _mm512_mul_ps(alpha_v, acc[i][v]);
      if (beta != 0.0f) r = _mm512_fmadd_ps(beta_v, _mm512_maskz_loadu_ps(m, at), r);
      _mm512_mask_storeu_ps(at, m, r);
    }
}

using MicroKernel = void (*)(int64_t, float, const float*, int64_t, int64_t, const float*, int64_t,
                             float, float*, int64_t, __mmask16);

template <int MR>
constexpr MicroKernel kernel_for(int nv) {
  return nv == 1   ? micro_kernel<MR, 1>
         : nv == 2 ? micro_kernel<MR, 2>
         : nv == 3 ? micro_kernel<MR, 3>
                   : micro_kernel<MR, 4>;
}

MicroKernel pick(int mr, int nv) {
  static_assert(kRows == 6 && kVectors == 4, "the table below lists MR 1..6 and NV 1..4");
  static const MicroKernel table[kRows][kVectors] = {
      {kernel_for<1>(1), kernel_for<1>(2), kernel_for<1>(3), kernel_for<1>(4)},
      {kernel_for<2>(1), kernel_for<2>(2), kernel_for<2>(3), kernel_for<2>(4)},
      {kernel_for<3>(1), kernel_for<3>(2), kernel_for<3>(3), kernel_for<3>(4)},
      {kernel_for<4>(1), kernel_for<4>(2), kernel_for<4>(3), kernel_for<4>(4)},
      {kernel_for<5>(1), kernel_for<5>(2), kernel_for<5>(3), kernel_for<5>(4)},
      {kernel_for<6>(1), kernel_for<6>(2), kernel_for<6>(3), kernel_for<6>(4)}};
  return table[mr - 1][nv - 1];
}

void avx512_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_row,
                 int64_t a_col, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                 Band band) {
  constexpr int64_t panel = 16 * kVectors;
  for (int64_t j = 0; j < N; j += panel) {
    const int64_t cols = std::min(panel, N - j);
    const int nv = int((cols + 15) / 16), tail = int(cols % 16);
    const __mmask16 last = tail ? __mmask16((1u << tail) - 1) : __mmask16(0xffff);
    for (int64_t i = 0; i < M; i += kRows) {
      const int mr = int(std::min<int64_t>(kRows, M - i));
      const int64_t i_last = i + mr - 1;
      if (band.kind == Band::c_lower && j > i_last + band.offset) continue;
      int64_t k0 = 0, k1 = K;  // the products of this row block that can be nonzero
      if (band.kind == Band::a_lower) k1 = std::clamp<int64_t>(i_last + band.offset + 1, 0, K);
      if (band.kind == Band::a_upper) k0 = std::clamp<int64_t>(i - band.offset, 0, K);
      k0 = std::min(k0, k1);
      pick(mr, nv)(k1 - k0, alpha, a + i * a_row + k0 * a_col, a_row, a_col, b + k0 * ldb + j, ldb,
                   beta, c + i * ldc + j, ldc, last);
    }
  }
}

// Through BLAS: A is row-major (a_col = 1) or transposed (a_row = 1).
template <typename T>
void blas_tile_gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t a_row,
                    int64_t a_col, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (a_col == 1 && (a_row >= K || M == 1))
    gemm(false, false, M, N, K, alpha, a, std::max<int64_t>(a_row, K), b, ldb, beta, c, ldc);
  else if (a_row == 1 && (a_col >= M || K == 1))
    gemm(true, false, M, N, K, alpha, a, std::max<int64_t>(a_col, M), b, ldb, beta, c, ldc);
  else
    throw std::invalid_argument("tile_gemm: A needs a unit stride for BLAS (strides " +
                                std::to_string(a_row) + ", " + std::to_string(a_col) + ")");
}

}  // namespace

bool tile_gemm_uses_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

template <>
void tile_gemm<float>(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_row,
                      int64_t a_col, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                      Band band) {
  if (M <= 0 || N <= 0) return;
  if (tile_gemm_uses_avx512())
    avx512_gemm(M, N, K, alpha, a, a_row, a_col, b, ldb, beta, c, ldc, band);
  else
    blas_tile_gemm(M, N, K, alpha, a, a_row, a_col, b, ldb, beta, c, ldc);
}

template <>
void tile_gemm<double>(int64_t M, int64_t N, int64_t K, double alpha, const double* a,
                       int64_t a_row, int64_t a_col, const double* b, int64_t ldb, double beta,
                       double* c, int64_t ldc, Band) {
  if (M <= 0 || N <= 0) return;
  blas_tile_gemm(M, N, K, alpha, a, a_row, a_col, b, ldb, beta, c, ldc);
}

}  // namespace gdn::cpu
