// Tests of the tiled causal attention CPU kernel (kernels/cpu/attention.h): forward (o, lse) and
// backward (dq, dk, dv) against a naive fp64 reference for fp64, fp32 and bf16, over tile
// remainders, batches, GQA, head dims, sliding windows and packed sequences; fp64 finite
// differences of the backward; the same bits under 1 and 2 threads; workspace bounds; and the
// inputs validate refuses.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/attention_problem.h"

namespace gdn::attn {
namespace {

using Vec = std::vector<double>;

Vec random_vec(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Vec x(n);
  for (double& e : x) e = normal(gen);
  return x;
}

template <typename T>
std::vector<T> cast(const Vec& x) {
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = T(static_cast<acc_t<T>>(x[i]));
  return y;
}

template <typename T>
Vec to_double(const std::vector<T>& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = double(static_cast<float>(x[i]));
  return y;
}
template <>
Vec to_double(const std::vector<double>& x) {
  return x;
}

// x as the kernel sees it in type T.
template <typename T>
Vec rounded(const Vec& x) {
  return to_double(cast<T>(x));
}

struct Inputs {
  Vec q, k, v, d_o;  // d_o: the upstream gradient of o
};

Inputs make_inputs(const Problem& p, uint64_t seed) {
  const int64_t tokens = p.B * p.T;
  return Inputs{random_vec(tokens * p.H * p.D, seed), random_vec(tokens * p.HKV * p.D, seed + 1),
                random_vec(tokens * p.HKV * p.D, seed + 2),
                random_vec(tokens * p.H * p.D, seed + 3)};
}

template <typename T>
Inputs rounded_inputs(const Inputs& in) {
  return Inputs{rounded<T>(in.q), rounded<T>(in.k), rounded<T>(in.v), rounded<T>(in.d_o)};
}

struct Result {
  Vec o, lse, dq, dk, dv;
};

// The sequences of p as (first token, length) over the B * T flattened tokens.
std::vector<std::pair<int64_t, int64_t>> sequences_of(const Problem& p) {
  std::vector<std::pair<int64_t, int64_t>> s;
  if (p.cu_seqlens.empty()) {
    for (int64_t b = 0; b < p.B; ++b) s.push_back({b * p.T, p.T});
  } else {
    for (size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
      s.push_back({p.cu_seqlens[n], p.cu_seqlens[n + 1] - p.cu_seqlens[n]});
  }
  return s;
}

// Naive fp64 attention, one query row at a time with its full score row: for query t of a
// sequence, keys s in [first, t] (first = max(0, t - window + 1) with a window),
//   S_s = scale q_t . k_s,  P = softmax(S),  lse_t = log sum exp S,  o_t = sum_s P_s v_s;
// and the analytic backward
//   dv_s += P_s do_t,  dP_s = do_t . v_s,  dS_s = P_s (dP_s - sum_r P_r dP_r),
//   dq_t = scale sum_s dS_s k_s,  dk_s += scale dS_s q_t   (dk, dv summed over the GQA group).
Result reference(const Problem& p, const Inputs& in) {
  const int64_t D = p.D, H = p.H, HKV = p.HKV, G = H / HKV;
  Result r;
  r.o.assign(in.q.size(), 0);
  r.dq.assign(in.q.size(), 0);
  r.dk.assign(in.k.size(), 0);
  r.dv.assign(in.v.size(), 0);
  r.lse.assign(p.B * H * p.T, 0);
  const auto q_at = [&](int64_t tok, int64_t h) { return (tok * H + h) * D; };
  const auto kv_at = [&](int64_t tok, int64_t h) { return (tok * HKV + h / G) * D; };
  for (const auto& [tok0, len] : sequences_of(p))
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < len; ++t) {
        const int64_t first = p.window > 0 ? std::max<int64_t>(0, t - p.window + 1) : 0;
        const int64_t n = t - first + 1, qi = q_at(tok0 + t, h);
        Vec S(n), P(n), dP(n);
        for (int64_t j = 0; j < n; ++j) {
          const int64_t ki = kv_at(tok0 + first + j, h);
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += in.q[qi + d] * in.k[ki + d];
          S[j] = p.scale * dot;
        }
        const double m = *std::max_element(S.begin(), S.end());
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(S[j] - m);
        const int64_t tok = tok0 + t;
        r.lse[((tok / p.T) * H + h) * p.T + tok % p.T] = m + std::log(sum);
        double delta = 0;  // sum_r P_r dP_r
        for (int64_t j = 0; j < n; ++j) {
          const int64_t ki = kv_at(tok0 + first + j, h);
          P[j] = std::exp(S[j] - m) / sum;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) {
            r.o[qi + d] += P[j] * in.v[ki + d];
            r.dv[ki + d] += P[j] * in.d_o[qi + d];
            dot += in.d_o[qi + d] * in.v[ki + d];
          }
          dP[j] = dot;
          delta += P[j] * dP[j];
        }
        for (int64_t j = 0; j < n; ++j) {
          const int64_t ki = kv_at(tok0 + first + j, h);
          const double dS = P[j] * (dP[j] - delta);
          for (int64_t d = 0; d < D; ++d) {
            r.dq[qi + d] += p.scale * dS * in.k[ki + d];
            r.dk[ki + d] += p.scale * dS * in.q[qi + d];
          }
        }
      }
  return r;
}

// A workspace of n elements filled with NaN (so a read of unwritten scratch shows), followed by
// guard elements that must stay untouched.
constexpr int64_t kGuard = 64;
constexpr double kGuardValue = 12345.0;
template <typename A>
std::vector<A> guarded_workspace(int64_t n) {
  std::vector<A> ws(n + kGuard, std::numeric_limits<A>::quiet_NaN());
  std::fill(ws.end() - kGuard, ws.end(), A(kGuardValue));
  return ws;
}
template <typename A>
bool guard_intact(const std::vector<A>& ws) {
  return std::all_of(ws.end() - kGuard, ws.end(), [](A x) { return x == A(kGuardValue); });
}

// Forward and backward through the kernel, inputs cast to T, outputs (NaN before) as double.
template <typename T>
Result run(const Problem& p, const Inputs& in) {
  using A = acc_t<T>;
  const auto q = cast<T>(in.q), k = cast<T>(in.k), v = cast<T>(in.v), d_o = cast<T>(in.d_o);
  const T nan = T(std::numeric_limits<A>::quiet_NaN());
  std::vector<T> o(q.size(), nan), dq(q.size(), nan), dk(k.size(), nan), dv(v.size(), nan);
  std::vector<A> lse(p.B * p.H * p.T, std::numeric_limits<A>::quiet_NaN());
  auto fws = guarded_workspace<A>(forward_workspace_elems(p));
  forward_cpu(p, q.data(), k.data(), v.data(), o.data(), lse.data(), fws.data());
  EXPECT_TRUE(guard_intact(fws)) << "forward wrote past its workspace";
  auto bws = guarded_workspace<A>(backward_workspace_elems(p));
  backward_cpu(p, q.data(), k.data(), v.data(), o.data(), lse.data(), d_o.data(), dq.data(),
               dk.data(), dv.data(), bws.data());
  EXPECT_TRUE(guard_intact(bws)) << "backward wrote past its workspace";
  return Result{to_double(o), to_double(lse), to_double(dq), to_double(dk), to_double(dv)};
}

// max |got - want| / max(max |want|, 1) (NaN anywhere gives NaN, which fails every bound). The
// inputs are O(1), so the floor only binds where the exact result vanishes (window 1: P = 1, so
// dq = dk = 0 and the kernel leaves rounding noise).
double rel_err(const Vec& got, const Vec& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::abs(got[i] - want[i]);
    if (std::isnan(e)) return e;
    err = std::max(err, e);
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / std::max(scale, 1.0);
}

void expect_close(const Result& got, const Result& want, double tol) {
  const std::pair<const char*, std::pair<const Vec*, const Vec*>> fields[] = {
      {"o", {&got.o, &want.o}},
      {"lse", {&got.lse, &want.lse}},
      {"dq", {&got.dq, &want.dq}},
      {"dk", {&got.dk, &want.dk}},
      {"dv", {&got.dv, &want.dv}}};
  for (const auto& [name, pair] : fields) {
    const double err = rel_err(*pair.first, *pair.second);
    EXPECT_LE(err, tol) << name;  // NaN fails too
  }
}

bool same_bits(const Result& a, const Result& b) {
  for (const auto& [x, y] :
       {std::pair{&a.o, &b.o}, std::pair{&a.lse, &b.lse}, std::pair{&a.dq, &b.dq},
        std::pair{&a.dk, &b.dk}, std::pair{&a.dv, &b.dv}})
    if (x->size() != y->size() || std::memcmp(x->data(), y->data(), x->size() * 8) != 0)
      return false;
  return true;
}

using test::attention_problem;

// cu_seqlens of `n` sequences with lengths cycling through 1, 2, 3.
std::vector<int64_t> many_short(int64_t n) {
  std::vector<int64_t> cu{0};
  for (int64_t i = 0; i < n; ++i) cu.push_back(cu.back() + 1 + i % 3);
  return cu;
}

struct Case {
  std::string name;
  Problem p;
};

std::vector<Case> cases() {
  Problem peaky = attention_problem(1, 130, 2, 1, 16);
  peaky.scale = 1.0;  // score spread ~4: the running max changes across tiles
  Problem peaky_long = attention_problem(1, 515, 1, 1, 16);
  peaky_long.scale = 1.0;
  const std::vector<int64_t> cu{0, 5, 70, 100};
  return {
      {"T1", attention_problem(1, 1, 1, 1, 16)},
      {"T100_B2_gqa_D16", attention_problem(2, 100, 4, 2, 16)},
      {"T130_B2_gqa_D64", attention_problem(2, 130, 4, 2, 64)},
      {"T130_window1", attention_problem(1, 130, 2, 1, 64, 1)},
      {"T130_B2_gqa_window17", attention_problem(2, 130, 4, 2, 16, 17)},
      {"T200_window40_skips_tiles", attention_problem(1, 200, 2, 2, 16, 40)},
      // the last query that sees key tile 0 (keys 0..63) is 64 (window 2) or 128 (window 66):
      // the first row of a query tile
      {"T200_window2_tile_edge", attention_problem(1, 200, 2, 1, 16, 2)},
      {"T200_window66_tile_edge", attention_problem(1, 200, 2, 1, 16, 66)},
      {"T100_window_eq_T", attention_problem(1, 100, 4, 2, 16, 100)},
      {"T100_window_gt_T", attention_problem(1, 100, 4, 2, 16, 1000)},
      {"peaky_scale1", peaky},
      {"D256", attention_problem(1, 70, 1, 1, 256)},
      {"packed", attention_problem(1, 100, 4, 2, 16, 0, cu)},
      {"packed_window17", attention_problem(1, 100, 4, 2, 16, 17, cu)},
      {"packed_long_window3", attention_problem(1, 160, 2, 1, 16, 3, {0, 130, 160})},
      // T = 2 kKeyTile + 3: several key tiles (256 keys) and query tiles (128 queries), the last
      // of each partial; the running max changes across key tiles.
      {"T515_gqa", attention_problem(1, 515, 2, 1, 16)},
      {"T515_peaky_scale1", peaky_long},
      {"T515_window300_skips_tiles", attention_problem(1, 515, 2, 1, 16, 300)},
      // the last query that sees key tile 0 (keys 0..255) is 256 (window 2) or 384 (window 130):
      // the first row of a query tile
      {"T515_window2_tile_edge", attention_problem(1, 515, 2, 1, 16, 2)},
      {"T515_window130_tile_edge", attention_problem(1, 515, 2, 1, 16, 130)},
      {"packed_long_window100", attention_problem(1, 700, 2, 1, 16, 100, {0, 3, 520, 700})},
      {"packed_150_short",
       attention_problem(1, many_short(150).back(), 1, 1, 16, 0, many_short(150))},
  };
}

template <typename T>
void check_against_reference(double tol) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Inputs in = make_inputs(c.p, 7);
    expect_close(run<T>(c.p, in), reference(c.p, rounded_inputs<T>(in)), tol);
  }
}

TEST(AttentionCpu, MatchesReferenceFp64) {
  check_against_reference<double>(1e-12);
}
TEST(AttentionCpu, MatchesReferenceFp32) {
  check_against_reference<float>(1e-5);
}
TEST(AttentionCpu, MatchesReferenceBf16) {
  check_against_reference<bf16>(2e-2);
}

// A window of T or more keys is full causal attention, bit for bit (same tiles, same masks).
TEST(AttentionCpu, WindowOfTIsFullCausal) {
  for (int64_t window : {int64_t(100), int64_t(101), int64_t(5000)}) {
    const Problem full = attention_problem(2, 100, 4, 2, 16),
                  windowed = attention_problem(2, 100, 4, 2, 16, window);
    const Inputs in = make_inputs(full, 3);
    EXPECT_TRUE(same_bits(run<float>(full, in), run<float>(windowed, in))) << window;
  }
}

// o, lse and dq, dk, dv under 1 and 2 OpenMP threads: the same bits.
TEST(AttentionCpu, SameBitsForAnyThreadCount) {
  const int saved = omp_get_max_threads();
  const Problem problems[] = {
      attention_problem(2, 130, 4, 2, 16, 17),
      attention_problem(1, 100, 4, 2, 16, 0, {0, 5, 70, 100}),
      attention_problem(1, many_short(150).back(), 1, 1, 8, 0, many_short(150)),
      // One (sequence, kv head): one thread sums dq in the key-tile pass, two threads in a pass of
      // their own; both must give the same bits.
      attention_problem(1, 600, 2, 1, 16, 0), attention_problem(1, 600, 2, 1, 16, 300)};
  for (const Problem& p : problems) {
    const Inputs in = make_inputs(p, 11);
    omp_set_num_threads(1);
    const Result one = run<float>(p, in), one_bf16 = run<bf16>(p, in);
    omp_set_num_threads(2);
    const Result two = run<float>(p, in), two_bf16 = run<bf16>(p, in);
    EXPECT_TRUE(same_bits(one, two)) << "fp32, T = " << p.T;
    EXPECT_TRUE(same_bits(one_bf16, two_bf16)) << "bf16, T = " << p.T;
  }
  omp_set_num_threads(saved);
}

// L = <o, R> through forward_cpu in fp64; backward_cpu with d_o = R must give dL/dq, dL/dk,
// dL/dv, every element checked by central differences.
TEST(AttentionCpu, GradientsMatchFiniteDifferences) {
  const Problem problems[] = {attention_problem(1, 9, 2, 1, 4, 3),
                              attention_problem(1, 9, 2, 1, 4, 0),
                              attention_problem(1, 9, 2, 1, 4, 3, {0, 4, 9})};
  const double eps = 1e-6, tol = 1e-7;
  for (const Problem& p : problems) {
    SCOPED_TRACE("window " + std::to_string(p.window) + (p.cu_seqlens.empty() ? "" : " packed"));
    Inputs in = make_inputs(p, 5);
    const Result analytic = run<double>(p, in);
    std::vector<double> fws(forward_workspace_elems(p)), lse(p.B * p.H * p.T);
    const auto loss = [&]() {
      Vec o(in.q.size());
      forward_cpu(p, in.q.data(), in.k.data(), in.v.data(), o.data(), lse.data(), fws.data());
      double l = 0;
      for (size_t i = 0; i < o.size(); ++i) l += o[i] * in.d_o[i];  // R = d_o
      return l;
    };
    const std::pair<const char*, std::pair<Vec*, const Vec*>> wrt[] = {
        {"dq", {&in.q, &analytic.dq}},
        {"dk", {&in.k, &analytic.dk}},
        {"dv", {&in.v, &analytic.dv}}};
    for (const auto& [name, pair] : wrt) {
      Vec& x = *pair.first;
      for (size_t i = 0; i < x.size(); ++i) {
        const double x0 = x[i];
        x[i] = x0 + eps;
        const double up = loss();
        x[i] = x0 - eps;
        const double down = loss();
        x[i] = x0;
        EXPECT_NEAR((*pair.second)[i], (up - down) / (2 * eps), tol) << name << "[" << i << "]";
      }
    }
  }
}

// validate's message names what is wrong.
void expect_refused(const Problem& p, const std::string& names) {
  try {
    validate(p);
    ADD_FAILURE() << "accepted; expected a refusal naming " << names;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(AttentionCpu, ValidateRefusesBadProblems) {
  EXPECT_NO_THROW(validate(attention_problem(2, 100, 4, 2, 256, 17)));
  EXPECT_NO_THROW(validate(attention_problem(1, 100, 4, 2, 16, 0, {0, 5, 70, 100})));
  expect_refused(attention_problem(1, 10, 3, 2, 16), "HKV");
  expect_refused(attention_problem(1, 10, 2, 2, 16, -1), "window");
  Problem no_scale = attention_problem(1, 10, 2, 2, 16);
  no_scale.scale = 0;
  expect_refused(no_scale, "scale");
  no_scale.scale = std::numeric_limits<double>::infinity();
  expect_refused(no_scale, "scale");
  expect_refused(attention_problem(1, 10, 2, 2, 257), "D");
  expect_refused(attention_problem(1, 0, 2, 2, 16), "T");
  expect_refused(attention_problem(1, 10, 2, 2, 16, 0, {0, 5, 5, 10}), "cu_seqlens");
  expect_refused(attention_problem(1, 10, 2, 2, 16, 0, {0, 5, 9}), "cu_seqlens");
  expect_refused(attention_problem(1, 10, 2, 2, 16, 0, {1, 10}), "cu_seqlens");
  expect_refused(attention_problem(2, 10, 2, 2, 16, 0, {0, 10}), "cu_seqlens");
  // The entry points validate too.
  const Problem bad = attention_problem(1, 10, 3, 2, 16);
  EXPECT_THROW(forward_workspace_elems(bad), std::invalid_argument);
  EXPECT_THROW(forward_cpu<float>(bad, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace gdn::attn
