// The op gradient checks (fp64 finite differences vs autograd at small random sizes): the
// gradcheck rows of the op table (src/ops/op_cases.h), run by tests/test_gradcheck_ops.cpp and
// `gdn gradcheck --op`.
#pragma once
#include <string>
#include <vector>

#include "src/autograd/gradcheck.h"

namespace gdn::ops {

std::vector<std::string> op_gradcheck_names();
// Runs one named check ("all" is not accepted here); throws on an unknown name.
autograd::GradcheckReport run_op_gradcheck(const std::string& name, uint64_t seed = 0);

}  // namespace gdn::ops
