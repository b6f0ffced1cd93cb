// What the kernel labs (gdr_lab, conv_lab) share: CUDA error checks, device buffers from and to
// fp64 host vectors, the max-norm relative error, and timing with the L2 cache scrubbed.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/numeric.h"

#define LAB_CUDA(expr)                                                                    \
  do {                                                                                    \
    cudaError_t lab_err_ = (expr);                                                        \
    if (lab_err_ != cudaSuccess)                                                          \
      throw std::runtime_error(std::string(#expr) + ": " + cudaGetErrorString(lab_err_)); \
  } while (0)

namespace gdn::lab_util {

template <typename X>
X* device_alloc(int64_t n) {
  void* p = nullptr;
  LAB_CUDA(cudaMalloc(&p, size_t(std::max<int64_t>(n, 1)) * sizeof(X)));
  return static_cast<X*>(p);
}

// x rounded to T on the device.
template <typename T>
T* upload(const std::vector<double>& x) {
  std::vector<T> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = from_acc<T>(acc_t<T>(x[i]));
  T* d = device_alloc<T>(int64_t(x.size()));
  LAB_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<double> download(const T* d, int64_t n) {
  std::vector<T> h(static_cast<size_t>(n));
  LAB_CUDA(cudaMemcpy(h.data(), d, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = double(to_acc(h[size_t(i)]));
  return x;
}

// max |x - ref| / max |ref| (max |x - ref| when ref is all zero).
inline double rel_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

// A device buffer twice the current device's L2 cache (at least 1 MiB): writing it before a
// timed run leaves none of the run's inputs in cache.
struct L2Scrub {
  void* buffer = nullptr;
  size_t bytes = 0;
  static L2Scrub make() {
    int dev = 0, l2 = 0;
    LAB_CUDA(cudaGetDevice(&dev));
    LAB_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    L2Scrub s;
    s.bytes = std::max<size_t>(2 * size_t(l2), 1 << 20);
    s.buffer = device_alloc<unsigned char>(int64_t(s.bytes));
    return s;
  }
};

struct Stats {
  double median = 0, q1 = 0, q3 = 0;
};

// Milliseconds per run, median and quartiles of `repeats` runs after `warmup` untimed ones (the
// first call also sets kernel attributes); each timed run follows an L2 scrub and is timed with
// events on the stream.
inline Stats time_runs(const std::function<void()>& run, int warmup, int repeats,
                       cudaStream_t stream, const L2Scrub& scrub) {
  cudaEvent_t start, stop;
  LAB_CUDA(cudaEventCreate(&start));
  LAB_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    LAB_CUDA(cudaMemsetAsync(scrub.buffer, r & 0xff, scrub.bytes, stream));
    LAB_CUDA(cudaEventRecord(start, stream));
    run();
    LAB_CUDA(cudaEventRecord(stop, stream));
    LAB_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    LAB_CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  LAB_CUDA(cudaEventDestroy(start));
  LAB_CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  auto at = [&](double f) { return ms[size_t(f * double(ms.size() - 1) + 0.5)]; };
  return Stats{at(0.5), at(0.25), at(0.75)};
}

}  // namespace gdn::lab_util
