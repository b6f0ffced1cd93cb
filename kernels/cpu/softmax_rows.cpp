// The softmax row loops of kernels/cpu/softmax_rows.h.
#include "kernels/cpu/softmax_rows.h"

#include <algorithm>

#include "kernels/cpu/fast_exp.h"

namespace gdn::cpu {

namespace {
constexpr int kLanes = 16;  // partial results: one AVX-512 vector of fp32
}

__attribute__((target_clones("avx512f", "avx2", "default"))) float row_max(const float* x,
                                                                           int64_t n, float init) {
  float part[kLanes];
  std::fill(part, part + kLanes, init);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] = part[l] > x[j + l] ? part[l] : x[j + l];
  for (; j < n; ++j) part[0] = std::max(part[0], x[j]);
  return *std::max_element(part, part + kLanes);
}

double row_max(const double* x, int64_t n, double init) {
  for (int64_t j = 0; j < n; ++j) init = std::max(init, x[j]);
  return init;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) float exp_shifted_sum(const float* x,
                                                                                   float shift,
                                                                                   int64_t n,
                                                                                   float* out) {
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float e = exp_clamped(x[j + l] - shift);
      out[j + l] = e;
      part[l] += e;
    }
  for (; j < n; ++j) {
    out[j] = exp_clamped(x[j] - shift);
    part[0] += out[j];
  }
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += part[l];
  return sum;
}

double exp_shifted_sum(const double* x, double shift, int64_t n, double* out) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += out[j] = std::exp(x[j] - shift);
  return sum;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void softmax_grad_row(const float* p,
                                                                                   float delta,
                                                                                   int64_t n,
                                                                                   float* dp) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - delta);
}

void softmax_grad_row(const double* p, double delta, int64_t n, double* dp) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - delta);
}

}  // namespace gdn::cpu
