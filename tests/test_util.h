// Helpers shared by the tests: CUDA requirement, tensor comparison at a tolerance.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::test {

bool& requires_cuda_flag();
struct RequireCuda {
  RequireCuda() { requires_cuda_flag() = true; }
};

// max|a - b| / max|b| (0 when both are zero).
inline double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return den > 0 ? num / den : num;
}
inline double rel_err(const Tensor& a, const Tensor& b) {
  return rel_err(a.to_vector(), b.to_vector());
}

inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  auto got = t.to_vector();
  ASSERT_EQ(got.size(), want.size()) << t.str();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "at " << i;
}

}  // namespace gdn::test

#define GDN_TEST_REQUIRES_CUDA() static ::gdn::test::RequireCuda gdn_requires_cuda_

// Skips a test of cuDNN's own paths where this machine has no usable cuDNN (it is opened at run
// time), saying what was found; the rest of the binary still runs.
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/optional_libraries.h"
#define GDN_SKIP_WITHOUT_CUDNN()            \
  if (!::gdn::cuda::cudnn_info().available) \
  GTEST_SKIP() << "cuDNN: " << ::gdn::cuda::cudnn_info().summary()
#endif
