// fp64 finite differences against autograd for every layer (inputs and parameters), a
// 2-layer CausalLM end to end, and every gated-delta-rule implementation through autograd.
#include <gtest/gtest.h>

#include "layers/layer_gradchecks.h"

namespace gdn {
namespace {

class LayerGradcheck : public ::testing::TestWithParam<std::string> {};
TEST_P(LayerGradcheck, MatchesFiniteDifferences) {
  auto report = nn::run_layer_gradcheck(GetParam(), 0);
  ASSERT_FALSE(report.entries.empty());
  EXPECT_TRUE(report.ok()) << autograd::format_report({report});
}
INSTANTIATE_TEST_SUITE_P(AllLayers, LayerGradcheck,
                         ::testing::ValuesIn(nn::layer_gradcheck_names()),
                         [](const auto& info) { return info.param; });

class KernelGradcheck : public ::testing::TestWithParam<std::string> {};
TEST_P(KernelGradcheck, MatchesFiniteDifferences) {
  for (uint64_t seed : {0, 1}) {
    auto report = nn::run_kernel_gradcheck(GetParam(), seed);
    ASSERT_FALSE(report.entries.empty());
    EXPECT_TRUE(report.ok()) << autograd::format_report({report});
  }
}
INSTANTIATE_TEST_SUITE_P(AllKernels, KernelGradcheck,
                         ::testing::ValuesIn(nn::kernel_gradcheck_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gdn
