// CUDA against CPU for every case of the op table (src/ops/op_case_table.cpp) at each of its
// parity dtypes: the output and every input gradient within the case's tolerance (or bit for
// bit), and a second CUDA run giving the same bits. One test per case and dtype, named
// <case>_<dtype>. Label `gpu`; exits 77 without a device.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "src/ops/op_cases.h"
#include "tests/op_parity.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

struct ParityCase {
  const ops::OpCase* op_case;
  DType dtype;
};

// Printed by GoogleTest on a failure.
void PrintTo(const ParityCase& p, std::ostream* os) {
  *os << p.op_case->name << " " << dtype_name(p.dtype);
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> cases;
  for (const ops::OpCase& c : ops::op_cases())
    for (DType dt : c.parity_dtypes) cases.push_back({&c, dt});
  return cases;
}

class CudaMatchesCpu : public ::testing::TestWithParam<ParityCase> {};

TEST_P(CudaMatchesCpu, OutputAndInputGradients) {
  test::expect_cuda_matches_cpu(*GetParam().op_case, GetParam().dtype);
}

INSTANTIATE_TEST_SUITE_P(OpTable, CudaMatchesCpu, ::testing::ValuesIn(parity_cases()),
                         [](const auto& info) {
                           return info.param.op_case->name + "_" + dtype_name(info.param.dtype);
                         });

}  // namespace
}  // namespace gdn
