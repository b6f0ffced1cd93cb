// Rotary position embedding (kernels/cpu/rope.h): one (token, head) row per iteration; the
// angles of a token are computed once per token from the inverse frequencies.
#include "kernels/cpu/rope.h"
#include "kernels/cpu/simd.h"
#include "kernels/trace_events.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace gdn::rope {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("rope: " + what);
}

// start[t]: the first token of t's sequence (0 without packing).
std::vector<int64_t> sequence_starts(const Problem& p) {
  std::vector<int64_t> start(size_t(p.T), 0);
  for (size_t n = 0; n + 1 < p.cu_seqlens.size(); ++n)
    for (int64_t t = p.cu_seqlens[n]; t < p.cu_seqlens[n + 1]; ++t)
      start[size_t(t)] = p.cu_seqlens[n];
  return start;
}

}  // namespace

void validate(const Problem& p) {
  if (p.B < 1 || p.T < 1 || p.H < 1 || p.D < 2)
    fail("sizes must be >= 1 (D >= 2), got B " + std::to_string(p.B) + ", T " +
         std::to_string(p.T) + ", H " + std::to_string(p.H) + ", D " + std::to_string(p.D));
  if (p.D % 2 != 0) fail("head dim D must be even, got " + std::to_string(p.D));
  if (!(p.theta > 0) || !std::isfinite(p.theta))
    fail("theta must be finite and > 0, got " + std::to_string(p.theta));
  if (p.offset < 0) fail("offset must be >= 0, got " + std::to_string(p.offset));
  if (p.cu_seqlens.empty()) return;
  if (p.B != 1) fail("packed sequences (cu_seqlens) need B = 1, got B " + std::to_string(p.B));
  const auto& cu = p.cu_seqlens;
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != p.T)
    fail("cu_seqlens must run from 0 to T = " + std::to_string(p.T));
  for (size_t n = 0; n + 1 < cu.size(); ++n)
    if (cu[n + 1] <= cu[n]) fail("cu_seqlens must be strictly increasing");
}

template <typename T>
GDN_CPU_CLONES void apply_cpu(const Problem& p, const T* x, T* y, bool inverse) {
  using A = acc_t<T>;
  validate(p);
  const int64_t half = p.D / 2, rows = p.B * p.T;
  // inv_freq_i = theta^(-2i/D), computed in fp64 and rounded once to the math precision.
  std::vector<A> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq[size_t(i)] = A(std::pow(p.theta, -2.0 * double(i) / double(p.D)));
  const std::vector<int64_t> start = sequence_starts(p);
  const A sign = inverse ? A(-1) : A(1);
#pragma omp parallel
  {
    GDN_TRACE_WORKER("rope");
    std::vector<A> cos_a(static_cast<size_t>(half)), sin_a(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = r % p.T;
      const A pos = A(p.offset + t - start[size_t(t)]);
      for (int64_t i = 0; i < half; ++i) {
        const A a = pos * inv_freq[size_t(i)];
        cos_a[size_t(i)] = std::cos(a);
        sin_a[size_t(i)] = sign * std::sin(a);
      }
      for (int64_t h = 0; h < p.H; ++h) {
        const T* xr = x + (r * p.H + h) * p.D;
        T* yr = y + (r * p.H + h) * p.D;
        for (int64_t i = 0; i < half; ++i) {
          const A x1 = to_acc(xr[i]), x2 = to_acc(xr[i + half]);
          const A c = cos_a[size_t(i)], s = sin_a[size_t(i)];
          yr[i] = from_acc<T>(x1 * c - x2 * s);
          yr[i + half] = from_acc<T>(x2 * c + x1 * s);
        }
      }
    }
  }
}

template void apply_cpu<float>(const Problem&, const float*, float*, bool);
template void apply_cpu<double>(const Problem&, const double*, double*, bool);
template void apply_cpu<bf16>(const Problem&, const bf16*, bf16*, bool);

}  // namespace gdn::rope
