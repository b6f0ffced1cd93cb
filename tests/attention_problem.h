// An attention Problem of given sizes with the usual scale D^-1/2, for the attention tests.
#pragma once
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"

namespace gdn::test {

inline attn::Problem attention_problem(int64_t B, int64_t T, int64_t H, int64_t HKV, int64_t D,
                                       int64_t window = 0, std::vector<int64_t> cu = {}) {
  attn::Problem p;
  p.B = B;
  p.T = T;
  p.H = H;
  p.HKV = HKV;
  p.D = D;
  p.window = window;
  p.scale = 1.0 / std::sqrt(double(D));
  p.cu_seqlens = std::move(cu);
  return p;
}

}  // namespace gdn::test
