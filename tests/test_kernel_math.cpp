// CPU tests of the per-thread math the CUDA kernels run (kernels/cuda/kernel_math.h, the same
// __host__ __device__ functions), against the CPU kernels:
//   - the max-reduction combine: folding strided partials in the order of both CUDA reduce
//     kernels (8 row groups combined in order; a block's threads combined as a tree) gives the
//     CPU's first NaN / first maximum, with ties, signed zeros and NaNs;
//   - the column-by-column unit lower triangular inverse, columns run in any order (as threads
//     do), equals the CPU's row-by-row forward substitution and inverts I + M;
//   - the per-step chunk gate gradient equals the CPU's store_gate_grad;
//   - the cuDNN causal conv1d (kernels/cuda/conv_cudnn.h): a convolution computed exactly as cuDNN
//     defines it (grouped cross-correlation, NHWC data, KRSC filter, symmetric padding) on the
//     geometry's dims, with w zero-extended to 2k-1 taps, gives the CPU kernel's y, dx and dw
//     (first k taps) bit for bit; the workspace layout; GDN_CONV1D's parsing; and, in CUDA builds,
//     cuDNN's own reading of the descriptors (host calls, no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/cpu/nn.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/kernel_math.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/optional_libraries.h"
#endif

namespace gdn::cuda {
namespace {

// The CUDA reduce_columns_kernel: 8 threads stride j, combined in y order.
MaxArg<float> columns_kernel_max(const std::vector<float>& x) {
  MaxArg<float> part[8];
  for (int y = 0; y < 8; ++y) {
    part[y] = {0.f, -1};
    for (size_t j = y; j < x.size(); j += 8)
      part[y] = better(part[y], MaxArg<float>{x[j], int64_t(j)});
  }
  MaxArg<float> best = part[0];
  for (int y = 1; y < 8; ++y) best = better(best, part[y]);
  return best;
}

// The CUDA reduce_rows_kernel: `threads` stride j, then a shared-memory tree.
MaxArg<float> rows_kernel_max(const std::vector<float>& x, int threads) {
  std::vector<MaxArg<float>> part(threads, MaxArg<float>{0.f, -1});
  for (int t = 0; t < threads; ++t)
    for (size_t j = t; j < x.size(); j += threads)
      part[t] = better(part[t], MaxArg<float>{x[j], int64_t(j)});
  for (int s = threads / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; ++t) part[t] = better(part[t], part[t + s]);
  return part[0];
}

TEST(KernelMath, MaxCombineMatchesCpuFirstNanElseFirstMax) {
  std::mt19937 rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + int(rng() % 700);
    std::vector<float> x(n);
    for (auto& v : x) v = float(int(rng() % 9)) - 4.f;  // many ties
    if (trial % 3 == 0) x[rng() % n] = nan;
    if (trial % 5 == 0) x[rng() % n] = nan;
    if (trial % 7 == 0) std::fill(x.begin(), x.end(), -0.f), x[rng() % n] = 0.f;
    float out;
    int64_t arg;
    cpu::reduce<float>(cpu::Reduce::max, x.data(), 1, n, 1, &out, &arg);
    for (const MaxArg<float>& got :
         {columns_kernel_max(x), rows_kernel_max(x, 32), rows_kernel_max(x, 256)}) {
      ASSERT_EQ(got.i, arg) << "trial " << trial << " n " << n;
      if (std::isnan(out))
        EXPECT_TRUE(std::isnan(got.v));
      else
        EXPECT_EQ(std::signbit(got.v), std::signbit(out));
    }
  }
}

TEST(KernelMath, UnitLowerInverseColumnsInAnyOrderMatchCpu) {
  std::mt19937 rng(5);
  std::normal_distribution<double> n01(0, 1);
  for (int C : {16, 32, 64}) {  // the chunk sizes (the CPU inversion is blocked by 16)
    const int ld = 65;
    std::vector<double> m(C * ld, 0.0), cpu_a(C * C, 0.0);
    for (int r = 0; r < C; ++r)
      for (int l = 0; l < r; ++l) m[r * ld + l] = cpu_a[r * C + l] = 0.3 * n01(rng);
    const std::vector<double> M = cpu_a;
    std::vector<double> row_tmp(gdr::detail::invert_tmp_elems(C));
    gdr::detail::invert_unit_lower(cpu_a.data(), C, row_tmp.data());
    std::vector<int> order(C);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);  // threads run in no particular order
    for (int l : order) unit_lower_inverse_column(l, C, m.data(), ld);
    for (int r = 0; r < C; ++r)
      for (int l = 0; l < C; ++l) {
        const double got = r > l ? m[l * ld + r] : (r == l ? 1.0 : 0.0);
        EXPECT_NEAR(got, cpu_a[r * C + l], 1e-13 * (1 + std::abs(cpu_a[r * C + l])))
            << "C " << C << " at " << r << "," << l;
      }
    // (I + M) A = I
    for (int r = 0; r < C; ++r)
      for (int l = 0; l < C; ++l) {
        double acc = cpu_a[r * C + l];
        for (int j = 0; j < r; ++j) acc += M[r * C + j] * cpu_a[j * C + l];
        EXPECT_NEAR(acc, r == l ? 1.0 : 0.0, 1e-10);
      }
  }
}

TEST(KernelMath, GateGradMatchesCpuStoreGateGrad) {
  std::mt19937 rng(9);
  std::normal_distribution<double> n01(0, 1);
  for (int C : {16, 32, 64})
    for (int rows : {C, C - 5, 1}) {
      std::vector<double> a(C), X(C * C), col(C), want(C, 0.0);
      for (auto& v : a) v = n01(rng);
      for (auto& v : X) v = n01(rng);
      const double c = n01(rng);
      gdr::detail::store_gate_grad(a.data(), X.data(), c, rows, C, col.data(), want.data(), 1);
      for (int t = 0; t < rows; ++t)
        EXPECT_NEAR(gate_grad_at(t, a.data(), X.data(), c, C), want[t],
                    1e-12 * (1 + std::abs(want[t])))
            << "C " << C << " t " << t;
    }
}

// cuDNN's convolution, literally (its documented definition), on the geometry's descriptors:
// data NHWC [n, h, w, c] at n (h w c) + h (w c) + w c + c; filter KRSC [k, r, s, cg] (cg = c /
// groups); y[n,k,p,q] = sum_{cg,r,s} w[k,cg,r,s] x[n, g cg_count + cg, p + r - pad_h, q + s -
// pad_w] with g = k / (K / groups), zero outside. Backward data and filter are its adjoints.
struct CudnnLikeConv {
  CudnnConv1dGeometry g;
  int out_h() const { return g.h + 2 * g.pad_h - g.filter_h + 1; }
  int out_w() const { return g.w + 2 * g.pad_w - g.filter_w + 1; }
  int64_t data_at(int n, int c, int h, int w, int H, int W) const {
    return ((int64_t(n) * H + h) * W + w) * g.c + c;
  }
  int64_t filter_at(int k, int c, int r, int s) const {
    return ((int64_t(k) * g.filter_h + r) * g.filter_w + s) * g.filter_c + c;
  }
  // Calls f(y index, x index, w index) for every product of the convolution.
  template <typename F>
  void for_each_product(F&& f) const {
    const int in_per_group = g.c / g.groups, out_per_group = g.filter_k / g.groups;
    for (int n = 0; n < g.n; ++n)
      for (int k = 0; k < g.filter_k; ++k)
        for (int p = 0; p < out_h(); ++p)
          for (int q = 0; q < out_w(); ++q)
            for (int cg = 0; cg < g.filter_c; ++cg)
              for (int r = 0; r < g.filter_h; ++r)
                for (int s = 0; s < g.filter_w; ++s) {
                  const int hi = p + r - g.pad_h, wi = q + s - g.pad_w;
                  if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
                  const int ci = (k / out_per_group) * in_per_group + cg;
                  f(data_at(n, k, p, q, out_h(), out_w()), data_at(n, ci, hi, wi, g.h, g.w),
                    filter_at(k, cg, r, s));
                }
  }
};

// w' [c, taps]: w [c, k] zero-extended on the right.
std::vector<double> extend(const std::vector<double>& w, int64_t c, int64_t k, int taps) {
  std::vector<double> e(size_t(c * taps), 0.0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t j = 0; j < k; ++j) e[size_t(ch * taps + j)] = w[size_t(ch * k + j)];
  return e;
}

TEST(CudnnConv1d, CudnnDefinitionOnTheGeometryIsTheCausalConv) {
  std::mt19937 rng(21);
  auto small_ints = [&](size_t n) {  // exact in double: every sum below is exact
    std::vector<double> v(n);
    for (auto& e : v) e = double(int(rng() % 9) - 4);
    return v;
  };
  struct Shape {
    int64_t b, t, c, k;
  };
  const Shape shapes[] = {{1, 1, 1, 1}, {2, 1, 5, 4},  {3, 2, 7, 3},   {2, 3, 13, 4}, {1, 4, 3, 4},
                          {2, 9, 6, 2}, {1, 17, 9, 1}, {3, 37, 11, 4}, {2, 5, 1, 3}};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE("b=" + std::to_string(sh.b) + " t=" + std::to_string(sh.t) +
                 " c=" + std::to_string(sh.c) + " k=" + std::to_string(sh.k));
    const CudnnConv1dGeometry g = cudnn_conv1d_geometry(sh.b, sh.t, sh.c, sh.k);
    ASSERT_EQ(g.taps, 2 * sh.k - 1);
    ASSERT_EQ(g.out_w, sh.t);
    const CudnnLikeConv conv{g};
    ASSERT_EQ(conv.out_h(), 1);
    ASSERT_EQ(conv.out_w(), sh.t);  // the first t outputs are all there is: no slice
    const size_t n = size_t(sh.b * sh.t * sh.c);
    const std::vector<double> x = small_ints(n), w = small_ints(size_t(sh.c * sh.k)),
                              dy = small_ints(n);
    const std::vector<double> we = extend(w, sh.c, sh.k, g.taps);
    std::vector<double> y(n, 0.0), dx(n, 0.0), dwe(we.size(), 0.0);
    conv.for_each_product([&](int64_t yi, int64_t xi, int64_t wi) {
      y[yi] += we[wi] * x[xi];
      dx[xi] += we[wi] * dy[yi];
      dwe[wi] += dy[yi] * x[xi];
    });
    std::vector<double> y_cpu(n), dx_cpu(n), dw_cpu(size_t(sh.c * sh.k));
    cpu::causal_conv1d_forward<double>(x.data(), w.data(), sh.b, sh.t, sh.c, sh.k, y_cpu.data());
    cpu::causal_conv1d_backward<double>(x.data(), w.data(), dy.data(), sh.b, sh.t, sh.c, sh.k,
                                        dx_cpu.data(), dw_cpu.data());
    EXPECT_EQ(y, y_cpu);
    EXPECT_EQ(dx, dx_cpu);
    for (int64_t ch = 0; ch < sh.c; ++ch)
      for (int64_t j = 0; j < sh.k; ++j)
        EXPECT_EQ(dwe[size_t(ch * g.taps + j)], dw_cpu[size_t(ch * sh.k + j)])
            << "dw channel " << ch << " tap " << j;
  }
}

TEST(CudnnConv1d, GeometryRejectsEmptyAndOversizedProblems) {
  EXPECT_THROW(cudnn_conv1d_geometry(0, 4, 4, 4), std::invalid_argument);
  EXPECT_THROW(cudnn_conv1d_geometry(1, 4, 4, 0), std::invalid_argument);
  EXPECT_THROW(cudnn_conv1d_geometry(1 << 16, 1 << 12, 1 << 4, 4), std::invalid_argument);
  EXPECT_NO_THROW(cudnn_conv1d_geometry(8, 8192, 4096, 4));
  const CudnnConv1dGeometry g = cudnn_conv1d_geometry(8, 2048, 4096, 4);
  EXPECT_EQ(g.n, 8);
  EXPECT_EQ(g.h, 1);
  EXPECT_EQ(g.w, 2048);
  EXPECT_EQ(g.c, 4096);
  EXPECT_EQ(g.groups, 4096);
  EXPECT_EQ(g.filter_k, 4096);
  EXPECT_EQ(g.filter_c, 1);
  EXPECT_EQ(g.filter_h, 1);
  EXPECT_EQ(g.filter_w, 7);
  EXPECT_EQ(g.pad_h, 0);
  EXPECT_EQ(g.pad_w, 3);
}

TEST(CudnnConv1d, ScratchLayoutIsAlignedAndDisjoint) {
  for (int64_t k : {1, 2, 4})
    for (bool wx : {false, true})
      for (bool wd : {false, true})
        for (size_t cudnn : {size_t(0), size_t(1), size_t(1000)}) {
          const CudnnConv1dGeometry g = cudnn_conv1d_geometry(2, 10, 37, k);
          const CudnnConv1dScratch s = cudnn_conv1d_scratch(g, 2, wx, wd, cudnn);
          const size_t filter = size_t(37 * g.taps * 2);
          const bool ext = k > 1;
          EXPECT_EQ(s.w_ext % 256, 0u);
          EXPECT_EQ(s.dw_ext % 256, 0u);
          EXPECT_EQ(s.cudnn % 256, 0u);
          EXPECT_GE(s.dw_ext, s.w_ext + (wx && ext ? filter : 0));
          EXPECT_GE(s.cudnn, s.dw_ext + (wd && ext ? filter : 0));
          EXPECT_GE(s.total, s.cudnn + cudnn);
          EXPECT_EQ(s.cudnn_bytes, cudnn);
          if (!ext || (!wx && !wd)) {
            EXPECT_EQ(s.cudnn, 0u);
          }
          if (!ext && cudnn == 0) {
            EXPECT_EQ(s.total, 0u);
          }
        }
}

TEST(CudnnConv1d, ImplementationChoice) {
  EXPECT_EQ(parse_conv1d_impl(nullptr), kConv1dDefault);
  EXPECT_EQ(parse_conv1d_impl(""), kConv1dDefault);
  EXPECT_EQ(kConv1dDefault, Conv1dImpl::direct);  // until a GPU measurement says otherwise
  EXPECT_EQ(parse_conv1d_impl("direct"), Conv1dImpl::direct);
  EXPECT_EQ(parse_conv1d_impl("cudnn"), Conv1dImpl::cudnn);
  EXPECT_EQ(conv1d_impl(Conv1dImpl::cudnn, true), Conv1dImpl::cudnn);
  EXPECT_EQ(conv1d_impl(Conv1dImpl::cudnn, false), Conv1dImpl::direct);  // fp64, fp16: direct
  EXPECT_EQ(conv1d_impl(Conv1dImpl::direct, true), Conv1dImpl::direct);
  for (Conv1dImpl i : {Conv1dImpl::direct, Conv1dImpl::cudnn})
    EXPECT_EQ(parse_conv1d_impl(enum_name(i)), i);
  EXPECT_TRUE(kCudnnConv1dType<float>);
  EXPECT_TRUE(kCudnnConv1dType<bf16>);
  EXPECT_FALSE(kCudnnConv1dType<double>);
  EXPECT_FALSE(kCudnnConv1dType<fp16>);
  for (const char* bad : {"CUDNN", "cudnn ", "fast", "1"}) {
    try {
      parse_conv1d_impl(bad);
      ADD_FAILURE() << "no error for GDN_CONV1D=" << bad;
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("GDN_CONV1D"), std::string::npos) << m;
      EXPECT_NE(m.find("direct"), std::string::npos) << m;
      EXPECT_NE(m.find("cudnn"), std::string::npos) << m;
    }
  }
}

#if defined(GDN_WITH_CUDA)
// The descriptors conv_cudnn.cu builds, read back through cuDNN (host calls; no GPU needed; cuDNN
// is opened at run time, and a machine without it skips).
TEST(CudnnConv1d, CudnnReadsTheDescriptorsAsTheGeometry) {
  if (!cuda::cudnn_info().available) GTEST_SKIP() << cuda::cudnn_info().summary();
  for (int64_t b : {1, 3})
    for (int64_t t : {1, 2, 5, 64})
      for (int64_t c : {1, 13, 24})
        for (int64_t k : {1, 2, 3, 4}) {
          SCOPED_TRACE("b=" + std::to_string(b) + " t=" + std::to_string(t) +
                       " c=" + std::to_string(c) + " k=" + std::to_string(k));
          const CudnnConv1dDescriptors d = cudnn_conv1d_descriptors(b, t, c, k);
          // Output (n, c, h, w) = input: the causal outputs exactly.
          EXPECT_EQ(d.out[0], b);
          EXPECT_EQ(d.out[1], c);
          EXPECT_EQ(d.out[2], 1);
          EXPECT_EQ(d.out[3], t);
          // Strides (n, c, h, w) of [b, t, c] row-major.
          EXPECT_EQ(d.data_strides[0], t * c);
          EXPECT_EQ(d.data_strides[1], 1);
          EXPECT_EQ(d.data_strides[2], t * c);
          EXPECT_EQ(d.data_strides[3], c);
          // Filter (k, c, h, w) = (c, 1, 1, 2k-1), NHWC: w' [c, 2k-1] row-major.
          EXPECT_EQ(d.filter[0], c);
          EXPECT_EQ(d.filter[1], 1);
          EXPECT_EQ(d.filter[2], 1);
          EXPECT_EQ(d.filter[3], 2 * k - 1);
          EXPECT_TRUE(d.filter_nhwc);
          EXPECT_EQ(d.groups, c);
          EXPECT_EQ(d.pad[0], 0);
          EXPECT_EQ(d.pad[1], k - 1);
        }
}
#endif

}  // namespace
}  // namespace gdn::cuda
