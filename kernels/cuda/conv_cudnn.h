// Causal depthwise conv1d through cuDNN, next to the direct kernels of kernels/cuda/nn.h and with
// their contract: x, y [b, t, c] row-major, w [c, k], y[b,s,c] = sum_j w[c,j] x[b, s-k+1+j, c]
// (zero before time 0). Which of the two the op runs is decided in one place, conv1d_impl()
// below: the model's `conv1d_impl` (direct|cudnn, or GDN_CONV1D read once at start-up,
// layers/config.h), the direct kernel by default until a GPU measurement (build/conv_lab) says
// cuDNN is faster.
//
// How cuDNN sees the problem (CudnnConv1dGeometry; pure, tested on the CPU):
//   - x, y, dx, dy are NHWC tensors [n = b, h = 1, w = t, c]: exactly [b, t, c], no transpose;
//   - the filter is KRSC [c, 1, taps, 1] in c groups of one channel: w' [c, taps] row-major;
//   - cuDNN pads both ends by the same amount, so w is zero-extended on the right to
//     taps = 2k - 1 and time is padded by k - 1: output s reads x[s - (k-1) + j], taps j >= k
//     see only the right padding (weight 0), and the output width is exactly t: no slice, no
//     padded copy of x or y, only w' and dw' ([c, 2k-1], a few KiB) in the workspace;
//   - backward data with the same descriptors is dx; backward filter gives dw' [c, taps], whose
//     first k columns are dw.
// Deterministic: algorithms come from cuDNN's heuristics (_v7; Find times them and could choose
// differently from run to run) filtered to CUDNN_DETERMINISTIC, chosen once per shape. fp32
// computes with FMA math (no TF32, as the GEMMs); bf16 is stored in bf16 and accumulated in fp32.
// Types: float and bf16 (the op runs fp64 and fp16 on the direct kernel).
//
// A plain header (no cuDNN types): the geometry and the choice of implementation are used and
// tested without CUDA; the functions below the line are defined in conv_cudnn.cu.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/enum_table.h"
#include "kernels/numeric.h"

namespace gdn::cuda {

// ---- which implementation runs ---------------------------------------------------------------

enum class Conv1dImpl { direct, cudnn };
inline constexpr EnumEntry<Conv1dImpl> kConv1dImplNames[] = {{Conv1dImpl::direct, "direct"},
                                                             {Conv1dImpl::cudnn, "cudnn"}};
inline EnumTable<Conv1dImpl> enum_table(Conv1dImpl) {
  return kConv1dImplNames;
}

// The default until build/conv_lab has measured both on a GPU.
constexpr Conv1dImpl kConv1dDefault = Conv1dImpl::direct;

// The dtypes the cuDNN path is built for.
template <typename T>
inline constexpr bool kCudnnConv1dType = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

// GDN_CONV1D's value: unset or empty -> the default; otherwise "direct" or "cudnn", anything else
// throws std::invalid_argument naming the variable and the allowed values.
inline Conv1dImpl parse_conv1d_impl(const char* value) {
  if (!value || !*value) return kConv1dDefault;
  if (const auto v = enum_table(Conv1dImpl{}).parse(value)) return *v;
  throw std::invalid_argument("GDN_CONV1D='" + std::string(value) +
                              "' is not an implementation of causal_conv1d: use direct or cudnn "
                              "(or leave it unset for the default, direct)");
}

// The implementation the op runs on CUDA: the chosen one where cuDNN has the dtype, the direct
// kernel otherwise.
inline Conv1dImpl conv1d_impl(Conv1dImpl chosen, bool dtype_has_cudnn) {
  return dtype_has_cudnn ? chosen : Conv1dImpl::direct;
}

// ---- how cuDNN sees the causal conv ----------------------------------------------------------

struct CudnnConv1dGeometry {
  int n = 0, h = 0, w = 0, c = 0;                              // x, y, dx, dy: NHWC
  int filter_k = 0, filter_c = 0, filter_h = 0, filter_w = 0;  // w', dw': KRSC, filter_w = taps
  int groups = 0;                                              // depthwise: one channel per group
  int pad_h = 0, pad_w = 0;                                    // on both ends (cuDNN's only choice)
  int taps = 0;   // 2k - 1: w zero-extended on the right
  int out_w = 0;  // w + 2 pad_w - taps + 1 == t
};

// b, t, c >= 1, k >= 1, and every extent cuDNN indexes with int (b t c, c taps) below 2^31.
inline CudnnConv1dGeometry cudnn_conv1d_geometry(int64_t b, int64_t t, int64_t c, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (b < 1 || t < 1 || c < 1 || k < 1)
    throw std::invalid_argument(
        "causal_conv1d (cuDNN): b, t, c and k must be >= 1, got b=" + std::to_string(b) +
        " t=" + std::to_string(t) + " c=" + std::to_string(c) + " k=" + std::to_string(k));
  if (k > kMax / 2 || t > kMax / c || b > kMax / (t * c) || c > kMax / (2 * k - 1))
    throw std::invalid_argument("causal_conv1d (cuDNN): b t c = " + std::to_string(b) + " x " +
                                std::to_string(t) + " x " + std::to_string(c) +
                                " (or c (2k-1)) exceeds cuDNN's int extents");
  CudnnConv1dGeometry g;
  g.n = int(b);
  g.h = 1;
  g.w = int(t);
  g.c = int(c);
  // Causality: cuDNN pads both ends by k-1; k-1 zero taps on the right absorb the right padding.
  g.taps = int(2 * k - 1);
  g.filter_k = int(c);
  g.filter_c = 1;
  g.filter_h = 1;
  g.filter_w = g.taps;
  g.groups = int(c);
  g.pad_h = 0;
  g.pad_w = int(k - 1);
  g.out_w = int(t + 2 * (k - 1) - (2 * k - 1) + 1);  // cuDNN's output width: t
  return g;
}

// Byte offsets in the workspace of one cuDNN call: w' (forward, backward data), dw' (backward
// filter), then cuDNN's own workspace; each 256-byte aligned. w' and dw' are absent for k = 1
// (w itself is the filter then).
struct CudnnConv1dScratch {
  size_t w_ext = 0, dw_ext = 0, cudnn = 0, total = 0;  // offsets, and the total bytes
  size_t cudnn_bytes = 0;
};
inline CudnnConv1dScratch cudnn_conv1d_scratch(const CudnnConv1dGeometry& g, size_t elem_bytes,
                                               bool need_w_ext, bool need_dw_ext,
                                               size_t cudnn_bytes) {
  auto align = [](size_t x) { return (x + 255) / 256 * 256; };
  const bool extended = g.taps > 1;  // k > 1
  const size_t filter_bytes = align(size_t(g.filter_k) * size_t(g.taps) * elem_bytes);
  CudnnConv1dScratch s;
  size_t at = 0;
  s.w_ext = at;
  if (need_w_ext && extended) at += filter_bytes;
  s.dw_ext = at;
  if (need_dw_ext && extended) at += filter_bytes;
  s.cudnn = at;
  s.cudnn_bytes = cudnn_bytes;
  s.total = at + align(cudnn_bytes);
  return s;
}

// ---- the cuDNN calls (conv_cudnn.cu; T is float or bf16) -------------------------------------
// Device pointers, run on `stream` with a cuDNN handle kept per (host thread, device, stream).
// The workspace (`workspace_bytes` from the matching *_workspace call, 16-byte aligned) is the
// caller's, so it comes from the caller's allocator. The algorithm and descriptors are chosen
// once per (device, dtype, shape) and cached.

template <typename T>
size_t causal_conv1d_cudnn_forward_workspace(int64_t b, int64_t t, int64_t c, int64_t k,
                                             void* stream);
template <typename T>
void causal_conv1d_cudnn_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k,
                                 T* y, void* workspace, size_t workspace_bytes, void* stream);

// dx and dw may each be null (not wanted); the workspace depends on which are wanted.
template <typename T>
size_t causal_conv1d_cudnn_backward_workspace(int64_t b, int64_t t, int64_t c, int64_t k,
                                              bool want_dx, bool want_dw, void* stream);
template <typename T>
void causal_conv1d_cudnn_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t,
                                  int64_t c, int64_t k, T* dx, T* dw, void* workspace,
                                  size_t workspace_bytes, void* stream);

// The algorithm of each pass for this shape, e.g. "forward IMPLICIT_GEMM (FMA, 0 B); ...".
template <typename T>
std::string causal_conv1d_cudnn_algorithms(int64_t b, int64_t t, int64_t c, int64_t k,
                                           void* stream);

// What cuDNN itself reads from the descriptors this implementation builds (host calls, no GPU
// needed): the forward's output dims and the data tensor's strides, both NCHW-ordered
// (n, c, h, w), the filter dims (k, c, h, w) and layout, the group count and the padding (h, w).
// Tested on the CPU.
struct CudnnConv1dDescriptors {
  int out[4] = {}, data_strides[4] = {}, filter[4] = {}, groups = 0, pad[2] = {};
  bool filter_nhwc = false;
};
CudnnConv1dDescriptors cudnn_conv1d_descriptors(int64_t b, int64_t t, int64_t c, int64_t k);

}  // namespace gdn::cuda
