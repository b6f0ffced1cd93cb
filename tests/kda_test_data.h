// Test data of Kimi Delta Attention shared by the KDA tests (test_kda_kernels, test_cuda_kda):
// inputs as a model makes them, an fp64 naive recurrence written here (forward and the loss the
// finite differences differentiate), running a kernel at a dtype, and comparisons (max|x - ref| /
// max|ref|).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kda.h"
#include "tests/delta_rule_test_data.h"

namespace gdn::kda::test_data {

// Vec, Data, Result, cast, to_double, ...: every family's (tests/delta_rule_test_data.h).
using namespace delta_rule::test_data;

// A Problem of these sizes, scale K^-1/2; packed when cu (cu_seqlens) is given.
inline Problem problem(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, int chunk,
                       Impl impl, bool h0, bool ht, std::vector<int64_t> cu = {}) {
  Problem p = delta_rule::test_data::sized<Problem>(B, T, H, HV, K, V, chunk);
  p.impl = impl;
  p.has_h0 = h0;
  p.want_ht = ht;
  p.cu_seqlens = std::move(cu);
  return p;
}

// q normal, k L2-normalised per head, v normal, beta = sigmoid(normal), g per channel uniform in
// [g_min, 0] (fla's `kda` gates are -exp(A) softplus(...): log decays of any size <= 0).
inline Data make_data(const Problem& p, double g_min, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0, 1);
  std::uniform_real_distribution<double> u01(0, 1);
  auto normal = [&](int64_t n, double std) {
    return delta_rule::test_data::normal(rng, n01, n, std);
  };
  const int64_t BT = p.B * p.T, N = p.num_seqs();
  Data d;
  d.q = normal(BT * p.H * p.K, 1);
  d.k = normal(BT * p.H * p.K, 1);
  delta_rule::test_data::l2_normalise_rows(d.k, p.K);
  d.v = normal(BT * p.HV * p.V, 1);
  d.g.resize(BT * p.HV * p.K);
  for (auto& e : d.g) e = g_min * u01(rng);
  d.beta.resize(BT * p.HV);
  for (auto& e : d.beta) e = 1 / (1 + std::exp(-n01(rng)));
  d.h0 = p.has_h0 ? normal(N * p.HV * p.K * p.V, 0.5) : Vec();
  d.d_o = normal(BT * p.HV * p.V, 1);
  d.dht = p.want_ht ? normal(N * p.HV * p.K * p.V, 1) : Vec();
  return d;
}

// The recurrence of kernels/kda.h in fp64, one step at a time: o and (when p.want_ht) ht.
inline Result naive_forward(const Problem& p, const Data& d) {
  const int64_t K = p.K, V = p.V, KV = K * V, G = p.group(), N = p.num_seqs();
  Result r;
  r.o.assign(p.B * p.T * p.HV * V, 0);
  r.ht.assign(p.want_ht ? N * p.HV * KV : 0, 0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t tok0 = p.packed() ? p.cu_seqlens[n] : n * p.T;
    const int64_t len = p.packed() ? p.cu_seqlens[n + 1] - tok0 : p.T;
    for (int64_t hv = 0; hv < p.HV; ++hv) {
      const int64_t h = hv / G, s = n * p.HV + hv;
      Vec S(KV, 0), u(V);
      if (p.has_h0) std::copy(d.h0.begin() + s * KV, d.h0.begin() + (s + 1) * KV, S.begin());
      for (int64_t t = tok0; t < tok0 + len; ++t) {
        const double* q = &d.q[(t * p.H + h) * K];
        const double* k = &d.k[(t * p.H + h) * K];
        const double* v = &d.v[(t * p.HV + hv) * V];
        const double* g = &d.g[(t * p.HV + hv) * K];
        const double beta = d.beta[t * p.HV + hv];
        for (int64_t a = 0; a < K; ++a)
          for (int64_t j = 0; j < V; ++j) S[a * V + j] *= std::exp(g[a]);
        for (int64_t j = 0; j < V; ++j) {
          double kS = 0;
          for (int64_t a = 0; a < K; ++a) kS += k[a] * S[a * V + j];
          u[j] = beta * (v[j] - kS);
        }
        for (int64_t a = 0; a < K; ++a)
          for (int64_t j = 0; j < V; ++j) S[a * V + j] += k[a] * u[j];
        for (int64_t j = 0; j < V; ++j) {
          double o = 0;
          for (int64_t a = 0; a < K; ++a) o += p.scale * q[a] * S[a * V + j];
          r.o[(t * p.HV + hv) * V + j] = o;
        }
      }
      if (p.want_ht) std::copy(S.begin(), S.end(), r.ht.begin() + s * KV);
    }
  }
  return r;
}

// The loss whose gradients the backward computes: sum(o * d_o) + sum(ht * dht).
inline double naive_loss(const Problem& p, const Data& d) {
  const Result r = naive_forward(p, d);
  double l = 0;
  for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * d.d_o[i];
  for (size_t i = 0; i < r.ht.size(); ++i) l += r.ht[i] * d.dht[i];
  return l;
}

// Runs p.impl's CPU forward (and backward) at input type T.
template <typename T>
Result run_cpu(const Problem& p, const Data& d, bool backward = true) {
  using A = acc_t<T>;
  const int64_t N = p.num_seqs(), S = N * p.HV * p.K * p.V;
  const auto q = cast<T>(d.q), k = cast<T>(d.k), v = cast<T>(d.v), g = cast<T>(d.g),
             beta = cast<T>(d.beta), d_o = cast<T>(d.d_o);
  const auto h0 = cast<A>(d.h0), dht = cast<A>(d.dht);
  std::vector<T> o(d.v.size());
  std::vector<A> ht(p.want_ht ? S : 0), residual(residual_elems(p));
  std::vector<A> ws(std::max<int64_t>(
      1, std::max(forward_workspace_elems(p), backward ? backward_workspace_elems(p) : 0)));
  const Inputs<T> in{q.data(), k.data(),    v.data(),
                     g.data(), beta.data(), p.has_h0 ? h0.data() : nullptr};
  forward_cpu<T>(p, in, {o.data(), p.want_ht ? ht.data() : nullptr, residual.data(), ws.data()});
  Result r;
  r.o = to_double(o);
  r.ht = to_double(ht);
  if (!backward) return r;
  std::vector<T> dq(d.q.size()), dk(d.k.size()), dv(d.v.size()), dg(d.g.size()),
      dbeta(d.beta.size());
  std::vector<A> dh0(p.has_h0 ? S : 0);
  BackwardArgs<T> b;
  b.d_o = d_o.data();
  b.dht = p.want_ht ? dht.data() : nullptr;
  b.residual = residual.data();
  b.workspace = ws.data();
  b.dq = dq.data();
  b.dk = dk.data();
  b.dv = dv.data();
  b.dg = dg.data();
  b.dbeta = dbeta.data();
  b.dh0 = p.has_h0 ? dh0.data() : nullptr;
  backward_cpu<T>(p, in, b);
  r.dq = to_double(dq);
  r.dk = to_double(dk);
  r.dv = to_double(dv);
  r.dg = to_double(dg);
  r.dbeta = to_double(dbeta);
  r.dh0 = to_double(dh0);
  return r;
}

// max|x - ref| / max|ref| (0 for two empty vectors; 1 when the sizes differ).
inline double rel_err(const Vec& x, const Vec& ref) {
  if (x.size() != ref.size()) return 1;
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return 1;
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

// Every output of x against ref within tol, naming the output and the error.
inline void expect_close(const Result& x, const Result& ref, double tol, const std::string& what,
                         bool backward = true) {
  for (const auto& [name, out, out_ref] : delta_rule::test_data::compared(x, ref)) {
    if (!backward && name[0] == 'd') continue;
    const double e = rel_err(*out, *out_ref);
    EXPECT_LE(e, tol) << what << ": " << name << " rel err " << e;
  }
}

}  // namespace gdn::kda::test_data
