// CPU fp64 sum of squares over fixed blocks (OpenMP across blocks, each summed in lanes, then the
// partials in order).
#include "kernels/cpu/grad_norm.h"
#include "kernels/cpu/lane_sum.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include <vector>

namespace gdn::cpu {

namespace {
constexpr int64_t kBlock = 1 << 14;  // elements per partial sum; fixed so the result is too

// Widens an element to fp64 (half types and float through float; double unchanged).
inline __attribute__((always_inline)) double widen(double x) {
  return x;
}
template <typename T>
inline __attribute__((always_inline)) double widen(T x) {
  return double(float(x));
}
}  // namespace

template <typename T>
GDN_CPU_CLONES void sum_squares(const T* x, int64_t n, double* out) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
#pragma omp parallel if (blocks > 1)
  {
    GDN_TRACE_WORKER(__func__);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t end = b * kBlock + kBlock < n ? b * kBlock + kBlock : n;
      const T* xb = x + b * kBlock;
      partial[size_t(b)] = lane_sum<double>(end - b * kBlock, [&](int64_t i) {
        const double v = widen(xb[i]);
        return v * v;
      });
    }
  }
  double total = 0.0;
  for (double s : partial) total += s;
  *out = total;
}

template void sum_squares<float>(const float*, int64_t, double*);
template void sum_squares<double>(const double*, int64_t, double*);
template void sum_squares<bf16>(const bf16*, int64_t, double*);
template void sum_squares<fp16>(const fp16*, int64_t, double*);

}  // namespace gdn::cpu
