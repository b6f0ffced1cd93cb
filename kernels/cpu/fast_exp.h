// exp for the CPU kernels' inner loops (gated-delta-rule decay factors, softmax): fp32 as a
// Cephes-style polynomial (about 1 ulp, 2^n assembled in the exponent bits) written without float
// branches so that a loop over it vectorises; std::exp is a library call per element.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace gdn::cpu {

// Inlined even into the target_clones copies of a kernel (simd.h), where the loop around it
// vectorises; a call per element would not.
#define GDN_FAST_MATH_INLINE inline __attribute__((always_inline))

// e^x for fp32: exponents below -87 give 0 (no denormals), above 87 clamp to e^87.
GDN_FAST_MATH_INLINE float exp_clamped(float x) {
  uint32_t ux;
  std::memcpy(&ux, &x, 4);
  const uint32_t mag = ux & 0x7fffffffu, lim = 0x42ae0000u;  // 87.0f
  const uint32_t keep = (mag < lim || !(ux >> 31)) ? 0xffffffffu : 0u;
  const uint32_t uc = (mag < lim ? mag : lim) | (ux & 0x80000000u);
  float xc;
  std::memcpy(&xc, &uc, 4);
  const float nf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x log2 e)
  const float r = (xc - nf * 0.693359375f) + nf * 2.12194440e-4f;            // x - n ln 2
  float q = 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  q = q * r * r + r + 1.0f;                                          // e^r
  const uint32_t bits = (uint32_t(int32_t(nf) + 127) << 23) & keep;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, 4);
  return q * scale;
}
// fp64 keeps the library's exp.
GDN_FAST_MATH_INLINE double exp_clamped(double x) {
  return std::exp(x);
}

// 1 / (1 + e^-x) on exp_clamped: a loop over it vectorises (fp32); fp64 on the library's exp.
GDN_FAST_MATH_INLINE float sigmoid_fast(float x) {
  return 1.0f / (1.0f + exp_clamped(-x));
}
GDN_FAST_MATH_INLINE double sigmoid_fast(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace gdn::cpu
