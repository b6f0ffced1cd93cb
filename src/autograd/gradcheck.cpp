// Finite differences: dL/dx_i ~ (L(x + eps e_i) - L(x - eps e_i)) / (2 eps), error O(eps^2).
#include "src/autograd/gradcheck.h"

#include <cmath>
#include <cstdio>

#include "src/autograd/node.h"
#include "src/ops/ops.h"

namespace gdn::autograd {

bool GradcheckReport::ok() const {
  for (const auto& e : entries)
    if (!e.ok) return false;
  return true;
}

namespace {

double project(const std::vector<Tensor>& outs, const std::vector<Tensor>& weights) {
  double total = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined()) continue;
    auto o = outs[k].to_vector();
    auto w = weights[k].to_vector();
    for (size_t i = 0; i < o.size(); ++i) total += o[i] * w[i];
  }
  return total;
}

}  // namespace

GradcheckReport gradcheck(const std::string& what, const MultiFn& f,
                          const std::vector<Tensor>& inputs,
                          const std::vector<std::string>& names, const GradcheckOptions& opt) {
  GDN_CHECK(names.size() == inputs.size(), "gradcheck: ", names.size(), " names for ",
            inputs.size(), " inputs");
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad())
      GDN_CHECK(t.dtype() == DType::float64 && t.device().is_cpu() && t.is_contiguous(),
                "gradcheck needs contiguous float64 cpu inputs, got ", t.str());
  Generator gen(opt.seed);
  GradcheckReport report;
  report.what = what;

  // Autograd gradients of L = sum <out_k, R_k>.
  std::vector<Tensor> outs = f(inputs);
  std::vector<Tensor> weights, roots, seeds;
  for (const Tensor& o : outs) {
    Tensor w = o.defined() ? ops::randn(o.shape(), DType::float64, Device::cpu(), &gen) : Tensor();
    weights.push_back(w);
    if (o.defined() && o.requires_grad()) {
      roots.push_back(o);
      seeds.push_back(w);
    }
  }
  for (const Tensor& t : inputs)
    if (t.defined()) const_cast<Tensor&>(t).set_grad(Tensor());
  if (!roots.empty()) run_backward(roots, seeds, false);

  NoGradGuard no_grad;
  for (size_t idx = 0; idx < inputs.size(); ++idx) {
    const Tensor& x = inputs[idx];
    if (!x.defined() || !x.requires_grad()) continue;
    GradcheckEntry e;
    e.name = names[idx];
    e.numel = x.numel();
    Tensor g = x.grad();
    std::vector<double> autograd_grad =
        g.defined() ? g.to_vector() : std::vector<double>(size_t(x.numel()), 0.0);
    double* p = x.data<double>();
    std::vector<double> fd(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double orig = p[i];
      p[i] = orig + opt.eps;
      double lp = project(f(inputs), weights);
      p[i] = orig - opt.eps;
      double lm = project(f(inputs), weights);
      p[i] = orig;
      fd[size_t(i)] = (lp - lm) / (2 * opt.eps);
    }
    for (size_t i = 0; i < fd.size(); ++i) {
      e.max_abs_grad = std::max(e.max_abs_grad, std::abs(fd[i]));
      e.max_abs_err = std::max(e.max_abs_err, std::abs(fd[i] - autograd_grad[i]));
      if (!std::isfinite(autograd_grad[i])) e.max_abs_err = INFINITY;
    }
    e.max_rel_err = e.max_abs_err / std::max(e.max_abs_grad, 1e-300);
    e.ok = e.max_abs_err <= opt.atol + opt.rtol * e.max_abs_grad;
    report.entries.push_back(e);
  }
  return report;
}

GradcheckReport gradcheck(const std::string& what,
                          const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs,
                          const std::vector<std::string>& names, const GradcheckOptions& opt) {
  MultiFn mf = [&f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in)}; };
  return gradcheck(what, mf, inputs, names, opt);
}

std::string format_report(const std::vector<GradcheckReport>& reports) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %-14s %8s %12s %12s  %s\n", "check", "input", "numel",
                "max abs err", "max rel err", "result");
  out += line;
  for (const auto& r : reports)
    for (const auto& e : r.entries) {
      std::snprintf(line, sizeof line, "%-28s %-14s %8lld %12.3e %12.3e  %s\n", r.what.c_str(),
                    e.name.c_str(), (long long)e.numel, e.max_abs_err, e.max_rel_err,
                    e.ok ? "ok" : "FAIL");
      out += line;
    }
  return out;
}

}  // namespace gdn::autograd
