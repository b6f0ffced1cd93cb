// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator. Element i of a draw uses
// counter (offset + i), so results do not depend on threads, devices or chunking.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/numeric.h"

namespace gdn::kern {

struct Philox4 {
  uint32_t x[4];
};

GDN_HD Philox4 philox4x32(uint64_t counter, uint64_t key) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c0 = n0;
    c1 = uint32_t(p1);
    c2 = n2;
    c3 = uint32_t(p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 53 random bits.
GDN_HD double philox_uniform(uint64_t counter, uint64_t key) {
  Philox4 r = philox4x32(counter, key);
  uint64_t bits = (uint64_t(r.x[0]) << 21) ^ uint64_t(r.x[1] >> 11);
  return double(bits & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller on two 32-bit words (u1 in (0, 1]).
GDN_HD double philox_normal(uint64_t counter, uint64_t key) {
  Philox4 r = philox4x32(counter, key);
  double u1 = (double(r.x[0]) + 1.0) * (1.0 / 4294967296.0);
  double u2 = double(r.x[1]) * (1.0 / 4294967296.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace gdn::kern
