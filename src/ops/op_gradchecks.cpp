// Gradient checks of every differentiable op. Inputs are drawn from each op's safe domain
// (positive for log/sqrt/rsqrt, away from zero for div, distinct values for max).
#include "src/ops/op_gradchecks.h"

#include <functional>
#include <map>

#include "src/ops/linear_cross_entropy.h"
#include "src/ops/ops.h"

namespace gdn::ops {

namespace {

using autograd::GradcheckReport;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Check {
  std::vector<Shape> shapes;
  Fn f;
  enum Domain { any, positive, away_from_zero } domain = any;
};

Tensor input(const Shape& s, Check::Domain d, Generator& gen) {
  Tensor t = randn(s, DType::float64, Device::cpu(), &gen);
  if (d == Check::positive) t = add(abs(t), 0.5);
  if (d == Check::away_from_zero) {
    auto v = t.to_vector();
    for (double& x : v) x = x >= 0 ? x + 0.5 : x - 0.5;
    t = from_vector(v, s, DType::float64);
  }
  return t.set_requires_grad(true);
}

const std::map<std::string, Check>& registry() {
  static const std::map<std::string, Check> checks = {
      {"add", {{{3, 4}, {4}}, [](auto& x) { return add(x[0], x[1]); }}},
      {"sub", {{{2, 1, 3}, {4, 1}}, [](auto& x) { return sub(x[0], x[1]); }}},
      {"mul", {{{2, 3}, {2, 1}}, [](auto& x) { return mul(x[0], x[1]); }}},
      {"div", {{{3, 2}, {3, 2}}, [](auto& x) { return div(x[0], x[1]); }, Check::away_from_zero}},
      {"affine", {{{5}}, [](auto& x) { return affine(x[0], -1.5, 0.25); }}},
      {"pow", {{{5}}, [](auto& x) { return pow(x[0], 2.5); }, Check::positive}},
      {"exp", {{{6}}, [](auto& x) { return exp(x[0]); }}},
      {"log", {{{6}}, [](auto& x) { return log(x[0]); }, Check::positive}},
      {"sigmoid", {{{6}}, [](auto& x) { return sigmoid(x[0]); }}},
      {"silu", {{{6}}, [](auto& x) { return silu(x[0]); }}},
      {"softplus", {{{6}}, [](auto& x) { return softplus(mul(x[0], 3.0)); }}},
      {"rsqrt", {{{6}}, [](auto& x) { return rsqrt(x[0]); }, Check::positive}},
      {"sqrt", {{{6}}, [](auto& x) { return sqrt(x[0]); }, Check::positive}},
      {"square", {{{6}}, [](auto& x) { return square(x[0]); }}},
      {"tanh", {{{6}}, [](auto& x) { return tanh(x[0]); }}},
      {"abs", {{{6}}, [](auto& x) { return abs(x[0]); }, Check::away_from_zero}},
      {"sum",
       {{{2, 3, 4}},
        [](auto& x) {
          return sum(x[0], {0, 2});
        }}},
      {"sum_keepdim", {{{2, 3, 4}}, [](auto& x) { return sum(x[0], {1}, true); }}},
      {"mean", {{{2, 3, 4}}, [](auto& x) { return mean(x[0], {-1}); }}},
      {"max", {{{3, 5}}, [](auto& x) { return max(x[0], 1); }}},
      {"matmul", {{{3, 4}, {4, 5}}, [](auto& x) { return matmul(x[0], x[1]); }}},
      {"matmul_batched", {{{2, 3, 4}, {4, 2}}, [](auto& x) { return matmul(x[0], x[1]); }}},
      {"matmul_transposed",
       {{{4, 3}, {2, 5, 4}},
        [](auto& x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 1, 2)); }}},
      {"linear", {{{2, 3, 4}, {5, 4}, {5}}, [](auto& x) { return linear(x[0], x[1], x[2]); }}},
      {"softmax", {{{3, 5}}, [](auto& x) { return softmax(x[0], -1); }}},
      {"softmax_dim0", {{{3, 5}}, [](auto& x) { return softmax(x[0], 0); }}},
      {"log_softmax", {{{3, 5}}, [](auto& x) { return log_softmax(x[0], -1); }}},
      {"cross_entropy",
       {{{4, 7}},
        [](auto& x) {
          Tensor t = from_vector({3, -100, 0, 6}, {4}, DType::int64);
          return cross_entropy(x[0], t, -100);
        }}},
      {"linear_cross_entropy",
       {{{7, 4}, {5, 4}},
        [](auto& x) {
          Tensor t = from_vector({3, -100, 0, 4, 1, 1, 2}, {7}, DType::int64);
          return linear_cross_entropy(x[0], x[1], t, -100, 3);  // chunks of 3, 3, 1 rows
        }}},
      {"embedding",
       {{{5, 3}},
        [](auto& x) {
          Tensor idx = from_vector({4, 0, 4, 2, 1, 4}, {2, 3}, DType::int32);
          return embedding(x[0], idx);
        }}},
      {"rms_norm", {{{3, 6}, {6}}, [](auto& x) { return rms_norm(x[0], x[1], 1e-6); }}},
      {"l2_norm", {{{2, 3, 5}}, [](auto& x) { return l2_norm(x[0], 1e-6); }}},
      {"causal_conv1d",
       {{{2, 5, 3}, {3, 1, 4}}, [](auto& x) { return causal_conv1d(x[0], x[1]); }}},
      {"views",
       {{{2, 3, 4}},
        [](auto& x) {
          Tensor a = permute(x[0], {2, 0, 1});            // [4, 2, 3]
          Tensor b = slice(reshape(a, {8, 3}), 0, 2, 7);  // [5, 3]
          Tensor c = expand(unsqueeze(sum(b, {0}), 0), {2, 3});
          return concat({b, c, reshape(transpose(slice(a, 0, 0, 1), 1, 2), {2, 3})}, 0);
        }}},
  };
  return checks;
}

}  // namespace

std::vector<std::string> op_gradcheck_names() {
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  return names;
}

GradcheckReport run_op_gradcheck(const std::string& name, uint64_t seed) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : op_gradcheck_names()) known += " " + n;
    GDN_FAIL("unknown op gradcheck '", name, "'; known:", known);
  }
  Generator gen(seed + 17);
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  for (size_t i = 0; i < it->second.shapes.size(); ++i) {
    inputs.push_back(input(it->second.shapes[i], it->second.domain, gen));
    names.push_back("x" + std::to_string(i));
  }
  autograd::GradcheckOptions opt;
  opt.seed = seed + 99;
  return autograd::gradcheck("op " + name, it->second.f, inputs, names, opt);
}

}  // namespace gdn::ops
