// CPU element-wise kernels (OpenMP over elements; static schedule, so results are
// deterministic).
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include "kernels/cpu/fast_exp.h"
#include "kernels/philox.h"

namespace gdn::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // below this, threads cost more than they save

template <typename T>
inline acc_t<T> load(const T& x) {
  return to_acc(x);
}

using kern::convert;
using kern::strided_offset;

// A strided iteration over a shape as rows (the leading dims) of cols (the last dim) elements.
struct Rows {
  int64_t rows = 1, cols = 1;
  Rows(int ndim, const int64_t* shape) {
    for (int d = 0; d + 1 < ndim; ++d) rows *= shape[d];
    if (ndim) cols = shape[ndim - 1];
  }
};
// The stride along the last dim (0 for a scalar).
inline int64_t last_stride(int ndim, const int64_t* stride) {
  return ndim ? stride[ndim - 1] : 0;
}
// The offset of row r (the leading dims).
inline int64_t row_offset(int64_t r, int ndim, const int64_t* shape, const int64_t* stride) {
  return ndim > 1 ? strided_offset(r, ndim - 1, shape, stride) : 0;
}
}  // namespace

// The CPU's form of a unary op: sigmoid and silu on the vectorising exp in fp32 (fast_exp.h),
// everything else as kern::apply_unary computes it on every device.
template <typename A>
inline A unary_on_cpu(kern::Unary op, A x, A a, A b) {
  if (op == kern::Unary::sigmoid) return sigmoid_fast(x);
  if (op == kern::Unary::silu) return x * sigmoid_fast(x);
  return kern::apply_unary<A>(op, x, a, b);
}

template <kern::Unary OP, typename T>
GDN_CPU_CLONES void unary_loop(const T* x, T* y, int64_t n, acc_t<T> a, acc_t<T> b) {
  using A = acc_t<T>;
#pragma omp parallel if (n >= kParallelMin)
  {
    GDN_TRACE_WORKER("unary");
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = from_acc<T>(unary_on_cpu<A>(OP, load(x[i]), a, b));
  }
}

template <typename T>
void unary(kern::Unary op, const T* x, T* y, int64_t n, double alpha, double beta) {
  using A = acc_t<T>;
  kern::with_unary(op,
                   [&](auto tag) { unary_loop<decltype(tag)::value>(x, y, n, A(alpha), A(beta)); });
}

// Rows over the leading dims, an inner loop over the last one (specialised for the common
// contiguous and scalar-broadcast strides so it vectorizes).
template <kern::Binary OP, typename T>
GDN_CPU_CLONES void binary_loop(const kern::BroadcastLayout& L, const T* a, const T* b, T* out,
                                acc_t<T> al) {
  using A = acc_t<T>;
  const Rows shape(L.ndim, L.shape);
  const int64_t rows = shape.rows, cols = shape.cols;
  const int64_t sa = last_stride(L.ndim, L.stride_a), sb = last_stride(L.ndim, L.stride_b);
#pragma omp parallel if (rows * cols >= kParallelMin)
  {
    GDN_TRACE_WORKER("binary");
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* pa = a + row_offset(r, L.ndim, L.shape, L.stride_a);
      const T* pb = b + row_offset(r, L.ndim, L.shape, L.stride_b);
      T* po = out + r * cols;
      if (sa == 1 && sb == 1) {
        for (int64_t c = 0; c < cols; ++c)
          po[c] = from_acc<T>(kern::apply_binary<A>(OP, load(pa[c]), load(pb[c]), al));
      } else if (sa == 1 && sb == 0) {
        const A vb = load(pb[0]);
        for (int64_t c = 0; c < cols; ++c)
          po[c] = from_acc<T>(kern::apply_binary<A>(OP, load(pa[c]), vb, al));
      } else if (sa == 0 && sb == 1) {
        const A va = load(pa[0]);
        for (int64_t c = 0; c < cols; ++c)
          po[c] = from_acc<T>(kern::apply_binary<A>(OP, va, load(pb[c]), al));
      } else {
        for (int64_t c = 0; c < cols; ++c)
          po[c] = from_acc<T>(kern::apply_binary<A>(OP, load(pa[c * sa]), load(pb[c * sb]), al));
      }
    }
  }
}

template <typename T>
void binary(kern::Binary op, const kern::BroadcastLayout& L, const T* a, const T* b, T* out,
            double alpha) {
  using A = acc_t<T>;
  kern::with_binary(op,
                    [&](auto tag) { binary_loop<decltype(tag)::value>(L, a, b, out, A(alpha)); });
}

template <typename S, typename D>
GDN_CPU_CLONES void copy_strided(const kern::CopyLayout& L, const S* src, D* dst) {
  const Rows shape(L.ndim, L.shape);
  const int64_t rows = shape.rows, cols = shape.cols;
  const int64_t ss = last_stride(L.ndim, L.stride_src), sd = last_stride(L.ndim, L.stride_dst);
#pragma omp parallel if (rows * cols >= kParallelMin)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const S* ps = src + row_offset(r, L.ndim, L.shape, L.stride_src);
      D* pd = dst + row_offset(r, L.ndim, L.shape, L.stride_dst);
      if (ss == 1 && sd == 1) {
        for (int64_t c = 0; c < cols; ++c) pd[c] = convert<D>(ps[c]);
      } else {
        for (int64_t c = 0; c < cols; ++c) pd[c * sd] = convert<D>(ps[c * ss]);
      }
    }
  }
}

template <typename T>
GDN_CPU_CLONES void axpy(T* dst, const T* src, int64_t n, double alpha) {
  using A = acc_t<T>;
  const A al = A(alpha);
#pragma omp parallel if (n >= kParallelMin)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = from_acc<T>(load(dst[i]) + al * load(src[i]));
  }
}

template <typename T>
GDN_CPU_CLONES void fill(T* p, int64_t n, double value) {
  const T v = convert<T>(value);
#pragma omp parallel if (n >= kParallelMin)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  }
}

// p[i] = draw(offset + i) for every i < n: counter-based draws, each element on its own, so the
// bits do not depend on the thread count. Not cloned (kernels/cpu/simd.h): the draws' arithmetic
// stays that of the baseline ISA.
template <typename T, typename Draw>
void fill_drawn(T* p, int64_t n, uint64_t offset, const char* name, const Draw& draw) {
#pragma omp parallel if (n >= kParallelMin)
  {
    GDN_TRACE_WORKER(name);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(draw(offset + uint64_t(i)));
  }
}

template <typename T>
void random_normal(T* p, int64_t n, uint64_t seed, uint64_t offset, double mean, double std) {
  fill_drawn(
      p, n, offset, __func__, [&](uint64_t at) __attribute__((always_inline)) {
        return mean + std * kern::philox_normal(at, seed);
      });
}

template <typename T>
void random_uniform(T* p, int64_t n, uint64_t seed, uint64_t offset, double low, double high) {
  fill_drawn(
      p, n, offset, __func__, [&](uint64_t at) __attribute__((always_inline)) {
        return low + (high - low) * kern::philox_uniform(at, seed);
      });
}

template <typename T>
void random_int(T* p, int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high) {
  const uint64_t range = uint64_t(high - low);
  fill_drawn(
      p, n, offset, __func__, [&](uint64_t at) __attribute__((always_inline)) {
        kern::Philox4 r = kern::philox4x32(at, seed);
        uint64_t bits = (uint64_t(r.x[0]) << 32) | r.x[1];
        return double(low + int64_t(bits % range));
      });
}

#define GDN_FLOAT_TYPES(X) X(float) X(double) X(bf16) X(fp16)
#define GDN_ALL_TYPES(X) X(float) X(double) X(bf16) X(fp16) X(int32_t) X(int64_t)

#define INST_FLOAT(T)                                                                         \
  template void unary<T>(kern::Unary, const T*, T*, int64_t, double, double);                 \
  template void binary<T>(kern::Binary, const kern::BroadcastLayout&, const T*, const T*, T*, \
                          double);                                                            \
  template void axpy<T>(T*, const T*, int64_t, double);                                       \
  template void random_normal<T>(T*, int64_t, uint64_t, uint64_t, double, double);            \
  template void random_uniform<T>(T*, int64_t, uint64_t, uint64_t, double, double);
GDN_FLOAT_TYPES(INST_FLOAT)

#define INST_ALL(T)                                                                    \
  template void fill<T>(T*, int64_t, double);                                          \
  template void random_int<T>(T*, int64_t, uint64_t, uint64_t, int64_t, int64_t);      \
  template void copy_strided<T, float>(const kern::CopyLayout&, const T*, float*);     \
  template void copy_strided<T, double>(const kern::CopyLayout&, const T*, double*);   \
  template void copy_strided<T, bf16>(const kern::CopyLayout&, const T*, bf16*);       \
  template void copy_strided<T, fp16>(const kern::CopyLayout&, const T*, fp16*);       \
  template void copy_strided<T, int32_t>(const kern::CopyLayout&, const T*, int32_t*); \
  template void copy_strided<T, int64_t>(const kern::CopyLayout&, const T*, int64_t*);
GDN_ALL_TYPES(INST_ALL)

}  // namespace gdn::cpu
