// Rotary position embedding on CUDA (kernels/cuda/rope_cuda.h): one thread per rotated pair
// (token, head, i < D/2), as the CPU kernel (kernels/cpu/rope.h):
//   a = pos theta^(-2i/D),  y_i = x_i cos a - x_{i+D/2} sin a,  y_{i+D/2} = x_{i+D/2} cos a + x_i
//   sin a
// (sin negated for the inverse). pos = offset + t - start, start the first token of t's sequence
// (a binary search in cu_seqlens, copied to the workspace; 0 unpacked). theta^(-2i/D) is computed
// in fp64 and rounded once to the math type, as on the CPU. A thread reads its pair before writing
// it, so x and y may be the same buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/rope_cuda.h"

namespace gdn::rope {

namespace {

using gdn::cuda::acc_cos;
using gdn::cuda::acc_sin;

struct Dims {
  int64_t T, H, D, half, offset, pairs;
  double theta;
  const int64_t* cu;  // device: N + 1 offsets, or null (unpacked)
  int64_t n_seqs;
  bool inverse;
};

template <typename T>
__global__ void rope_kernel(const Dims p, const T* x, T* y) {
  using A = acc_t<T>;
  GDN_GRID_LOOP(idx, p.pairs) {
    const int64_t i = idx % p.half, row = idx / p.half;  // row: (token, head)
    const int64_t t = (row / p.H) % p.T;
    int64_t start = 0;
    if (p.cu) {  // the last n with cu[n] <= t
      int64_t lo = 0, hi = p.n_seqs - 1;
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (p.cu[mid] <= t)
          lo = mid;
        else
          hi = mid - 1;
      }
      start = p.cu[lo];
    }
    const A inv_freq = A(pow(p.theta, -2.0 * double(i) / double(p.D)));
    const A a = A(p.offset + t - start) * inv_freq;
    const A c = acc_cos(a), s = p.inverse ? -acc_sin(a) : acc_sin(a);
    const T* xr = x + row * p.D;
    T* yr = y + row * p.D;
    const A x1 = to_acc(xr[i]), x2 = to_acc(xr[i + p.half]);
    yr[i] = from_acc<T>(x1 * c - x2 * s);
    yr[i + p.half] = from_acc<T>(x2 * c + x1 * s);
  }
}

}  // namespace

int64_t cuda_workspace_bytes(const Problem& p) {
  validate(p);
  return int64_t(p.cu_seqlens.size() * sizeof(int64_t));
}

template <typename T>
void apply_cuda(const Problem& p, const T* x, T* y, bool inverse, void* workspace, void* stream) {
  validate(p);
  const cudaStream_t s = gdn::cuda::as_stream(stream);
  Dims d{};
  d.T = p.T;
  d.H = p.H;
  d.D = p.D;
  d.half = p.D / 2;
  d.offset = p.offset;
  d.pairs = p.B * p.T * p.H * d.half;
  d.theta = p.theta;
  d.inverse = inverse;
  if (!p.cu_seqlens.empty()) {
    gdn::cuda::upload_async(p.cu_seqlens.data(), p.cu_seqlens.size() * sizeof(int64_t), workspace,
                            s);
    d.cu = static_cast<const int64_t*>(workspace);
    d.n_seqs = int64_t(p.cu_seqlens.size()) - 1;
  }
  constexpr int kBlock = 256;
  const int64_t blocks = std::min<int64_t>((d.pairs + kBlock - 1) / kBlock, 65535 * 16);
  rope_kernel<T><<<unsigned(blocks), kBlock, 0, s>>>(d, x, y);
  GDN_KCUDA_LAUNCHED("rope");
}

template void apply_cuda<float>(const Problem&, const float*, float*, bool, void*, void*);
template void apply_cuda<double>(const Problem&, const double*, double*, bool, void*, void*);
template void apply_cuda<bf16>(const Problem&, const bf16*, bf16*, bool, void*, void*);

}  // namespace gdn::rope
