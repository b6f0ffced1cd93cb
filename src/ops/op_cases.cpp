// The machinery of the op-case table (src/ops/op_cases.h): drawing a case's inputs, running it
// forward and backward on a device, finding a case by name. The rows are in op_case_table.cpp.
#include "src/ops/op_cases.h"

#include <utility>

#include "src/ops/ops.h"

namespace gdn::ops {

InputSpec InputSpec::normal(Shape s, double scale) {
  InputSpec in;
  in.shape = std::move(s);
  in.scale = scale;
  return in;
}

InputSpec InputSpec::positive(Shape s) {
  InputSpec in = normal(std::move(s));
  in.kind = Kind::positive;
  return in;
}

InputSpec InputSpec::away_from_zero(Shape s) {
  InputSpec in = normal(std::move(s));
  in.kind = Kind::away_from_zero;
  return in;
}

InputSpec InputSpec::small_ints(Shape s) {
  InputSpec in = normal(std::move(s));
  in.kind = Kind::small_ints;
  return in;
}

InputSpec InputSpec::indices(Shape s, int64_t high, DType dtype) {
  InputSpec in = normal(std::move(s));
  in.kind = Kind::indices;
  in.high = high;
  in.index_dtype = dtype;
  return in;
}

InputSpec InputSpec::fixed(std::vector<double> values, Shape s, DType dtype) {
  InputSpec in = normal(std::move(s));
  in.kind = Kind::fixed;
  in.values = std::move(values);
  in.index_dtype = dtype;
  return in;
}

double Tolerance::at(DType dtype) const {
  switch (dtype) {
    case DType::float64:
      return fp64;
    case DType::float32:
      return fp32;
    default:
      return half;
  }
}

namespace {

// One input on the CPU. Floating values are drawn at fp64 for fp64 cases (the gradient check's
// inputs, unrounded), else at fp32, and only then cast, so every dtype sees the same numbers.
Tensor draw(const InputSpec& in, DType dtype, Generator& gen) {
  using Kind = InputSpec::Kind;
  const Device cpu = Device::cpu();
  switch (in.kind) {
    case Kind::indices:
      return randint(in.shape, 0, in.high, in.index_dtype, cpu, &gen);
    case Kind::fixed:
      return from_vector(in.values, in.shape, in.index_dtype);
    case Kind::small_ints:
      return cast(randint(in.shape, -3, 3, DType::int64, cpu, &gen), dtype);
    default:
      break;
  }
  const DType drawn = dtype == DType::float64 ? DType::float64 : DType::float32;
  Tensor t = randn(in.shape, drawn, cpu, &gen);
  if (in.scale != 1.0) t = mul(t, in.scale);
  if (in.kind == Kind::positive) t = add(abs(t), 0.5);
  if (in.kind == Kind::away_from_zero) {
    auto v = t.to_vector();
    for (double& x : v) x = x >= 0 ? x + 0.5 : x - 0.5;
    t = from_vector(v, in.shape, drawn);
  }
  return cast(t, dtype);
}

}  // namespace

const OpCase& op_case(const std::string& name) {
  for (const OpCase& c : op_cases())
    if (c.name == name) return c;
  std::string known;
  for (const OpCase& c : op_cases()) known += " " + c.name;
  GDN_FAIL("unknown op case '", name, "'; known:", known);
}

std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed) {
  Generator gen(seed + 17);  // one stream for all inputs, in order
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) {
    Tensor t = draw(spec, dtype, gen);
    if (!device.is_cpu()) t = to_device(t, device);
    t = t.detach();
    if (is_floating(t.dtype())) t.set_requires_grad(true);
    inputs.push_back(t);
  }
  return inputs;
}

std::vector<std::vector<double>> run_op_case(const OpCase& c, DType dtype, Device device,
                                             uint64_t seed) {
  std::vector<Tensor> inputs = make_inputs(c, dtype, device, seed);
  Tensor y = c.fn(inputs);
  std::vector<std::vector<double>> out{y.to_vector()};
  Generator g(99);
  Tensor dy = cast(randn(y.shape(), DType::float32, Device::cpu(), &g), y.dtype());
  y.backward(to_device(dy, device));
  for (const Tensor& x : inputs)
    if (x.requires_grad())
      out.push_back(x.grad().defined() ? x.grad().to_vector() : std::vector<double>());
  return out;
}

}  // namespace gdn::ops
