// The gradient-check harness: fp64 central finite differences against autograd.
// f maps inputs to outputs; the scalar checked is L = sum_k <out_k, R_k> with fixed random R_k,
// so every output element contributes. Used by the unit tests and `gdn gradcheck`.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-8;  // pass if max|auto - fd| <= atol + rtol * max|fd|
  double rtol = 1e-6;
  uint64_t seed = 1234;
  // Check at most this many elements per input (a seeded random subset, always including the
  // first and last); 0 checks every element.
  int64_t max_elements = 0;
};

struct GradcheckEntry {
  std::string name;  // input (or parameter) name
  int64_t numel = 0;
  int64_t checked = 0;  // elements compared against finite differences
  double max_abs_err = 0, max_rel_err = 0, max_abs_grad = 0;
  bool ok = true;
};

struct GradcheckReport {
  std::string what;
  std::vector<GradcheckEntry> entries;
  bool ok() const;
};

using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Checks d L / d input for every input that requires grad (float64 tensors on the CPU).
GradcheckReport gradcheck(const std::string& what, const MultiFn& f,
                          const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                          const GradcheckOptions& opt = {});

// Single-output convenience.
GradcheckReport gradcheck(const std::string& what,
                          const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                          const GradcheckOptions& opt = {});

// A table: what, input, numel, max abs err, max rel err, ok.
std::string format_report(const std::vector<GradcheckReport>& reports);

}  // namespace gdn::autograd
