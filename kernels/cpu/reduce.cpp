// CPU reductions, softmax and cross-entropy. Sums run in a fixed order per output (no
// cross-thread reductions), so results are deterministic.
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include <cmath>
#include <limits>
#include <vector>

namespace gdn::cpu {

template <typename T>
GDN_CPU_CLONES void reduce(Reduce op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                           int64_t* argmax) {
  using A = acc_t<T>;
  parallel_rows(outer, outer * r * inner >= (1 << 15), __func__, [&](int64_t o) GDN_ROW_INLINE {
    const T* base = x + o * r * inner;
    if (op == Reduce::sum) {
      std::vector<A> acc(size_t(inner), A(0));
      for (int64_t j = 0; j < r; ++j)
        for (int64_t i = 0; i < inner; ++i) acc[i] += to_acc(base[j * inner + i]);
      for (int64_t i = 0; i < inner; ++i) out[o * inner + i] = from_acc<T>(acc[i]);
    } else {
      for (int64_t i = 0; i < inner; ++i) {
        A best = to_acc(base[i]);
        int64_t arg = 0;
        for (int64_t j = 1; j < r; ++j) {
          A v = to_acc(base[j * inner + i]);
          if (!(v <= best) && !std::isnan(best)) {  // larger, or the first NaN (propagates)
            best = v;
            arg = j;
          }
        }
        out[o * inner + i] = from_acc<T>(best);
        if (argmax) argmax[o * inner + i] = arg;
      }
    }
  });
}

template <typename T>
GDN_CPU_CLONES void reduce_max_backward(const T* dy, const int64_t* argmax, int64_t outer,
                                        int64_t r, int64_t inner, T* dx) {
  parallel_rows(outer, outer * r * inner >= (1 << 15), __func__, [&](int64_t o) GDN_ROW_INLINE {
    T* base = dx + o * r * inner;
    for (int64_t j = 0; j < r * inner; ++j) base[j] = from_acc<T>(acc_t<T>(0));
    for (int64_t i = 0; i < inner; ++i) base[argmax[o * inner + i] * inner + i] = dy[o * inner + i];
  });
}

template <typename T>
GDN_CPU_CLONES void softmax_rows(const T* x, T* y, int64_t n, int64_t d, bool log) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= (1 << 14), __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* xr = x + i * d;
    T* yr = y + i * d;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < d; ++j) m = std::max(m, to_acc(xr[j]));
    A s = 0;
    for (int64_t j = 0; j < d; ++j) s += std::exp(to_acc(xr[j]) - m);
    if (log) {
      A lse = m + std::log(s);
      for (int64_t j = 0; j < d; ++j) yr[j] = from_acc<T>(to_acc(xr[j]) - lse);
    } else {
      A inv = A(1) / s;
      for (int64_t j = 0; j < d; ++j) yr[j] = from_acc<T>(std::exp(to_acc(xr[j]) - m) * inv);
    }
  });
}

template <typename T>
GDN_CPU_CLONES void softmax_rows_backward(const T* y, const T* dy, T* dx, int64_t n, int64_t d,
                                          bool log) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= (1 << 14), __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* yr = y + i * d;
    const T* gr = dy + i * d;
    T* dr = dx + i * d;
    A s = 0;
    if (log) {
      // y = x - lse: dx = dy - softmax * sum(dy)
      for (int64_t j = 0; j < d; ++j) s += to_acc(gr[j]);
      for (int64_t j = 0; j < d; ++j)
        dr[j] = from_acc<T>(to_acc(gr[j]) - std::exp(to_acc(yr[j])) * s);
    } else {
      // dx = y * (dy - sum(dy * y))
      for (int64_t j = 0; j < d; ++j) s += to_acc(gr[j]) * to_acc(yr[j]);
      for (int64_t j = 0; j < d; ++j) dr[j] = from_acc<T>(to_acc(yr[j]) * (to_acc(gr[j]) - s));
    }
  });
}

template <typename T, typename I>
GDN_CPU_CLONES void cross_entropy_forward(const T* logits, const I* targets, int64_t n, int64_t v,
                                          int64_t ignore_index, acc_t<T>* lse, acc_t<T>* stats,
                                          int64_t* bad_target) {
  using A = acc_t<T>;
  std::vector<A> row_loss(size_t(n), A(0));
  int64_t bad = -1;
  parallel_rows(n, n * v >= (1 << 14), __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* xr = logits + i * v;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < v; ++j) m = std::max(m, to_acc(xr[j]));
    A s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(to_acc(xr[j]) - m);
    lse[i] = m + std::log(s);
    const int64_t t = int64_t(targets[i]);
    if (t == ignore_index) return;
    if (t < 0 || t >= v) {
#pragma omp critical(gdn_ce_bad)
      if (bad < 0 || i < bad) bad = i;
      return;
    }
    row_loss[i] = lse[i] - to_acc(xr[t]);
  });
  A total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (int64_t(targets[i]) == ignore_index) continue;
    total += row_loss[i];
    ++count;
  }
  stats[0] = count ? total / A(count) : A(0);
  stats[1] = A(count);
  *bad_target = bad;
}

template <typename T, typename I>
GDN_CPU_CLONES void cross_entropy_backward(const T* logits, const I* targets, const acc_t<T>* lse,
                                           const acc_t<T>* stats, const acc_t<T>* dloss, int64_t n,
                                           int64_t v, int64_t ignore_index, T* dlogits) {
  using A = acc_t<T>;
  const A scale = stats[1] > A(0) ? dloss[0] / stats[1] : A(0);
  parallel_rows(n, n * v >= (1 << 14), __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* xr = logits + i * v;
    T* dr = dlogits + i * v;
    const int64_t t = int64_t(targets[i]);
    if (t == ignore_index) {
      for (int64_t j = 0; j < v; ++j) dr[j] = from_acc<T>(A(0));
      return;
    }
    for (int64_t j = 0; j < v; ++j) {
      A p = std::exp(to_acc(xr[j]) - lse[i]);
      dr[j] = from_acc<T>(scale * (p - (j == t ? A(1) : A(0))));
    }
  });
}

#define INST(T)                                                                                  \
  template void reduce<T>(Reduce, const T*, int64_t, int64_t, int64_t, T*, int64_t*);            \
  template void reduce_max_backward<T>(const T*, const int64_t*, int64_t, int64_t, int64_t, T*); \
  template void softmax_rows<T>(const T*, T*, int64_t, int64_t, bool);                           \
  template void softmax_rows_backward<T>(const T*, const T*, T*, int64_t, int64_t, bool);        \
  INST_CE(T, int32_t) INST_CE(T, int64_t)
#define INST_CE(T, I)                                                                              \
  template void cross_entropy_forward<T, I>(const T*, const I*, int64_t, int64_t, int64_t,         \
                                            acc_t<T>*, acc_t<T>*, int64_t*);                       \
  template void cross_entropy_backward<T, I>(const T*, const I*, const acc_t<T>*, const acc_t<T>*, \
                                             const acc_t<T>*, int64_t, int64_t, int64_t, T*);
INST(float)
INST(double)
INST(bf16)
INST(fp16)

}  // namespace gdn::cpu
