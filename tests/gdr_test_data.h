// Test data of the gated delta rule shared by the kernel tests (test_gdr_kernels,
// test_fused_emulation): inputs as the model makes them, rounding to what a kernel of a given
// dtype sees, and the comparison of every output against a reference (max|x - ref| / max|ref|).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gated_delta_rule.h"
#include "tests/delta_rule_test_data.h"

namespace gdn::gdr::test_data {

// Vec, Data, Result, cast, to_double, ...: every family's (tests/delta_rule_test_data.h).
using namespace delta_rule::test_data;

enum class Gates { realistic, no_decay, strong_decay, beta_zero, beta_one };

inline double softplus(double x) {
  return x > 20 ? x : std::log1p(std::exp(x));
}

// As the model produces them: k L2-normalised per head, beta = sigmoid, g = -softplus * 0.1.
inline Data make_data(const Problem& p, Gates gates, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0, 1);
  auto normal = [&](int64_t n, double std) {
    return delta_rule::test_data::normal(rng, n01, n, std);
  };
  Data d;
  d.q = normal(p.B * p.T * p.H * p.K, 1);
  d.k = normal(p.B * p.T * p.H * p.K, 1);
  delta_rule::test_data::l2_normalise_rows(d.k, p.K);
  d.v = normal(p.B * p.T * p.HV * p.V, 1);
  const int64_t ng = p.B * p.T * p.HV;
  d.g.resize(ng);
  d.beta.resize(ng);
  for (int64_t i = 0; i < ng; ++i) {
    d.g[i] = -0.1 * softplus(n01(rng));
    d.beta[i] = 1 / (1 + std::exp(-n01(rng)));
    if (gates == Gates::no_decay) d.g[i] = 0;
    if (gates == Gates::strong_decay) d.g[i] = -5 - std::abs(n01(rng));
    if (gates == Gates::beta_zero) d.beta[i] = 0;
    if (gates == Gates::beta_one) d.beta[i] = 1;
  }
  d.h0 = normal(p.B * p.HV * p.K * p.V, 0.5);
  d.d_o = normal(p.B * p.T * p.HV * p.V, 1);
  d.dht = normal(p.B * p.HV * p.K * p.V, 1);
  return d;
}

// The values a T-typed (input) / acc-typed (state) run actually sees.
template <typename T>
Data round_to(const Data& d) {
  using A = acc_t<T>;
  Data r;
  r.q = to_double(cast<T>(d.q));
  r.k = to_double(cast<T>(d.k));
  r.v = to_double(cast<T>(d.v));
  r.g = to_double(cast<T>(d.g));
  r.beta = to_double(cast<T>(d.beta));
  r.d_o = to_double(cast<T>(d.d_o));
  r.h0 = to_double(cast<A>(d.h0));
  r.dht = to_double(cast<A>(d.dht));
  return r;
}

// A Problem of these sizes, scale K^-1/2, no initial or final state.
inline Problem problem_of(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V,
                          int chunk, Impl impl) {
  Problem p = delta_rule::test_data::sized<Problem>(B, T, H, HV, K, V, chunk);
  p.impl = impl;
  return p;
}

// The gradients of a backward into r, in fp64 (dh0 only when p has h0).
template <typename T, typename A>
void store_gradients(const Problem& p, const std::vector<T>& dq, const std::vector<T>& dk,
                     const std::vector<T>& dv, const std::vector<T>& dg,
                     const std::vector<T>& dbeta, const std::vector<A>& dh0, Result& r) {
  r.dq = to_double(dq);
  r.dk = to_double(dk);
  r.dv = to_double(dv);
  r.dg = to_double(dg);
  r.dbeta = to_double(dbeta);
  if (p.has_h0) r.dh0 = to_double(dh0);
}

// Forward (and backward when `backward`) through the public CPU API, inputs cast to T; h0, ht, dht
// and dh0 have a row per sequence (p.num_seqs()).
template <typename T>
Result run(const Problem& p, const Data& d, bool backward = true) {
  using A = acc_t<T>;
  const auto q = cast<T>(d.q), k = cast<T>(d.k), v = cast<T>(d.v), g = cast<T>(d.g),
             beta = cast<T>(d.beta), d_o = cast<T>(d.d_o);
  const auto h0 = cast<A>(d.h0), dht = cast<A>(d.dht);
  std::vector<T> o(v.size());
  std::vector<A> ht(p.num_seqs() * p.HV * p.K * p.V), residual(residual_elems(p)),
      fws(std::max<int64_t>(1, forward_workspace_elems(p))),
      bws(std::max<int64_t>(1, backward_workspace_elems(p)));
  Inputs<T> in{q.data(),
               k.data(),
               v.data(),
               g.data(),
               p.impl == Impl::ssd ? nullptr : beta.data(),
               p.has_h0 ? h0.data() : nullptr};
  forward_cpu(
      p, in,
      ForwardOutputs<T>{o.data(), p.want_ht ? ht.data() : nullptr, residual.data(), fws.data()});
  Result r;
  r.o = to_double(o);
  if (p.want_ht) r.ht = to_double(ht);
  if (!backward) return r;
  std::vector<T> dq(q.size()), dk(k.size()), dv(v.size()), dg(g.size()), dbeta(g.size());
  std::vector<A> dh0(ht.size());
  backward_cpu(p, in,
               BackwardArgs<T>{d_o.data(), p.want_ht ? dht.data() : nullptr, residual.data(),
                               bws.data(), dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(),
                               p.has_h0 ? dh0.data() : nullptr});
  store_gradients(p, dq, dk, dv, dg, dbeta, dh0, r);
  return r;
}

inline double rel_err(const Vec& x, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

inline void expect_close(const Result& x, const Result& ref, double tol, bool ssd = false,
                         const std::string& what = "") {
  for (const auto& [name, out, out_ref] : delta_rule::test_data::compared(x, ref)) {
    if (ssd && std::string(name) == "dbeta") continue;
    ASSERT_EQ(out->size(), out_ref->size()) << what << " " << name;
    for (double e : *out) ASSERT_TRUE(std::isfinite(e)) << what << " " << name << " inf/nan";
    const double err = rel_err(*out, *out_ref);
    if (std::getenv("GDN_TEST_VERBOSE")) std::printf("    %-6s rel err %.3g\n", name, err);
    EXPECT_LE(err, tol) << what << " " << name;
  }
}

// Forward and backward of an fp64 kernel on `d` as given: forward(p, in, out) and
// backward(p, in, args), with a residual and workspaces of these sizes.
template <class Forward, class Backward>
Result run_fp64(const Problem& p, const Data& d, int64_t residual_elems, int64_t forward_ws,
                int64_t backward_ws, const Forward& forward, const Backward& backward) {
  Vec o(d.v.size()), ht(d.h0.size()), residual(residual_elems),
      fws(std::max<int64_t>(1, forward_ws)), bws(std::max<int64_t>(1, backward_ws));
  const Inputs<double> in{d.q.data(),
                          d.k.data(),
                          d.v.data(),
                          d.g.data(),
                          p.impl == Impl::ssd ? nullptr : d.beta.data(),
                          p.has_h0 ? d.h0.data() : nullptr};
  forward(p, in,
          ForwardOutputs<double>{o.data(), p.want_ht ? ht.data() : nullptr, residual.data(),
                                 fws.data()});
  Result r;
  r.o = o;
  if (p.want_ht) r.ht = ht;
  r.dq.resize(d.q.size());
  r.dk.resize(d.k.size());
  r.dv.resize(d.v.size());
  r.dg.resize(d.g.size());
  r.dbeta.resize(d.g.size());
  r.dh0.resize(p.has_h0 ? d.h0.size() : 0);
  backward(p, in,
           BackwardArgs<double>{d.d_o.data(), p.want_ht ? d.dht.data() : nullptr, residual.data(),
                                bws.data(), r.dq.data(), r.dk.data(), r.dv.data(), r.dg.data(),
                                r.dbeta.data(), p.has_h0 ? r.dh0.data() : nullptr});
  return r;
}

// The CPU fp64 recurrent reference (kernels/cpu/gdr_recurrent.cpp; proven against fp64 finite
// differences in test_gdr_kernels.cpp), on the same rounded values. For ssd the recurrent
// reference with beta = 1 is not ssd, so ssd is checked against the CPU ssd kernel in fp64.
inline Result reference(Problem p, const Data& d) {
  if (p.impl != Impl::ssd) p.impl = Impl::recurrent;
  p.residual = Residual::minimal;
  return run_fp64(p, d, residual_elems(p), forward_workspace_elems(p), backward_workspace_elems(p),
                  forward_cpu<double>, backward_cpu<double>);
}

}  // namespace gdn::gdr::test_data
