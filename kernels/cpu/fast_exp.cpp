// The exp loops of kernels/cpu/fast_exp.h. The fp32 one has clones for AVX-512 and AVX2 (the
// binaries target the x86-64 baseline, whose SSE2 loop does 4 exps at a time), chosen per CPU.
#include "kernels/cpu/fast_exp.h"

namespace gdn::cpu {

__attribute__((target_clones("avx512f", "avx2", "default"))) void exp_shifted(const float* x,
                                                                              float shift,
                                                                              int64_t n,
                                                                              float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = exp_clamped(x[j] - shift);
}

void exp_shifted(const double* x, double shift, int64_t n, double* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = std::exp(x[j] - shift);
}

}  // namespace gdn::cpu
