// CPU layer-op kernels. Reductions over rows run in a fixed order; parameter gradients
// (dw) are summed per column over rows in order, so results are deterministic.
#include "kernels/cpu/nn.h"
#include "kernels/cpu/column_sums.h"
#include "kernels/cpu/conv_rows.h"
#include "kernels/cpu/lane_sum.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include <cmath>
#include <vector>

#include <algorithm>

namespace gdn::cpu {

namespace {
constexpr int64_t kPar = 1 << 14;

// sum_j x_j^2 of one row, in lanes (kernels/cpu/lane_sum.h).
template <typename T>
inline GDN_ROW_INLINE acc_t<T> sum_squares(const T* x, int64_t d) {
  return lane_sum<acc_t<T>>(d, [&](int64_t j) { return to_acc(x[j]) * to_acc(x[j]); });
}
}  // namespace

template <typename T, typename I>
GDN_CPU_CLONES void embedding_forward(const T* weight, const I* idx, int64_t n, int64_t v,
                                      int64_t d, T* out, int64_t* bad) {
  int64_t first_bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (int64_t(idx[i]) < 0 || int64_t(idx[i]) >= v) {
      first_bad = i;
      break;
    }
  }
  *bad = first_bad;
  if (first_bad >= 0) return;
  parallel_rows(n, n * d >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* src = weight + int64_t(idx[i]) * d;
    T* dst = out + i * d;
    for (int64_t j = 0; j < d; ++j) dst[j] = src[j];
  });
}

template <typename T, typename I>
GDN_CPU_CLONES void embedding_backward(const T* dout, const I* idx, int64_t n, int64_t v, int64_t d,
                                       T* dweight) {
  using A = acc_t<T>;
  // Threads own disjoint column blocks; each walks the tokens in order.
  const int64_t block = 64;
  const int64_t nblocks = (d + block - 1) / block;
  for (int64_t i = 0; i < v * d; ++i) dweight[i] = from_acc<T>(A(0));
  parallel_rows(nblocks, n * d >= kPar, __func__, [&](int64_t cb) GDN_ROW_INLINE {
    const int64_t j0 = cb * block, j1 = std::min(d, j0 + block);
    for (int64_t i = 0; i < n; ++i) {
      T* dst = dweight + int64_t(idx[i]) * d;
      const T* src = dout + i * d;
      for (int64_t j = j0; j < j1; ++j) dst[j] = from_acc<T>(to_acc(dst[j]) + to_acc(src[j]));
    }
  });
}

template <typename T>
GDN_CPU_CLONES void rms_norm_forward(const T* x, const T* w, int64_t n, int64_t d, double eps, T* y,
                                     acc_t<T>* rstd) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* xr = x + i * d;
    A r = A(1) / std::sqrt(sum_squares(xr, d) / A(d) + A(eps));
    rstd[i] = r;
    T* yr = y + i * d;
    for (int64_t j = 0; j < d; ++j)
      yr[j] = from_acc<T>(to_acc(xr[j]) * r * (w ? to_acc(w[j]) : A(1)));
  });
}

template <typename T>
GDN_CPU_CLONES void rms_norm_backward(const T* x, const T* w, const acc_t<T>* rstd, const T* dy,
                                      int64_t n, int64_t d, T* dx, T* dw, const T* dx_add) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* xr = x + i * d;
    const T* gr = dy + i * d;
    const A r = rstd[i];
    const A dot = w ? lane_sum<A>(d,
                                  [&](int64_t j) {  // sum_j dy_j w_j x_j
                                    return to_acc(gr[j]) * to_acc(w[j]) * to_acc(xr[j]);
                                  })
                    : lane_sum<A>(d, [&](int64_t j) { return to_acc(gr[j]) * to_acc(xr[j]); });
    const A c = dot * r * r / A(d);
    T* dr = dx + i * d;
    for (int64_t j = 0; j < d; ++j) {
      const T dn = from_acc<T>(r * (to_acc(gr[j]) * (w ? to_acc(w[j]) : A(1)) - to_acc(xr[j]) * c));
      dr[j] = dx_add ? from_acc<T>(to_acc(dn) + to_acc(dx_add[i * d + j])) : dn;
    }
  });
  if (!dw) return;
  column_sums<A>(
      n, d, n * d >= kPar,
      [&](int64_t i, int64_t j) { return to_acc(dy[i * d + j]) * to_acc(x[i * d + j]) * rstd[i]; },
      [&](int64_t j, A sum) { dw[j] = from_acc<T>(sum); });
}

template <typename T>
GDN_CPU_CLONES void l2_norm_forward(const T* x, int64_t n, int64_t d, double eps, T* y,
                                    acc_t<T>* rn) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* xr = x + i * d;
    const A r = A(1) / std::sqrt(sum_squares(xr, d) + A(eps));
    rn[i] = r;
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = from_acc<T>(to_acc(xr[j]) * r);
  });
}

template <typename T>
GDN_CPU_CLONES void l2_norm_backward(const T* y, const acc_t<T>* rn, const T* dy, int64_t n,
                                     int64_t d, T* dx) {
  using A = acc_t<T>;
  parallel_rows(n, n * d >= kPar, __func__, [&](int64_t i) GDN_ROW_INLINE {
    const T* yr = y + i * d;
    const T* gr = dy + i * d;
    const A dot = lane_sum<A>(d, [&](int64_t j) { return to_acc(gr[j]) * to_acc(yr[j]); });
    for (int64_t j = 0; j < d; ++j)
      dx[i * d + j] = from_acc<T>(rn[i] * (to_acc(gr[j]) - to_acc(yr[j]) * dot));
  });
}

template <typename T>
void causal_conv1d_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k, T* y,
                           const int64_t* seq_start) {
  using A = acc_t<T>;
  conv::for_each_row(x, w, b, t, c, k, seq_start, b * t * c >= kPar,
                     [&](int64_t bi, int64_t s, const A* acc) {
                       T* yr = y + (bi * t + s) * c;
                       for (int64_t ch = 0; ch < c; ++ch) yr[ch] = from_acc<T>(acc[ch]);
                     });
}

template <typename T>
void causal_conv1d_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t, int64_t c,
                            int64_t k, T* dx, T* dw, const int64_t* seq_start) {
  const bool parallel = b * t * c >= kPar;
  if (dx) conv::backward_dx(w, dy, b, t, c, k, dx, seq_start, parallel);
  if (dw) conv::backward_dw(x, dy, b, t, c, k, dw, seq_start, parallel);
}

#define INST_EMB(T, I)                                                                     \
  template void embedding_forward<T, I>(const T*, const I*, int64_t, int64_t, int64_t, T*, \
                                        int64_t*);                                         \
  template void embedding_backward<T, I>(const T*, const I*, int64_t, int64_t, int64_t, T*);
#define INST(T)                                                                                    \
  INST_EMB(T, int32_t)                                                                             \
  INST_EMB(T, int64_t)                                                                             \
  template void rms_norm_forward<T>(const T*, const T*, int64_t, int64_t, double, T*, acc_t<T>*);  \
  template void rms_norm_backward<T>(const T*, const T*, const acc_t<T>*, const T*, int64_t,       \
                                     int64_t, T*, T*, const T*);                                   \
  template void l2_norm_forward<T>(const T*, int64_t, int64_t, double, T*, acc_t<T>*);             \
  template void l2_norm_backward<T>(const T*, const acc_t<T>*, const T*, int64_t, int64_t, T*);    \
  template void causal_conv1d_forward<T>(const T*, const T*, int64_t, int64_t, int64_t, int64_t,   \
                                         T*, const int64_t*);                                      \
  template void causal_conv1d_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, \
                                          int64_t, T*, T*, const int64_t*);
INST(float)
INST(double)
INST(bf16)
INST(fp16)

}  // namespace gdn::cpu
