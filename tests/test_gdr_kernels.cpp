// Tests of the CPU gated delta rule kernels (kernels/gated_delta_rule.h): fp64 finite differences
// of the recurrent reference (and of a plain ssd recurrence written here), every implementation,
// dtype and chunk size against the fp64 reference (forward o, ht and every gradient), edge cases,
// realistic and strongly decaying inputs, determinism, sizes and validation.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/gated_delta_rule.h"
#include "tests/gdr_test_data.h"

namespace gdn::gdr {
namespace {

using namespace test_data;

// The ssd baseline as a plain fp64 recurrence, forward and backward (all states kept; small T):
//   S_t = exp(g_t) S_{t-1} + k_t v_t^T;  o_t = S_t^T (scale q_t)
Result ssd_reference(const Problem& p, const Data& d, bool backward = true) {
  const int64_t K = p.K, V = p.V, KV = K * V, G = p.group();
  Result r = zeros_for(d);  // o as v: B * T * HV * V
  r.ht.assign(p.B * p.HV * KV, 0);
  r.dh0.assign(r.ht.size(), 0);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t hv = 0; hv < p.HV; ++hv) {
      const int64_t h = hv / G, s = b * p.HV + hv;
      auto qi = [&](int64_t t, int64_t a) { return ((b * p.T + t) * p.H + h) * K + a; };
      auto vi = [&](int64_t t, int64_t j) { return ((b * p.T + t) * p.HV + hv) * V + j; };
      auto gi = [&](int64_t t) { return (b * p.T + t) * p.HV + hv; };
      std::vector<Vec> S(p.T + 1, Vec(KV, 0));
      if (p.has_h0) std::copy(d.h0.begin() + s * KV, d.h0.begin() + (s + 1) * KV, S[0].begin());
      for (int64_t t = 0; t < p.T; ++t) {
        const double alpha = std::exp(d.g[gi(t)]);
        for (int64_t a = 0; a < K; ++a)
          for (int64_t j = 0; j < V; ++j)
            S[t + 1][a * V + j] = alpha * S[t][a * V + j] + d.k[qi(t, a)] * d.v[vi(t, j)];
        for (int64_t j = 0; j < V; ++j)
          for (int64_t a = 0; a < K; ++a)
            r.o[vi(t, j)] += S[t + 1][a * V + j] * p.scale * d.q[qi(t, a)];
      }
      if (p.want_ht) std::copy(S[p.T].begin(), S[p.T].end(), r.ht.begin() + s * KV);
      if (!backward) continue;
      Vec dS(KV, 0);
      if (p.want_ht) std::copy(d.dht.begin() + s * KV, d.dht.begin() + (s + 1) * KV, dS.begin());
      for (int64_t t = p.T - 1; t >= 0; --t) {
        const double alpha = std::exp(d.g[gi(t)]);
        double dg = 0;
        for (int64_t a = 0; a < K; ++a)
          for (int64_t j = 0; j < V; ++j) {
            const int64_t x = a * V + j;
            dS[x] += p.scale * d.q[qi(t, a)] * d.d_o[vi(t, j)];
            r.dq[qi(t, a)] += p.scale * S[t + 1][x] * d.d_o[vi(t, j)];
            r.dk[qi(t, a)] += dS[x] * d.v[vi(t, j)];
            r.dv[vi(t, j)] += dS[x] * d.k[qi(t, a)];
            dg += alpha * S[t][x] * dS[x];
            dS[x] *= alpha;
          }
        r.dg[gi(t)] = dg;
      }
      if (p.has_h0) std::copy(dS.begin(), dS.end(), r.dh0.begin() + s * KV);
    }
  if (!p.want_ht) r.ht.clear();
  if (!p.has_h0) r.dh0.clear();
  return r;
}

// ---- fp64 finite differences of the references -------------------------------------------------

// loss = <o, do> + <ht, dht>; every input element perturbed by +-eps.
void check_finite_differences(Problem p,
                              const std::function<Result(const Problem&, const Data&, bool)>& f) {
  p.has_h0 = p.want_ht = true;
  Data d = make_data(p, Gates::realistic, 7);
  for (auto& x : d.g) x *= 5;  // decay strong enough to matter
  const Result an = f(p, d, true);
  auto loss = [&](const Data& x) {
    Result r = f(p, x, false);
    double l = 0;
    for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * x.d_o[i];
    for (size_t i = 0; i < r.ht.size(); ++i) l += r.ht[i] * x.dht[i];
    return l;
  };
  const double eps = 1e-6;
  const std::pair<const char*, std::pair<Vec Data::*, const Vec*>> inputs[] = {
      {"q", {&Data::q, &an.dq}}, {"k", {&Data::k, &an.dk}},          {"v", {&Data::v, &an.dv}},
      {"g", {&Data::g, &an.dg}}, {"beta", {&Data::beta, &an.dbeta}}, {"h0", {&Data::h0, &an.dh0}}};
  for (const auto& [name, pr] : inputs) {
    if (p.impl == Impl::ssd && std::string(name) == "beta") continue;
    Vec fd((d.*pr.first).size());
    for (size_t i = 0; i < fd.size(); ++i) {
      Data x = d;
      (x.*pr.first)[i] = (d.*pr.first)[i] + eps;
      const double lp = loss(x);
      (x.*pr.first)[i] = (d.*pr.first)[i] - eps;
      fd[i] = (lp - loss(x)) / (2 * eps);
    }
    if (std::getenv("GDN_TEST_VERBOSE"))
      std::printf("    d%-5s fd rel err %.3g\n", name, rel_err(*pr.second, fd));
    EXPECT_LE(rel_err(*pr.second, fd), 1e-7) << "d" << name;
  }
}

Problem small(int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, int chunk, Impl impl) {
  return problem_of(1, T, H, HV, K, V, chunk, impl);
}

TEST(GdrFiniteDifferences, RecurrentReference) {
  // Two chunks and a partial third; GVA; K != V.
  check_finite_differences(small(37, 1, 2, 5, 3, 16, Impl::recurrent), run<double>);
  check_finite_differences(small(5, 2, 2, 4, 4, 16, Impl::recurrent), run<double>);
}

TEST(GdrFiniteDifferences, SsdReferenceAndKernel) {
  check_finite_differences(small(37, 1, 2, 5, 3, 16, Impl::ssd), ssd_reference);
  check_finite_differences(small(37, 1, 2, 5, 3, 16, Impl::ssd), run<double>);
}

// ---- every implementation against the fp64 reference ------------------------------------------

struct Variant {
  Impl impl;
  Residual residual;
  const char* dtype;  // "f64", "f32", "bf16"
  int chunk;
};

std::string variant_name(const testing::TestParamInfo<Variant>& info) {
  const Variant& v = info.param;
  std::string n = impl_name(v.impl);
  if (v.impl == Impl::chunked) n += std::string("_") + residual_name(v.residual);
  return n + "_" + v.dtype + "_C" + std::to_string(v.chunk);
}

struct Shape {
  const char* name;
  int64_t B, T, H, HV, K, V;
  bool h0, dht;
  Gates gates;
};

class GdrParity : public testing::TestWithParam<Variant> {};

TEST_P(GdrParity, MatchesFp64Reference) {
  const Variant var = GetParam();
  const Shape shapes[] = {
      {"gva_k_ne_v_partial", 2, 100, 2, 4, 32, 48, true, true, Gates::realistic},
      {"t1", 1, 1, 1, 1, 16, 16, true, true, Gates::realistic},
      {"t_lt_c_no_h0", 1, 10, 1, 2, 8, 12, false, true, Gates::realistic},
      {"t_multiple_no_dht", 1, 128, 2, 2, 16, 16, true, false, Gates::realistic},
      {"no_state_io", 2, 45, 1, 1, 12, 20, false, false, Gates::realistic},
      {"no_decay", 1, 70, 1, 2, 16, 8, true, true, Gates::no_decay},
      {"strong_decay", 1, 70, 2, 2, 16, 16, true, true, Gates::strong_decay},
      {"beta_zero", 1, 40, 1, 1, 8, 8, true, true, Gates::beta_zero},
      {"beta_one", 1, 80, 1, 1, 16, 16, true, true, Gates::beta_one},
  };
  const double tol = std::string(var.dtype) == "f64"   ? 1e-10
                     : std::string(var.dtype) == "f32" ? 1e-5
                                                       : 1e-2;
  for (const Shape& s : shapes) {
    SCOPED_TRACE(s.name);
    if (std::getenv("GDN_TEST_VERBOSE")) std::printf("  %s\n", s.name);
    Problem p = problem_of(s.B, s.T, s.H, s.HV, s.K, s.V, var.chunk, var.impl);
    p.residual = var.residual;
    p.has_h0 = s.h0;
    p.want_ht = s.dht;
    const Data d = make_data(p, s.gates, 1234 + s.T);
    Result got;
    Data seen;  // the reference runs on what the kernel actually sees
    if (std::string(var.dtype) == "f64") {
      got = run<double>(p, d);
      seen = d;
    } else if (std::string(var.dtype) == "f32") {
      got = run<float>(p, d);
      seen = round_to<float>(d);
    } else {
      got = run<bf16>(p, d);
      seen = round_to<bf16>(d);
    }
    Problem ref_p = p;
    ref_p.impl = Impl::recurrent;
    const Result ref = var.impl == Impl::ssd ? ssd_reference(p, seen) : run<double>(ref_p, seen);
    expect_close(got, ref, tol, var.impl == Impl::ssd);
    if (var.impl == Impl::ssd) {  // no beta in ssd: its gradient is written as zeros
      EXPECT_TRUE(std::all_of(got.dbeta.begin(), got.dbeta.end(), [](double x) { return x == 0; }));
    }
  }
}

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (const char* dt : {"f64", "f32", "bf16"})
    for (int c : {16, 32, 64}) {
      out.push_back({Impl::recurrent, Residual::minimal, dt, c});
      out.push_back({Impl::chunked, Residual::minimal, dt, c});
      out.push_back({Impl::chunked, Residual::full, dt, c});
      out.push_back({Impl::fused, Residual::minimal, dt, c});
      out.push_back({Impl::ssd, Residual::minimal, dt, c});
    }
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, GdrParity, testing::ValuesIn(all_variants()), variant_name);

// Larger head dims (K = V = 256 is the maximum) and the model's default chunk.
TEST(GdrParityLarge, MaxHeadDim) {
  for (Impl impl : {Impl::chunked, Impl::fused}) {
    Problem p = small(70, 1, 1, 256, 128, 64, impl);
    p.has_h0 = p.want_ht = true;
    const Data d = make_data(p, Gates::realistic, 99);
    Problem ref_p = p;
    ref_p.impl = Impl::recurrent;
    expect_close(run<float>(p, d), run<double>(ref_p, round_to<float>(d)), 1e-5);
  }
}

// ---- determinism: bitwise equal across runs and thread counts ----------------------------------

TEST(GdrDeterminism, SameBitsAcrossThreadCounts) {
  const int threads = omp_get_max_threads();
  for (Impl impl : {Impl::recurrent, Impl::chunked, Impl::fused, Impl::ssd}) {
    Problem p = small(90, 2, 4, 16, 16, 32, impl);
    p.B = 2;
    p.has_h0 = p.want_ht = true;
    const Data d = make_data(p, Gates::realistic, 5);
    omp_set_num_threads(1);
    const Result one = run<float>(p, d);
    omp_set_num_threads(std::max(2, threads));
    const Result many = run<float>(p, d);
    const Result again = run<float>(p, d);
    omp_set_num_threads(threads);
    for (const Result* r : {&many, &again}) {
      EXPECT_EQ(r->o, one.o) << impl_name(impl);
      EXPECT_EQ(r->dq, one.dq) << impl_name(impl);
      EXPECT_EQ(r->dk, one.dk) << impl_name(impl);
      EXPECT_EQ(r->dv, one.dv) << impl_name(impl);
      EXPECT_EQ(r->dg, one.dg) << impl_name(impl);
      EXPECT_EQ(r->dh0, one.dh0) << impl_name(impl);
    }
  }
}

// ---- internals ----------------------------------------------------------------------------------

// The vectorised fp32 decay factors: within a few ulp of exp on [-87, 0], exactly 0 below (no
// denormals), never inf or nan, 1 at 0.
TEST(GdrInternals, DecayRowMatchesExp) {
  const int n = 2400;
  std::vector<float> G(n), out(n);
  for (int j = 0; j < n; ++j) G[j] = 0.0371f * float(j);  // exponents 0 .. -89
  detail::decay_row(G.data(), 0.0f, n, out.data());
  EXPECT_EQ(out[0], 1.0f);
  for (int j = 0; j < n; ++j) {
    const double x = -double(G[j]), want = std::exp(x);
    if (x > -87) {
      EXPECT_LE(std::abs(out[j] - want) / want, 3e-7) << "x = " << x;
    } else {
      EXPECT_TRUE(out[j] == 0 || out[j] >= 1.1e-38f) << "x = " << x << " gives " << out[j];
    }
  }
  std::vector<double> Gd(G.begin(), G.end()), outd(n);
  detail::decay_row(Gd.data(), 0.0, n, outd.data());
  for (int j = 0; j < n; ++j) EXPECT_EQ(outd[j], std::exp(-Gd[j]));
}

// The blocked unit-lower inverse: (I + M) A = I for every supported chunk size.
TEST(GdrInternals, InvertUnitLower) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n01(0, 1);
  for (int C : {16, 32, 64}) {
    std::vector<double> m(C * C, 0), a(C * C), tmp(detail::invert_tmp_elems(C));
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < i; ++j) m[i * C + j] = 0.3 * n01(rng);
    for (int i = 0; i < C; ++i)  // junk on and above the diagonal must be ignored
      for (int j = i; j < C; ++j) m[i * C + j] = 7;
    a = m;
    detail::invert_unit_lower(a.data(), C, tmp.data());
    double err = 0;
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < C; ++j) {
        double x = a[i * C + j];  // ((I + M) A)_ij
        for (int l = 0; l < i; ++l) x += m[i * C + l] * a[l * C + j];
        err = std::max(err, std::abs(x - (i == j ? 1.0 : 0.0)));
        if (j > i) {
          EXPECT_EQ(a[i * C + j], 0.0) << "upper part at " << i << "," << j;
        }
      }
    EXPECT_LT(err, 1e-12) << "C = " << C;
  }
}

// ---- sizes, names, validation -----------------------------------------------------------------

TEST(GdrSizes, ResidualAndWorkspace) {
  Problem p = small(100, 2, 4, 32, 48, 64, Impl::chunked);
  p.B = 3;
  const int64_t states = p.B * p.HV * p.num_chunks() * p.K * p.V;
  EXPECT_EQ(p.num_chunks(), 2);
  EXPECT_EQ(residual_elems(p), states);
  p.residual = Residual::full;
  EXPECT_EQ(residual_elems(p), states + p.B * p.HV * 2 * 64 * (64 + 32 + 48));
  for (Impl impl : {Impl::recurrent, Impl::fused, Impl::ssd}) {
    p.impl = impl;
    EXPECT_EQ(residual_elems(p), states) << impl_name(impl);  // the policy is chunked's only
  }
  // The recurrent backward keeps C states per slice, not T: B=4 H=8 T=8192 K=V=128 in < 1 GB.
  Problem big = small(8192, 8, 8, 128, 128, 64, Impl::recurrent);
  big.B = 4;
  EXPECT_LT(backward_workspace_elems(big) * 4, int64_t(1) << 30);
  // The fused kernels keep chunk tiles only: their workspace does not grow with T.
  big.impl = Impl::fused;
  Problem longer = big;
  longer.T = 4 * big.T;
  EXPECT_EQ(forward_workspace_elems(big), forward_workspace_elems(longer));
  EXPECT_EQ(backward_workspace_elems(big), backward_workspace_elems(longer));
}

TEST(GdrSizes, FlopCounts) {
  Problem p = small(2048, 4, 4, 64, 64, 64, Impl::fused);
  const double per = 6.0 * 64 * 64 + 64 * (6 * 64 + 4 * 64) + 64.0 * 64 / 3;
  EXPECT_DOUBLE_EQ(forward_flops(p), per * 2048 * 4);
  const double per_b = 16.0 * 64 * 64 + 64 * (18 * 64 + 10 * 64) + 4 * 64.0 * 64;
  EXPECT_DOUBLE_EQ(backward_flops(p), per_b * 2048 * 4);
}

TEST(GdrNames, RoundTrip) {
  for (Impl i : {Impl::recurrent, Impl::chunked, Impl::fused, Impl::ssd})
    EXPECT_EQ(parse_impl(impl_name(i)), i);
  for (Residual r : {Residual::minimal, Residual::full})
    EXPECT_EQ(parse_residual(residual_name(r)), r);
  EXPECT_THROW(parse_impl("chunky"), std::invalid_argument);
  EXPECT_THROW(parse_residual("fat"), std::invalid_argument);
}

// validate(good changed by `change`) throws a message containing `needle`.
void expect_invalid(const Problem& good, const std::string& needle,
                    const std::function<void(Problem&)>& change) {
  Problem p = good;
  change(p);
  try {
    validate(p);
    ADD_FAILURE() << "accepted a bad problem, expected a message with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GdrValidate, RejectsBadProblems) {
  const Problem good = small(10, 2, 4, 64, 64, 64, Impl::fused);
  EXPECT_NO_THROW(validate(good));
  expect_invalid(good, "HV (6)", [](Problem& p) {
    p.HV = 6;
    p.H = 4;
  });
  expect_invalid(good, "48", [](Problem& p) { p.chunk = 48; });
  expect_invalid(good, "K = 300", [](Problem& p) { p.K = 300; });
  expect_invalid(good, "V = 600", [](Problem& p) { p.V = 600; });
  expect_invalid(good, "scale", [](Problem& p) { p.scale = 0; });
  expect_invalid(good, "T must be >= 1", [](Problem& p) { p.T = 0; });
  // The dispatchers validate too, and name missing pointers.
  Problem p = good;
  p.chunk = 48;
  EXPECT_THROW(forward_cpu(p, Inputs<float>{}, ForwardOutputs<float>{}), std::invalid_argument);
  try {
    forward_cpu(good, Inputs<float>{}, ForwardOutputs<float>{});
    ADD_FAILURE() << "accepted null inputs";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("q is null"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gdn::gdr
