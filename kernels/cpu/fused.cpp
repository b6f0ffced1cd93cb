// CPU fused layer-op kernels. Each row (or element) is one pass over memory; reductions run in
// a fixed order and parameter gradients (dw) are summed per column over rows in order, so results
// are deterministic, as in kernels/cpu/nn.cpp.
#include "kernels/cpu/fused.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/column_sums.h"
#include "kernels/cpu/conv_rows.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/lane_sum.h"
#include "kernels/cpu/nn.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/elementwise_ops.h"

namespace gdn::cpu {

namespace {
constexpr int64_t kPar = 1 << 14;

// sigmoid on the vectorising exp (fast_exp.h).
template <typename A>
GDN_FAST_MATH_INLINE A sigmoid_of(A x) {
  return sigmoid_fast(x);
}

// act(z) and act'(z) of the gate: sigmoid (s, s (1 - s)) or silu (z s, s (1 + z (1 - s))).
template <typename A>
GDN_FAST_MATH_INLINE void gate_act(A z, bool sigmoid_gate, A& a, A& da) {
  const A s = sigmoid_of(z);
  if (sigmoid_gate) {
    a = s;
    da = s * (A(1) - s);
  } else {
    a = z * s;
    da = s * (A(1) + z * (A(1) - s));
  }
}

}  // namespace

template <typename T>
GDN_CPU_CLONES void swiglu_forward(const T* g, const T* u, int64_t n, T* y) {
  using A = acc_t<T>;
  parallel_rows(n, n >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const A gi = to_acc(g[i]);
    y[i] = from_acc<T>(gi * sigmoid_of(gi) * to_acc(u[i]));
  });
}

template <typename T>
GDN_CPU_CLONES void swiglu_backward(const T* g, const T* u, const T* dy, int64_t n, T* dg, T* du) {
  using A = acc_t<T>;
  parallel_rows(n, n >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const A gi = to_acc(g[i]), s = sigmoid_of(gi), d = to_acc(dy[i]);
    dg[i] = from_acc<T>(d * to_acc(u[i]) * s * (A(1) + gi * (A(1) - s)));
    du[i] = from_acc<T>(d * gi * s);
  });
}

namespace {

// The gated norm's row loops with the gate kind and the weight's presence fixed at compile time:
// a run-time branch on them inside the element loops kept those loops from vectorising (5x
// slower). Per element the arithmetic is the same as with the branch (x 1 for no weight).
template <typename T, bool kSigmoid, bool kWeight>
GDN_CPU_CLONES void gated_rms_norm_forward_rows(const T* x, const T* w, const T* z, int64_t n,
                                                int64_t d, double eps, T* y, acc_t<T>* rstd) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= kPar, "gated_rms_norm_forward", [&](int64_t i) GDN_ROW_INLINE {
    const T *xr = x + i * d, *zr = z + i * d;
    const A ss = lane_sum<A>(d, [&](int64_t j) { return to_acc(xr[j]) * to_acc(xr[j]); });
    const A r = A(1) / std::sqrt(ss / A(d) + A(eps));
    rstd[i] = r;
    T* yr = y + i * d;
    for (int64_t j = 0; j < d; ++j) {
      A a, da;
      gate_act(to_acc(zr[j]), kSigmoid, a, da);
      yr[j] = from_acc<T>(to_acc(xr[j]) * r * (kWeight ? to_acc(w[j]) : A(1)) * a);
    }
  });
}

template <typename T, bool kSigmoid, bool kWeight>
GDN_CPU_CLONES void gated_rms_norm_backward_rows(const T* x, const T* w, const T* z,
                                                 const acc_t<T>* rstd, const T* dy, int64_t n,
                                                 int64_t d, T* dx, T* dz, T* dw) {
  using A = acc_t<T>;
  const bool parallel = n * d >= kPar;
  struct Gate {
    std::vector<A> act, dact;  // the gate and its derivative, once a row
  };
  const auto new_gate = [d] { return Gate{std::vector<A>(size_t(d)), std::vector<A>(size_t(d))}; };
  parallel_rows(
      n, parallel, "gated_rms_norm_backward", new_gate, [&](int64_t i, Gate& gate) GDN_ROW_INLINE {
        A *act = gate.act.data(), *dact = gate.dact.data();
        const T *xr = x + i * d, *zr = z + i * d, *gr = dy + i * d;
        const A r = rstd[i];
        for (int64_t j = 0; j < d; ++j) gate_act(to_acc(zr[j]), kSigmoid, act[j], dact[j]);
        const A dot = lane_sum<A>(d, [&](int64_t j) {  // sum_j dn_j w_j x_j
          return to_acc(gr[j]) * act[j] * (kWeight ? to_acc(w[j]) : A(1)) * to_acc(xr[j]);
        });
        for (int64_t j = 0; j < d; ++j) {
          const A wj = kWeight ? to_acc(w[j]) : A(1);
          dz[i * d + j] = from_acc<T>(to_acc(gr[j]) * to_acc(xr[j]) * r * wj * dact[j]);
        }
        const A cf = dot * r * r / A(d);
        for (int64_t j = 0; j < d; ++j) {
          const A wj = kWeight ? to_acc(w[j]) : A(1);
          dx[i * d + j] = from_acc<T>(r * (to_acc(gr[j]) * act[j] * wj - to_acc(xr[j]) * cf));
        }
      });
  if (!dw) return;
  column_sums<A>(
      n, d, parallel,
      [&](int64_t i, int64_t j) {
        A a, da;
        gate_act(to_acc(z[i * d + j]), kSigmoid, a, da);
        return to_acc(dy[i * d + j]) * a * to_acc(x[i * d + j]) * rstd[i];
      },
      [&](int64_t j, A sum) { dw[j] = from_acc<T>(sum); });
}

// f<kSigmoid, kWeight>() for the run-time gate kind and weight.
template <typename F>
void with_gate_and_weight(bool sigmoid_gate, bool weight, F f) {
  if (sigmoid_gate)
    weight ? f(std::true_type{}, std::true_type{}) : f(std::true_type{}, std::false_type{});
  else
    weight ? f(std::false_type{}, std::true_type{}) : f(std::false_type{}, std::false_type{});
}

}  // namespace

template <typename T>
void gated_rms_norm_forward(const T* x, const T* w, const T* z, int64_t n, int64_t d, double eps,
                            bool sigmoid_gate, T* y, acc_t<T>* rstd) {
  with_gate_and_weight(sigmoid_gate, w != nullptr, [&](auto sig, auto wt) {
    gated_rms_norm_forward_rows<T, sig, wt>(x, w, z, n, d, eps, y, rstd);
  });
}

template <typename T>
void gated_rms_norm_backward(const T* x, const T* w, const T* z, const acc_t<T>* rstd, const T* dy,
                             int64_t n, int64_t d, bool sigmoid_gate, T* dx, T* dz, T* dw) {
  with_gate_and_weight(sigmoid_gate, w != nullptr, [&](auto sig, auto wt) {
    gated_rms_norm_backward_rows<T, sig, wt>(x, w, z, rstd, dy, n, d, dx, dz, dw);
  });
}

template <typename T>
GDN_CPU_CLONES void add_rms_norm_forward(const T* x, const T* r, const T* w, int64_t n, int64_t d,
                                         double eps, T* h, T* y, acc_t<T>* rstd) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T *xr = x + i * d, *rr = r + i * d;
    T* hr = h + i * d;
    // h is rounded to T before it is squared: the values rms_norm(add(x, r)) would see.
    for (int64_t j = 0; j < d; ++j) hr[j] = from_acc<T>(to_acc(xr[j]) + to_acc(rr[j]));
    const A ss = lane_sum<A>(d, [&](int64_t j) { return to_acc(hr[j]) * to_acc(hr[j]); });
    const A rs = A(1) / std::sqrt(ss / A(d) + A(eps));
    rstd[i] = rs;
    T* yr = y + i * d;
    for (int64_t j = 0; j < d; ++j)
      yr[j] = from_acc<T>(to_acc(hr[j]) * rs * (w ? to_acc(w[j]) : A(1)));
  });
}

template <typename T>
void add_rms_norm_backward(const T* h, const T* w, const acc_t<T>* rstd, const T* dy,
                           const T* dh_out, int64_t n, int64_t d, T* dh, T* dw) {
  rms_norm_backward(h, w, rstd, dy, n, d, dh, dw, dh_out);  // the norm's dx, then h's own gradient
}

// a = silu(p) of one channel, rounded to T as the unfused chain stores it (p itself first): the
// forward's output, or with norm_dim d the input of the L2 norm of each group of d channels.
template <typename T, typename A>
GDN_FAST_MATH_INLINE A silu_of_stored(A p) {
  const A pc = to_acc(from_acc<T>(p));
  return to_acc(from_acc<T>(pc * sigmoid_of(pc)));
}

template <typename T>
void causal_conv1d_silu_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k,
                                T* y, const int64_t* seq_start, int64_t norm_dim, double eps) {
  using A = acc_t<T>;
  conv::for_each_row(x, w, b, t, c, k, seq_start, b * t * c >= kPar,
                     [&](int64_t bi, int64_t s, const A* p) GDN_ROW_INLINE {
                       T* yr = y + (bi * t + s) * c;
                       for (int64_t ch = 0; ch < c; ++ch)
                         yr[ch] = from_acc<T>(silu_of_stored<T>(p[ch]));  // y = p sigmoid(p)
                       if (norm_dim == 0) return;
                       for (int64_t g0 = 0; g0 < c; g0 += norm_dim) {  // y / sqrt(sum y^2 + eps)
                         const T* yg = yr + g0;
                         const A ss = lane_sum<A>(
                             norm_dim, [&](int64_t j) { return to_acc(yg[j]) * to_acc(yg[j]); });
                         const A r = A(1) / std::sqrt(ss + A(eps));
                         for (int64_t j = g0; j < g0 + norm_dim; ++j)
                           yr[j] = from_acc<T>(to_acc(yr[j]) * r);
                       }
                     });
}

template <typename T>
void causal_conv1d_silu_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t,
                                 int64_t c, int64_t k, T* dx, T* dw, const int64_t* seq_start,
                                 int64_t norm_dim, double eps) {
  using A = acc_t<T>;
  conv::backward_tiled(
      x, w, b, t, c, k, dx, dw, seq_start, b * t * c >= kPar,
      [&](int64_t bi, int64_t s, const A* wt, A* p, A* g) GDN_ROW_INLINE {
        conv::forward_row(x, wt, t, c, k, bi, s, conv::first_tap(seq_start, s), p);
        const T* dyr = dy + (bi * t + s) * c;
        // p becomes silu'(p) = sg (1 + p (1 - sg)), g the gradient at a = silu(p): dy, or through
        // the norm of each group (y = a r, r = 1 / sqrt(sum a^2 + eps)): da = r (dy - y sum(dy y)),
        // rounded to T. Then dp = da silu'(p).
        if (norm_dim == 0) {
          for (int64_t ch = 0; ch < c; ++ch) {
            const A pc = to_acc(from_acc<T>(p[ch]));  // rounded to T, as the unfused conv stores
            const A sg = sigmoid_of(pc);
            p[ch] = sg * (A(1) + pc * (A(1) - sg));
            g[ch] = to_acc(dyr[ch]);
          }
        } else {
          for (int64_t ch = 0; ch < c; ++ch) {
            const A pc = to_acc(from_acc<T>(p[ch]));
            const A sg = sigmoid_of(pc);
            g[ch] = to_acc(from_acc<T>(pc * sg));  // a, as the unfused SiLU stores it
            p[ch] = sg * (A(1) + pc * (A(1) - sg));
          }
          for (int64_t g0 = 0; g0 < c; g0 += norm_dim) {
            A* gg = g + g0;
            const T* dyg = dyr + g0;
            const A r = A(1) / std::sqrt(dot(gg, gg, norm_dim) + A(eps));
            for (int64_t j = 0; j < norm_dim; ++j)
              gg[j] = to_acc(from_acc<T>(gg[j] * r));  // y, as the norm stores it
            const A dy_y = lane_sum<A>(norm_dim, [&](int64_t j) { return to_acc(dyg[j]) * gg[j]; });
            for (int64_t j = 0; j < norm_dim; ++j)
              gg[j] = to_acc(from_acc<T>(r * (to_acc(dyg[j]) - gg[j] * dy_y)));
          }
        }
        for (int64_t ch = 0; ch < c; ++ch) g[ch] = to_acc(from_acc<T>(g[ch] * p[ch]));
      });
}

#define INST(T)                                                                                   \
  template void swiglu_forward<T>(const T*, const T*, int64_t, T*);                               \
  template void swiglu_backward<T>(const T*, const T*, const T*, int64_t, T*, T*);                \
  template void gated_rms_norm_forward<T>(const T*, const T*, const T*, int64_t, int64_t, double, \
                                          bool, T*, acc_t<T>*);                                   \
  template void gated_rms_norm_backward<T>(const T*, const T*, const T*, const acc_t<T>*,         \
                                           const T*, int64_t, int64_t, bool, T*, T*, T*);         \
  template void add_rms_norm_forward<T>(const T*, const T*, const T*, int64_t, int64_t, double,   \
                                        T*, T*, acc_t<T>*);                                       \
  template void add_rms_norm_backward<T>(const T*, const T*, const acc_t<T>*, const T*, const T*, \
                                         int64_t, int64_t, T*, T*);                               \
  template void causal_conv1d_silu_forward<T>(const T*, const T*, int64_t, int64_t, int64_t,      \
                                              int64_t, T*, const int64_t*, int64_t, double);      \
  template void causal_conv1d_silu_backward<T>(const T*, const T*, const T*, int64_t, int64_t,    \
                                               int64_t, int64_t, T*, T*, const int64_t*, int64_t, \
                                               double);
INST(float)
INST(double)
INST(bf16)
INST(fp16)

}  // namespace gdn::cpu
