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

uint64_t idx_seed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

GradcheckReport gradcheck(const std::string& what, const MultiFn& f,
                          const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                          const GradcheckOptions& opt) {
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
    std::vector<int64_t> elems;
    if (opt.max_elements > 0 && x.numel() > opt.max_elements) {
      // Seeded subset: first, last, and random ones in between.
      Generator pick(opt.seed + 31 * idx_seed(e.name));
      auto r =
          ops::randint({opt.max_elements - 2}, 1, x.numel() - 1, DType::int64, Device::cpu(), &pick)
              .to_vector();
      elems.push_back(0);
      for (double v : r) elems.push_back(int64_t(v));
      elems.push_back(x.numel() - 1);
    } else {
      for (int64_t i = 0; i < x.numel(); ++i) elems.push_back(i);
    }
    for (int64_t i : elems) {
      const double orig = p[i];
      p[i] = orig + opt.eps;
      double lp = project(f(inputs), weights);
      p[i] = orig - opt.eps;
      double lm = project(f(inputs), weights);
      p[i] = orig;
      const double fd = (lp - lm) / (2 * opt.eps), ag = autograd_grad[size_t(i)];
      e.max_abs_grad = std::max(e.max_abs_grad, std::abs(fd));
      e.max_abs_err = std::max(e.max_abs_err, std::abs(fd - ag));
      if (!std::isfinite(ag)) e.max_abs_err = INFINITY;
    }
    e.checked = int64_t(elems.size());
    e.max_rel_err = e.max_abs_err / std::max(e.max_abs_grad, 1e-300);
    e.ok = e.max_abs_err <= opt.atol + opt.rtol * e.max_abs_grad;
    report.entries.push_back(e);
  }
  return report;
}

GradcheckReport gradcheck(const std::string& what,
                          const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                          const GradcheckOptions& opt) {
  MultiFn mf = [&f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in)}; };
  return gradcheck(what, mf, inputs, names, opt);
}

std::string format_report(const std::vector<GradcheckReport>& reports) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-36s %-36s %8s %12s %12s  %s\n", "check", "input", "checked",
                "max abs err", "max rel err", "result");
  out += line;
  for (const auto& r : reports)
    for (const auto& e : r.entries) {
      const std::string checked = std::to_string(e.checked) + "/" + std::to_string(e.numel);
      std::snprintf(line, sizeof line, "%-36s %-36s %8s %12.3e %12.3e  %s\n", r.what.c_str(),
                    e.name.c_str(), checked.c_str(), e.max_abs_err, e.max_rel_err,
                    e.ok ? "ok" : "FAIL");
      out += line;
    }
  return out;
}

}  // namespace gdn::autograd
