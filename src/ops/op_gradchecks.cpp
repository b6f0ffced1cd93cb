// Gradient checks of every differentiable op: the op table's gradcheck rows
// (src/ops/op_case_table.cpp), inputs drawn in fp64 from each op's safe domain (positive for
// log/sqrt/rsqrt, away from zero for div, distinct values for max), finite differences against
// autograd.
#include "src/ops/op_gradchecks.h"

#include <algorithm>

#include "src/ops/op_cases.h"

namespace gdn::ops {

std::vector<std::string> op_gradcheck_names() {
  std::vector<std::string> names;
  for (const OpCase& c : op_cases())
    if (c.gradcheck) names.push_back(c.name);
  std::sort(names.begin(), names.end());  // `gdn gradcheck --list` order
  return names;
}

autograd::GradcheckReport run_op_gradcheck(const std::string& name, uint64_t seed) {
  const auto& cases = op_cases();
  auto it = std::find_if(cases.begin(), cases.end(),
                         [&](const OpCase& c) { return c.gradcheck && c.name == name; });
  if (it == cases.end()) {
    std::string known;
    for (const auto& n : op_gradcheck_names()) known += " " + n;
    GDN_FAIL("unknown op gradcheck '", name, "'; known:", known);
  }
  const std::vector<Tensor> inputs = make_inputs(*it, DType::float64, Device::cpu(), seed);
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) names.push_back("x" + std::to_string(i));
  autograd::GradcheckOptions opt;
  opt.seed = seed + 99;
  return autograd::gradcheck("op " + name, it->fn, inputs, names, opt);
}

}  // namespace gdn::ops
