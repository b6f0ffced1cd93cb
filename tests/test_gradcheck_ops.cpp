// fp64 finite differences against autograd for every gradcheck row of the op table
// (src/ops/op_case_table.cpp, run by src/ops/op_gradchecks.cpp), two seeds each.
#include <gtest/gtest.h>

#include "src/ops/op_gradchecks.h"
#include "src/ops/ops.h"

namespace gdn {
namespace {

class OpGradcheck : public ::testing::TestWithParam<std::string> {};

TEST_P(OpGradcheck, MatchesFiniteDifferences) {
  for (uint64_t seed : {0, 1}) {
    auto report = ops::run_op_gradcheck(GetParam(), seed);
    ASSERT_FALSE(report.entries.empty());
    EXPECT_TRUE(report.ok()) << autograd::format_report({report});
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpGradcheck, ::testing::ValuesIn(ops::op_gradcheck_names()),
                         [](const auto& info) { return info.param; });

TEST(Gradcheck, DetectsAWrongGradient) {
  // The harness itself must fail on a wrong backward: d/dx of x*x reported as x.
  Tensor x = ops::randn({4}, DType::float64).set_requires_grad(true);
  auto f = [](const std::vector<Tensor>& in) {
    // forward x^2 with a backward of g*x (missing the factor 2): mul saves x, then we
    // detach one operand so only one path gets gradient.
    return ops::mul(in[0], in[0].detach());
  };
  auto report = autograd::gradcheck("wrong", f, {x}, {"x"});
  EXPECT_FALSE(report.ok());
}

}  // namespace
}  // namespace gdn
