// The one table of op cases, in the style of ggml's test-backend-ops: each case names an op at
// some shapes, says how its inputs are drawn and which checks iterate it. Two checks do:
// the fp64 finite-difference gradient check (src/ops/op_gradchecks.cpp, `gdn gradcheck --op`)
// and CUDA against CPU on outputs and every input gradient (tests/test_cuda_parity.cpp). The
// rows live in src/ops/op_case_table.cpp; adding an op to both checks is one row there.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "src/core/tensor.h"

namespace gdn::ops {

// How one input of a case is drawn. Floating kinds are drawn in fp32 (fp64 for fp64 cases)
// and cast to the case's dtype; integer kinds keep their own dtype whatever the case's is.
struct InputSpec {
  enum class Kind {
    normal,          // N(0, scale^2)
    positive,        // |N(0, 1)| + 0.5: the domain of log, sqrt, rsqrt, pow
    away_from_zero,  // N(0, 1) pushed 0.5 away from 0: div's divisor, abs's kink
    small_ints,      // integers in [-3, 3): many ties, for max
    indices,         // integers in [0, high) of dtype `index_dtype`
    fixed,           // `values` of dtype `index_dtype` (targets with ignored rows, token ids)
  };
  Kind kind = Kind::normal;
  Shape shape;
  double scale = 1.0;
  int64_t high = 0;
  DType index_dtype = DType::int64;
  std::vector<double> values;

  static InputSpec normal(Shape s, double scale = 1.0);
  static InputSpec positive(Shape s);
  static InputSpec away_from_zero(Shape s);
  static InputSpec small_ints(Shape s);
  static InputSpec indices(Shape s, int64_t high, DType dtype = DType::int64);
  static InputSpec fixed(std::vector<double> values, Shape s, DType dtype = DType::int64);
};

// Bound on max|cuda - cpu| / max|cpu| per dtype; `bitwise`: the kernels promise the CPU's bits.
struct Tolerance {
  double fp64 = 0, fp32 = 0, half = 0;  // half: bf16 and fp16
  bool bitwise = false;
  double at(DType dtype) const;
};

// CPU and CUDA sum in another order: fp64 to ~1e-12, fp32 to ~1e-6 of the largest value (1e-4
// leaves room for long sums); bf16 and fp16 outputs round to 8 / 11 bits: one ulp of the largest.
inline constexpr Tolerance kReorderedSums{1e-10, 1e-4, 2e-2};
// Element-wise kernels compute the same expression in the same precision: a few ulps; half
// types round once more.
inline constexpr Tolerance kSameExpression{1e-12, 1e-6, 1e-2};
inline constexpr Tolerance kBitwise{0, 0, 0, true};

struct OpCase {
  using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
  std::string name;  // [a-z0-9_]: also a test and a `gdn gradcheck --op` name
  std::vector<InputSpec> inputs;
  Fn fn;
  bool gradcheck = false;            // fp64 finite differences against autograd
  std::vector<DType> parity_dtypes;  // CUDA against CPU at each of these (none: not compared)
  Tolerance tolerance = kReorderedSums;
};

// Every case, in table order.
const std::vector<OpCase>& op_cases();
// The case named `name`; throws listing the known names.
const OpCase& op_case(const std::string& name);

// The inputs of `c` at `dtype` on `device`, drawn on the CPU from seed `seed` (so every device
// gets the same values); floating inputs require grad.
std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed = 0);

// Runs `c` on `device` and backpropagates a fixed random upstream gradient (the same on every
// device); returns the output's values, then each floating input's gradient (empty if none).
std::vector<std::vector<double>> run_op_case(const OpCase& c, DType dtype, Device device,
                                             uint64_t seed = 0);

}  // namespace gdn::ops
