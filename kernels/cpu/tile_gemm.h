// The GEMMs of attention tiles (a few hundred rows at most, on one thread):
//   C[M,N] = alpha * A B + beta * C,   A(i, k) = a[i * a_row + k * a_col],   B row-major [K, N].
// A is read through two strides, so a transposed operand (P^T, dS^T) costs no copy; B and C are
// row-major with leading dims ldb, ldc. With beta = 0, C is only written (never read).
// fp32 runs a register-blocked AVX-512 micro-kernel where the CPU has AVX-512 (no packing and
// no call overhead: OpenBLAS runs these shapes at ~60% of a core's peak); otherwise, and for
// fp64, cpu::gemm (BLAS), which needs one of the strides of A to be 1.
#pragma once
#include <cstdint>

namespace gdn::cpu {

// What a causal tile pair leaves out, so that the micro-kernel skips it (BLAS computes it all):
//   c_lower: only C(i, j) with j <= i + offset is wanted; C's other blocks may be left unwritten;
//   a_lower: A(i, k) = 0 for k > i + offset, so row i's products stop there;
//   a_upper: A(i, k) = 0 for k < i - offset, so row i's products start there.
// Skipped products are exact zeros: the result has the bits of the full product (finite B).
struct Band {
  enum Kind { none, c_lower, a_lower, a_upper } kind = none;
  int64_t offset = 0;
};

template <typename T>
void tile_gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t a_row, int64_t a_col,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc, Band band = {});

// Whether tile_gemm<float> runs the AVX-512 micro-kernel on this CPU.
bool tile_gemm_uses_avx512();

}  // namespace gdn::cpu
