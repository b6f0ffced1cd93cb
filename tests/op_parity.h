// CUDA against CPU for one case of the op table (src/ops/op_cases.h), shared by the table's
// own test (tests/test_cuda_parity.cpp) and the hand-written CUDA tests that run a case under a
// special setting (tests/test_cuda_nn.cpp: the conv on cuDNN).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "src/ops/op_cases.h"
#include "tests/test_util.h"

namespace gdn::test {

// Runs `c` at `dtype` on the CPU and twice on CUDA device 0. The output and every input
// gradient must agree within the case's tolerance (bit for bit if it promises the CPU's bits),
// and the two CUDA runs must give the same bits.
inline void expect_cuda_matches_cpu(const ops::OpCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + dtype_name(dtype));
  const Device cuda = Device::cuda(0);
  const auto cpu = ops::run_op_case(c, dtype, Device::cpu());
  const auto gpu = ops::run_op_case(c, dtype, cuda);
  const auto again = ops::run_op_case(c, dtype, cuda);
  const double tol = c.tolerance.at(dtype);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const char* what = i == 0 ? "output" : "grad of input";
    ASSERT_EQ(gpu[i].size(), cpu[i].size()) << what << " " << i;
    if (c.tolerance.bitwise)
      EXPECT_EQ(gpu[i], cpu[i]) << what << " " << i;
    else
      EXPECT_LE(rel_err(gpu[i], cpu[i]), tol) << what << " " << i;
    EXPECT_EQ(again[i], gpu[i]) << what << " " << i << ": not bitwise reproducible";
  }
}

}  // namespace gdn::test
