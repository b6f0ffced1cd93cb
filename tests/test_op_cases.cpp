// The op table itself (src/ops/op_cases.h), on the CPU, so a bad row shows without a GPU:
// names are unique and usable as test names, every case joins a check, every parity case runs
// forward and backward at each of its dtypes with a gradient for each floating input and the
// same bits twice, and the gradient checks are exactly the table's gradcheck rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "src/ops/op_cases.h"
#include "src/ops/op_gradchecks.h"

namespace gdn {
namespace {

TEST(OpCases, NamesAreUniqueTestNames) {
  std::set<std::string> seen;
  for (const ops::OpCase& c : ops::op_cases()) {
    EXPECT_TRUE(seen.insert(c.name).second) << "twice: " << c.name;
    EXPECT_FALSE(c.name.empty());
    for (char ch : c.name)
      EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_') << c.name;
    EXPECT_TRUE(c.gradcheck || !c.parity_dtypes.empty()) << c.name << " joins no check";
    EXPECT_EQ(&ops::op_case(c.name), &c);
  }
  EXPECT_THROW(ops::op_case("no_such_case"), Error);
}

TEST(OpCases, GradchecksAreTheGradcheckRows) {
  std::vector<std::string> rows;
  for (const ops::OpCase& c : ops::op_cases())
    if (c.gradcheck) rows.push_back(c.name);
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(ops::op_gradcheck_names(), rows);
}

TEST(OpCases, ParityCasesRunOnTheCpu) {
  for (const ops::OpCase& c : ops::op_cases()) {
    for (DType dt : c.parity_dtypes) {
      SCOPED_TRACE(c.name + " " + dtype_name(dt));
      const auto inputs = ops::make_inputs(c, dt, Device::cpu());
      const auto run = ops::run_op_case(c, dt, Device::cpu());
      size_t floating = 0;
      for (const Tensor& x : inputs) {
        if (!is_floating(x.dtype())) continue;
        EXPECT_EQ(x.dtype(), dt);
        ASSERT_LT(1 + floating, run.size());
        EXPECT_EQ(run[1 + floating].size(), size_t(x.numel())) << "no gradient for input";
        ++floating;
      }
      EXPECT_EQ(run.size(), 1 + floating);
      EXPECT_FALSE(run[0].empty());
      EXPECT_EQ(ops::run_op_case(c, dt, Device::cpu()), run) << "inputs not reproducible";
    }
  }
}

}  // namespace
}  // namespace gdn
