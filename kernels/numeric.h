// Numeric types shared by CPU and CUDA kernels: bfloat16 and float16 storage types with
// round-to-nearest-even conversion, and the accumulator type each input type computes in.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define GDN_HD __host__ __device__ __forceinline__
#else
#define GDN_HD inline
#endif

namespace gdn {

GDN_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
GDN_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// bfloat16: the top 16 bits of a float32. Conversion rounds to nearest, ties to even; NaN stays
// NaN (quiet), infinities stay infinite.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  GDN_HD explicit bf16(float f) : bits(from_float(f)) {}
  GDN_HD operator float() const { return bits_float(uint32_t(bits) << 16); }
  GDN_HD static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return uint16_t(u >> 16);
  }
};

// IEEE float16 (binary16), conversion with round to nearest even, subnormals handled.
struct fp16 {
  uint16_t bits = 0;
  fp16() = default;
  GDN_HD explicit fp16(float f) : bits(from_float(f)) {}
  GDN_HD operator float() const { return to_float(bits); }
  GDN_HD static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
    if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow -> inf
    if (ax < 0x38800000u) {                                  // subnormal or zero in fp16
      if (ax < 0x33000000u) return uint16_t(sign);           // below half the min subnormal
      // value = mant * 2^(e-150) with the implicit bit; in units of 2^-24: mant >> (126 - e)
      uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
      int rshift = 126 - int(ax >> 23);  // in [14, 24]
      uint32_t q = mant >> rshift;
      uint32_t rem = mant & ((1u << rshift) - 1u);
      uint32_t half = 1u << (rshift - 1);
      if (rem > half || (rem == half && (q & 1u))) ++q;
      return uint16_t(sign | q);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u) - 0x38000000u;  // rebias 127 -> 15, round
    return uint16_t(sign | (r >> 13));
  }
  GDN_HD static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
      if (m == 0) return bits_float(sign);
      float v = float(m) * (1.0f / 16777216.0f);  // m * 2^-24
      return sign ? -v : v;
    }
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  }
};

// The type a kernel accumulates in for a given input type: fp64 stays fp64, all else is fp32.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
GDN_HD acc_t<T> to_acc(T x) {
  return static_cast<acc_t<T>>(static_cast<float>(x));
}
GDN_HD double to_acc(double x) {
  return x;
}
GDN_HD float to_acc(float x) {
  return x;
}

template <typename T>
GDN_HD T from_acc(acc_t<T> x) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    return static_cast<T>(x);
  } else {
    return T(static_cast<float>(x));
  }
}

}  // namespace gdn
