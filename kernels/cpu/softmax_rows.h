// Row loops of the softmax in the attention kernels (kernels/cpu/attention.cpp). The fp32 loops
// are compiled for AVX-512 and AVX2 besides the baseline and picked at load time for the CPU (as
// kernels/cpu/fast_exp.h); their reductions keep 16 partial sums (or maxima), so they vectorise
// where a one-accumulator loop would wait on each add's latency.
#pragma once
#include <cstdint>

namespace gdn::cpu {

// max(init, x[0], ..., x[n-1]).
float row_max(const float* x, int64_t n, float init);
double row_max(const double* x, int64_t n, double init);

// out[j] = e^(x[j] - shift) for j < n (in place allowed); returns the sum of out.
float exp_shifted_sum(const float* x, float shift, int64_t n, float* out);
double exp_shifted_sum(const double* x, double shift, int64_t n, double* out);

// The softmax's input gradient from its output p and dp = dL/dp: dp[j] = p[j] (dp[j] - delta),
// delta = sum_j p[j] dp[j] given.
void softmax_grad_row(const float* p, float delta, int64_t n, float* dp);
void softmax_grad_row(const double* p, double delta, int64_t n, double* dp);

}  // namespace gdn::cpu
