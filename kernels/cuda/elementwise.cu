// CUDA element-wise kernels: grid-stride loops over elements, the op math shared with the CPU
// through kernels/elementwise_ops.h; random draws use the same Philox counters as the CPU.
#include <cuda_runtime.h>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch_math.h"
#include "kernels/philox.h"

namespace gdn::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void unary_kernel(kern::Unary op, const T* x, T* y, int64_t n, acc_t<T> alpha,
                             acc_t<T> beta) {
  GDN_GRID_LOOP(i, n)
  y[i] = from_acc<T>(kern::apply_unary<acc_t<T>>(op, to_acc(x[i]), alpha, beta));
}

template <typename T>
__global__ void binary_kernel(kern::Binary op, kern::BroadcastLayout L, const T* a, const T* b,
                              T* out, int64_t n, acc_t<T> alpha) {
  GDN_GRID_LOOP(i, n) {
    const int64_t oa = kern::strided_offset(i, L.ndim, L.shape, L.stride_a);
    const int64_t ob = kern::strided_offset(i, L.ndim, L.shape, L.stride_b);
    out[i] = from_acc<T>(kern::apply_binary<acc_t<T>>(op, to_acc(a[oa]), to_acc(b[ob]), alpha));
  }
}

template <typename S, typename D>
__global__ void copy_kernel(kern::CopyLayout L, const S* src, D* dst, int64_t n) {
  GDN_GRID_LOOP(i, n) {
    dst[kern::strided_offset(i, L.ndim, L.shape, L.stride_dst)] =
        kern::convert<D>(src[kern::strided_offset(i, L.ndim, L.shape, L.stride_src)]);
  }
}

template <typename T>
__global__ void axpy_kernel(T* dst, const T* src, int64_t n, acc_t<T> alpha) {
  GDN_GRID_LOOP(i, n)
  dst[i] = from_acc<T>(to_acc(dst[i]) + alpha * to_acc(src[i]));
}

template <typename T>
__global__ void fill_kernel(T* p, int64_t n, T value) {
  GDN_GRID_LOOP(i, n)
  p[i] = value;
}

// normal(a, b) = mean, std; uniform [a, b); integers [lo, lo + range).
enum class Draw { normal, uniform, integer };

template <typename T>
__global__ void random_kernel(T* p, int64_t n, uint64_t seed, uint64_t offset, Draw kind, double a,
                              double b, int64_t lo, uint64_t range) {
  GDN_GRID_LOOP(i, n) {
    const uint64_t c = offset + uint64_t(i);
    if (kind == Draw::normal) {
      p[i] = kern::convert<T>(a + b * kern::philox_normal(c, seed));
    } else if (kind == Draw::uniform) {
      p[i] = kern::convert<T>(a + (b - a) * kern::philox_uniform(c, seed));
    } else {
      kern::Philox4 r = kern::philox4x32(c, seed);
      uint64_t bits = (uint64_t(r.x[0]) << 32) | r.x[1];
      p[i] = kern::convert<T>(double(lo + int64_t(bits % range)));
    }
  }
}

int64_t layout_numel(int ndim, const int64_t* shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

// n draws of `kind` from the Philox counters offset.. (the CPU's), one launch named `what`.
template <typename T>
void draw(T* p, int64_t n, uint64_t seed, uint64_t offset, Draw kind, double a, double b,
          int64_t lo, uint64_t range, void* stream, const char* what) {
  if (n == 0) return;
  random_kernel<T><<<grid_1d(n, kThreads), kThreads, 0, as_stream(stream)>>>(p, n, seed, offset,
                                                                             kind, a, b, lo, range);
  GDN_KCUDA_LAUNCHED(what);
}

}  // namespace

template <typename T>
void unary(kern::Unary op, const T* x, T* y, int64_t n, double alpha, double beta, void* stream) {
  if (n == 0) return;
  unary_kernel<T><<<grid_1d(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      op, x, y, n, acc_t<T>(alpha), acc_t<T>(beta));
  GDN_KCUDA_LAUNCHED("unary");
}

template <typename T>
void binary(kern::Binary op, const kern::BroadcastLayout& L, const T* a, const T* b, T* out,
            double alpha, void* stream) {
  const int64_t n = layout_numel(L.ndim, L.shape);
  if (n == 0) return;
  binary_kernel<T><<<grid_1d(n, kThreads), kThreads, 0, as_stream(stream)>>>(op, L, a, b, out, n,
                                                                             acc_t<T>(alpha));
  GDN_KCUDA_LAUNCHED("binary");
}

template <typename S, typename D>
void copy_strided(const kern::CopyLayout& L, const S* src, D* dst, void* stream) {
  const int64_t n = layout_numel(L.ndim, L.shape);
  if (n == 0) return;
  copy_kernel<S, D><<<grid_1d(n, kThreads), kThreads, 0, as_stream(stream)>>>(L, src, dst, n);
  GDN_KCUDA_LAUNCHED("copy");
}

template <typename T>
void axpy(T* dst, const T* src, int64_t n, double alpha, void* stream) {
  if (n == 0) return;
  axpy_kernel<T>
      <<<grid_1d(n, kThreads), kThreads, 0, as_stream(stream)>>>(dst, src, n, acc_t<T>(alpha));
  GDN_KCUDA_LAUNCHED("axpy");
}

template <typename T>
void fill(T* p, int64_t n, double value, void* stream) {
  if (n == 0) return;
  fill_kernel<T>
      <<<grid_1d(n, kThreads), kThreads, 0, as_stream(stream)>>>(p, n, kern::convert<T>(value));
  GDN_KCUDA_LAUNCHED("fill");
}

template <typename T>
void random_normal(T* p, int64_t n, uint64_t seed, uint64_t offset, double mean, double std,
                   void* stream) {
  draw(p, n, seed, offset, Draw::normal, mean, std, 0, 1, stream, "random_normal");
}

template <typename T>
void random_uniform(T* p, int64_t n, uint64_t seed, uint64_t offset, double low, double high,
                    void* stream) {
  draw(p, n, seed, offset, Draw::uniform, low, high, 0, 1, stream, "random_uniform");
}

template <typename T>
void random_int(T* p, int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
                void* stream) {
  draw(p, n, seed, offset, Draw::integer, 0, 0, low, uint64_t(high - low), stream, "random_int");
}

#define INST_FLOAT(T)                                                                         \
  template void unary<T>(kern::Unary, const T*, T*, int64_t, double, double, void*);          \
  template void binary<T>(kern::Binary, const kern::BroadcastLayout&, const T*, const T*, T*, \
                          double, void*);                                                     \
  template void axpy<T>(T*, const T*, int64_t, double, void*);                                \
  template void random_normal<T>(T*, int64_t, uint64_t, uint64_t, double, double, void*);     \
  template void random_uniform<T>(T*, int64_t, uint64_t, uint64_t, double, double, void*);
INST_FLOAT(float)
INST_FLOAT(double)
INST_FLOAT(bf16)
INST_FLOAT(fp16)

#define INST_COPY(S, D) \
  template void copy_strided<S, D>(const kern::CopyLayout&, const S*, D*, void*);
#define INST_ALL(T)                                                                      \
  template void fill<T>(T*, int64_t, double, void*);                                     \
  template void random_int<T>(T*, int64_t, uint64_t, uint64_t, int64_t, int64_t, void*); \
  INST_COPY(T, float)                                                                    \
  INST_COPY(T, double)                                                                   \
  INST_COPY(T, bf16) INST_COPY(T, fp16) INST_COPY(T, int32_t) INST_COPY(T, int64_t)
INST_ALL(float)
INST_ALL(double)
INST_ALL(bf16)
INST_ALL(fp16)
INST_ALL(int32_t)
INST_ALL(int64_t)

}  // namespace gdn::cuda
