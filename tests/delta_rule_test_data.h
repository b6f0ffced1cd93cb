// Test data every delta-rule family's kernel tests share (tests/gdr_test_data.h for the gated
// delta rule, tests/kda_test_data.h for Kimi Delta Attention): inputs and results in fp64, the
// model's k, rounding to a kernel's types, Problems of given sizes, and the outputs a comparison
// walks.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/delta_rule_problem.h"
#include "kernels/numeric.h"

namespace gdn::delta_rule::test_data {

using Vec = std::vector<double>;

// Inputs and upstream gradients of one problem, in fp64.
struct Data {
  Vec q, k, v, g, beta, h0, d_o, dht;
};
// Everything a forward + backward produces, in fp64.
struct Result {
  Vec o, ht, dq, dk, dv, dg, dbeta, dh0;
};
// A Result to accumulate into for inputs d: o and every input gradient zeros of their sizes
// (ht and dh0 left empty, for the caller to size).
inline Result zeros_for(const Data& d) {
  Result r;
  r.o.assign(d.v.size(), 0);
  r.dq.assign(d.q.size(), 0);
  r.dk.assign(d.k.size(), 0);
  r.dv.assign(d.v.size(), 0);
  r.dg.assign(d.g.size(), 0);
  r.dbeta.assign(d.g.size(), 0);
  return r;
}

// n values of N(0, std^2), drawn from n01 in order.
inline Vec normal(std::mt19937_64& rng, std::normal_distribution<double>& n01, int64_t n,
                  double std) {
  Vec x(n);
  for (auto& e : x) e = std * n01(rng);
  return x;
}

// Each row of K values L2-normalised (eps 1e-6 on the sum of squares), as the model makes k.
inline void l2_normalise_rows(Vec& k, int64_t K) {
  for (int64_t r = 0; r < int64_t(k.size()) / K; ++r) {
    double ss = 1e-6;
    for (int64_t i = 0; i < K; ++i) ss += k[r * K + i] * k[r * K + i];
    for (int64_t i = 0; i < K; ++i) k[r * K + i] /= std::sqrt(ss);
  }
}

template <typename T>
std::vector<T> cast(const Vec& x) {
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = from_acc<T>(acc_t<T>(x[i]));
  return y;
}
template <typename T>
Vec to_double(const std::vector<T>& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = double(to_acc(x[i]));
  return y;
}

// A Problem of these sizes, scale K^-1/2, no initial or final state, unpacked.
template <class Problem>
Problem sized(int64_t B, int64_t T, int64_t H, int64_t HV, int64_t K, int64_t V, int chunk) {
  Problem p;
  static_cast<Sizes&>(p) = Sizes{B, T, H, HV, K, V, chunk, 1 / std::sqrt(double(K))};
  return p;
}

// One output of a result and of its reference, by name.
struct Compared {
  const char* name;
  const Vec* x;
  const Vec* ref;
};
// Every output of x and ref, forward ones first (o, ht), then the gradients.
inline std::array<Compared, 8> compared(const Result& x, const Result& ref) {
  return {{{"o", &x.o, &ref.o},
           {"ht", &x.ht, &ref.ht},
           {"dq", &x.dq, &ref.dq},
           {"dk", &x.dk, &ref.dk},
           {"dv", &x.dv, &ref.dv},
           {"dg", &x.dg, &ref.dg},
           {"dbeta", &x.dbeta, &ref.dbeta},
           {"dh0", &x.dh0, &ref.dh0}}};
}

}  // namespace gdn::delta_rule::test_data
