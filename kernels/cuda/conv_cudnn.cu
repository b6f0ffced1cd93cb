// Causal depthwise conv1d on cuDNN's convolution API (kernels/cuda/conv_cudnn.h has the
// geometry: NHWC [b, 1, t, c] data, w zero-extended to 2k-1 taps, pad k-1 on both ends). This
// file keeps one cuDNN handle per (host thread, device, stream), one cached plan per (device,
// dtype, shape) holding the descriptors and the algorithm of each pass, and makes the calls.
// Every cuDNN status is checked; a failure names the call, cuDNN's status string and its last
// error message. cuDNN is opened at run time (kernels/cuda/cudnn_api.h): without it every entry
// point throws, naming what was found.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/cudnn_api.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/launch_math.h"

namespace gdn::cuda {

namespace {

const CudnnApi& dnn() {
  return cudnn("causal_conv1d on cuDNN (GDN_CONV1D=cudnn)");
}

std::string cudnn_failure(const char* expr, cudnnStatus_t st, const char* file, int line) {
  char detail[1024] = {};
  dnn().cudnnGetLastErrorString(detail,
                                sizeof(detail));  // this thread's last message, may be empty
  std::string m = std::string("cuDNN error in ") + expr + ": " + dnn().cudnnGetErrorString(st);
  if (detail[0]) m += std::string(" [") + detail + "]";
  return m + " (" + file + ":" + std::to_string(line) + ")";
}

#define GDN_KCUDNN_CHECK(expr)                                                      \
  do {                                                                              \
    const cudnnStatus_t gdn_kst_ = (expr);                                          \
    if (gdn_kst_ != CUDNN_STATUS_SUCCESS)                                           \
      throw std::runtime_error(cudnn_failure(#expr, gdn_kst_, __FILE__, __LINE__)); \
  } while (0)

template <typename T>
struct CudnnType;
template <>
struct CudnnType<float> {
  static constexpr cudnnDataType_t value = CUDNN_DATA_FLOAT;
};
template <>
struct CudnnType<bf16> {
  static constexpr cudnnDataType_t value = CUDNN_DATA_BFLOAT16;
};

// The math type the heuristics are asked with: fp32 without TF32 (FMA only); bf16 data with fp32
// compute may use tensor cores (bf16 products are exact in fp32).
cudnnMathType_t query_math(cudnnDataType_t dt) {
  return dt == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}
// A candidate's math type is acceptable: never TF32 for fp32 data, never a down-conversion.
bool math_allowed(cudnnDataType_t dt, cudnnMathType_t m) {
  if (dt == CUDNN_DATA_FLOAT) return m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH;
  return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}
// The math type a chosen candidate runs with: fp32 stays FMA whatever the candidate reports.
cudnnMathType_t run_math(cudnnDataType_t dt, cudnnMathType_t m) {
  return dt == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : m;
}
const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default math";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor-op math";
    case CUDNN_FMA_MATH:
      return "FMA math";
    default:
      return "conversion math";
  }
}

cudnnHandle_t handle_for(cudaStream_t stream) {
  return handle_per_stream<cudnnHandle_t>(stream, [](cudaStream_t s) {
    cudnnHandle_t h = nullptr;
    GDN_KCUDNN_CHECK(dnn().cudnnCreate(&h));
    GDN_KCUDNN_CHECK(dnn().cudnnSetStream(h, s));
    return h;
  });
}

enum Pass { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
const char* const kPassName[] = {"forward", "backward data", "backward filter"};
const char* const kFwdAlgo[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
const char* const kBwdDataAlgo[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                    "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
const char* const kBwdFilterAlgo[] = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};

std::string algo_name(Pass pass, int algo) {
  const char* const* names = pass == kForward        ? kFwdAlgo
                             : pass == kBackwardData ? kBwdDataAlgo
                                                     : kBwdFilterAlgo;
  const int count = pass == kForward ? 8 : pass == kBackwardData ? 6 : 7;
  return algo >= 0 && algo < count ? names[algo] : "algo " + std::to_string(algo);
}

struct Candidate {
  int algo = -1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t bytes = 0;  // cuDNN's workspace for it
};

// One pass of one shape: its convolution descriptor (the math type is per pass) and algorithm.
struct PassPlan {
  cudnnConvolutionDescriptor_t conv = nullptr;
  Candidate chosen;
  bool ready = false;
};

struct Plan {
  CudnnConv1dGeometry g;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  cudnnTensorDescriptor_t data = nullptr;    // x, y, dx, dy
  cudnnFilterDescriptor_t filter = nullptr;  // w', dw'
  PassPlan pass[3];
};

// The descriptors of conv_cudnn.h's geometry; shared by the plans and cudnn_conv1d_descriptors.
void set_data(cudnnTensorDescriptor_t d, const CudnnConv1dGeometry& g, cudnnDataType_t dt) {
  GDN_KCUDNN_CHECK(dnn().cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, dt, g.n, g.c, g.h, g.w));
}
void set_filter(cudnnFilterDescriptor_t f, const CudnnConv1dGeometry& g, cudnnDataType_t dt) {
  GDN_KCUDNN_CHECK(dnn().cudnnSetFilter4dDescriptor(f, dt, CUDNN_TENSOR_NHWC, g.filter_k,
                                                    g.filter_c, g.filter_h, g.filter_w));
}
void set_conv(cudnnConvolutionDescriptor_t cd, const CudnnConv1dGeometry& g) {
  GDN_KCUDNN_CHECK(dnn().cudnnSetConvolution2dDescriptor(
      cd, g.pad_h, g.pad_w, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  GDN_KCUDNN_CHECK(dnn().cudnnSetConvolutionGroupCount(cd, g.groups));
}

std::string shape_str(const CudnnConv1dGeometry& g, int k, cudnnDataType_t dt) {
  return "b=" + std::to_string(g.n) + " t=" + std::to_string(g.w) + " c=" + std::to_string(g.c) +
         " k=" + std::to_string(k) + (dt == CUDNN_DATA_FLOAT ? " float32" : " bfloat16");
}

// Plans live as long as the thread (their descriptors are host objects); a process that runs
// very many shapes drops them all and starts over past kMaxPlans.
constexpr size_t kMaxPlans = 256;
using PlanKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t>;

void destroy(Plan& p) {
  for (PassPlan& pp : p.pass)
    if (pp.conv) dnn().cudnnDestroyConvolutionDescriptor(pp.conv);
  if (p.filter) dnn().cudnnDestroyFilterDescriptor(p.filter);
  if (p.data) dnn().cudnnDestroyTensorDescriptor(p.data);
}

Plan& plan_for(cudnnDataType_t dt, int64_t b, int64_t t, int64_t c, int64_t k) {
  int device = 0;
  GDN_KCUDA_CHECK(cudaGetDevice(&device));
  thread_local std::map<PlanKey, Plan> plans;
  const PlanKey key{device, int(dt), b, t, c, k};
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  if (plans.size() >= kMaxPlans) {
    for (auto& kv : plans) destroy(kv.second);
    plans.clear();
  }
  Plan p;
  p.g = cudnn_conv1d_geometry(b, t, c, k);
  p.dtype = dt;
  try {
    GDN_KCUDNN_CHECK(dnn().cudnnCreateTensorDescriptor(&p.data));
    GDN_KCUDNN_CHECK(dnn().cudnnCreateFilterDescriptor(&p.filter));
    set_data(p.data, p.g, dt);
    set_filter(p.filter, p.g, dt);
    for (PassPlan& pp : p.pass) {
      GDN_KCUDNN_CHECK(dnn().cudnnCreateConvolutionDescriptor(&pp.conv));
      set_conv(pp.conv, p.g);
    }
    // The causal geometry rests on cuDNN's output width being exactly t.
    int on = 0, oc = 0, oh = 0, ow = 0;
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolution2dForwardOutputDim(p.pass[kForward].conv, p.data,
                                                                 p.filter, &on, &oc, &oh, &ow));
    if (on != p.g.n || oc != p.g.c || oh != 1 || ow != p.g.w)
      throw std::logic_error("causal_conv1d (cuDNN): output dims " + std::to_string(on) + "x" +
                             std::to_string(oc) + "x" + std::to_string(oh) + "x" +
                             std::to_string(ow) + " differ from the input's for " +
                             shape_str(p.g, int(k), dt));
  } catch (...) {
    destroy(p);
    throw;
  }
  return plans.emplace(key, p).first->second;
}

// The deterministic, supported candidates of the heuristics' list, in its order.
template <typename Perf>
std::vector<Candidate> candidates_of(const std::vector<Perf>& perf, int returned,
                                     cudnnDataType_t dt) {
  std::vector<Candidate> out;
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        math_allowed(dt, perf[i].mathType))
      out.push_back(Candidate{int(perf[i].algo), perf[i].mathType, 0});
  return out;
}

// cuDNN's workspace for `algo` in `pass`, or the status that says it cannot run.
cudnnStatus_t workspace_of(Pass pass, cudnnHandle_t h, const Plan& p, int algo, size_t* bytes) {
  const cudnnConvolutionDescriptor_t cd = p.pass[pass].conv;
  switch (pass) {
    case kForward:
      return dnn().cudnnGetConvolutionForwardWorkspaceSize(h, p.data, p.filter, cd, p.data,
                                                           cudnnConvolutionFwdAlgo_t(algo), bytes);
    case kBackwardData:
      return dnn().cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, p.filter, p.data, cd, p.data, cudnnConvolutionBwdDataAlgo_t(algo), bytes);
    default:
      return dnn().cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, p.data, p.data, cd, p.filter, cudnnConvolutionBwdFilterAlgo_t(algo), bytes);
  }
}

// cuDNN's workspace may not exceed the data tensor plus 64 MiB (an algorithm that wants more is
// skipped for the next in the heuristics' order).
size_t workspace_cap(const CudnnConv1dGeometry& g, size_t elem_bytes) {
  return (size_t(64) << 20) + size_t(g.n) * size_t(g.w) * size_t(g.c) * elem_bytes;
}

// Chooses the algorithm of `pass` once: the heuristics' first deterministic candidate whose
// workspace query succeeds within the cap. Leaves the pass's descriptor in its math type.
PassPlan& prepare(Plan& p, Pass pass, cudnnHandle_t h, size_t elem_bytes) {
  PassPlan& pp = p.pass[pass];
  if (pp.ready) return pp;
  GDN_KCUDNN_CHECK(dnn().cudnnSetConvolutionMathType(pp.conv, query_math(p.dtype)));
  std::vector<Candidate> cands;
  int max_count = 0, returned = 0;
  if (pass == kForward) {
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionForwardAlgorithm_v7(
        h, p.data, p.filter, pp.conv, p.data, max_count, &returned, perf.data()));
    cands = candidates_of(perf, returned, p.dtype);
  } else if (pass == kBackwardData) {
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, p.filter, p.data, pp.conv, p.data, max_count, &returned, perf.data()));
    cands = candidates_of(perf, returned, p.dtype);
  } else {
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(size_t(std::max(max_count, 1)));
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, p.data, p.data, pp.conv, p.filter, max_count, &returned, perf.data()));
    cands = candidates_of(perf, returned, p.dtype);
  }
  const size_t cap = workspace_cap(p.g, elem_bytes);
  std::string skipped;
  for (Candidate cand : cands) {
    GDN_KCUDNN_CHECK(dnn().cudnnSetConvolutionMathType(pp.conv, run_math(p.dtype, cand.math)));
    const cudnnStatus_t st = workspace_of(pass, h, p, cand.algo, &cand.bytes);
    if (st == CUDNN_STATUS_SUCCESS && cand.bytes <= cap) {
      pp.chosen = cand;
      pp.ready = true;
      return pp;
    }
    skipped += " " + algo_name(pass, cand.algo) +
               (st != CUDNN_STATUS_SUCCESS ? std::string(" (") + dnn().cudnnGetErrorString(st) + ")"
                                           : " (" + std::to_string(cand.bytes) + " B workspace)");
  }
  throw std::runtime_error(
      std::string("causal_conv1d (cuDNN) ") + kPassName[pass] +
      ": no deterministic algorithm for " + shape_str(p.g, p.g.pad_w + 1, p.dtype) + " (" +
      std::to_string(returned) + " from the heuristics, " + std::to_string(cands.size()) +
      " deterministic" + (skipped.empty() ? "" : "; skipped:" + skipped) +
      "); GDN_CONV1D=direct runs the direct kernel");
}

void check_workspace(const void* workspace, size_t have, size_t need, const char* what) {
  if (have < need)
    throw std::invalid_argument(std::string("causal_conv1d (cuDNN) ") + what + ": workspace of " +
                                std::to_string(have) + " B, needs " + std::to_string(need));
  if (need > 0 && (!workspace || reinterpret_cast<uintptr_t>(workspace) % 16 != 0))
    throw std::invalid_argument(std::string("causal_conv1d (cuDNN) ") + what +
                                ": workspace must be a 16-byte aligned device pointer");
}

constexpr int kThreads = 256;

// w' [c, taps] = w [c, k] followed by taps - k zeros per channel.
template <typename T>
__global__ void extend_filter_kernel(const T* w, int64_t c, int64_t k, int64_t taps, T* w_ext) {
  GDN_GRID_LOOP(i, c * taps) {
    const int64_t ch = i / taps, j = i % taps;
    w_ext[i] = j < k ? w[ch * k + j] : from_acc<T>(acc_t<T>(0));
  }
}

// dw [c, k] = the first k columns of dw' [c, taps].
template <typename T>
__global__ void first_taps_kernel(const T* dw_ext, int64_t c, int64_t k, int64_t taps, T* dw) {
  GDN_GRID_LOOP(i, c * k)
  dw[i] = dw_ext[(i / k) * taps + i % k];
}

template <typename T>
const T* extended_filter(const T* w, const Plan& p, int64_t k, char* ws, size_t offset,
                         cudaStream_t s) {
  if (p.g.taps == k) return w;  // k = 1: nothing to extend
  T* w_ext = reinterpret_cast<T*>(ws + offset);
  const int64_t c = p.g.c;
  extend_filter_kernel<T>
      <<<grid_1d(c * p.g.taps, kThreads), kThreads, 0, s>>>(w, c, k, p.g.taps, w_ext);
  GDN_KCUDA_LAUNCHED("causal_conv1d (cuDNN) filter extension");
  return w_ext;
}

}  // namespace

template <typename T>
size_t causal_conv1d_cudnn_forward_workspace(int64_t b, int64_t t, int64_t c, int64_t k,
                                             void* stream) {
  if (b * t * c == 0) return 0;
  Plan& p = plan_for(CudnnType<T>::value, b, t, c, k);
  const PassPlan& f = prepare(p, kForward, handle_for(as_stream(stream)), sizeof(T));
  return cudnn_conv1d_scratch(p.g, sizeof(T), true, false, f.chosen.bytes).total;
}

template <typename T>
void causal_conv1d_cudnn_forward(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k,
                                 T* y, void* workspace, size_t workspace_bytes, void* stream) {
  if (k < 1) throw std::invalid_argument("causal_conv1d (cuDNN): k must be >= 1");
  if (b * t * c == 0) return;
  const cudaStream_t s = as_stream(stream);
  const cudnnHandle_t h = handle_for(s);
  Plan& p = plan_for(CudnnType<T>::value, b, t, c, k);
  const PassPlan& f = prepare(p, kForward, h, sizeof(T));
  const CudnnConv1dScratch sc = cudnn_conv1d_scratch(p.g, sizeof(T), true, false, f.chosen.bytes);
  check_workspace(workspace, workspace_bytes, sc.total, "forward");
  char* ws = static_cast<char*>(workspace);
  const T* wf = extended_filter(w, p, k, ws, sc.w_ext, s);
  const float one = 1.f, zero = 0.f;  // scaling factors are float for float and bf16 data
  GDN_KCUDNN_CHECK(dnn().cudnnConvolutionForward(
      h, &one, p.data, x, p.filter, wf, f.conv, cudnnConvolutionFwdAlgo_t(f.chosen.algo),
      f.chosen.bytes ? ws + sc.cudnn : nullptr, f.chosen.bytes, &zero, p.data, y));
}

template <typename T>
size_t causal_conv1d_cudnn_backward_workspace(int64_t b, int64_t t, int64_t c, int64_t k,
                                              bool want_dx, bool want_dw, void* stream) {
  if (b * t * c == 0) return 0;
  const cudnnHandle_t h = handle_for(as_stream(stream));
  Plan& p = plan_for(CudnnType<T>::value, b, t, c, k);
  size_t bytes = 0;
  if (want_dx) bytes = std::max(bytes, prepare(p, kBackwardData, h, sizeof(T)).chosen.bytes);
  if (want_dw) bytes = std::max(bytes, prepare(p, kBackwardFilter, h, sizeof(T)).chosen.bytes);
  return cudnn_conv1d_scratch(p.g, sizeof(T), want_dx, want_dw, bytes).total;
}

template <typename T>
void causal_conv1d_cudnn_backward(const T* x, const T* w, const T* dy, int64_t b, int64_t t,
                                  int64_t c, int64_t k, T* dx, T* dw, void* workspace,
                                  size_t workspace_bytes, void* stream) {
  if (k < 1) throw std::invalid_argument("causal_conv1d (cuDNN): k must be >= 1");
  const cudaStream_t s = as_stream(stream);
  if (b * t * c == 0) {  // no products: dw is zero, dx is empty
    if (dw && c > 0) GDN_KCUDA_CHECK(cudaMemsetAsync(dw, 0, size_t(c * k) * sizeof(T), s));
    return;
  }
  if (!dx && !dw) return;
  const cudnnHandle_t h = handle_for(s);
  Plan& p = plan_for(CudnnType<T>::value, b, t, c, k);
  size_t bytes = 0;
  if (dx) bytes = std::max(bytes, prepare(p, kBackwardData, h, sizeof(T)).chosen.bytes);
  if (dw) bytes = std::max(bytes, prepare(p, kBackwardFilter, h, sizeof(T)).chosen.bytes);
  const CudnnConv1dScratch sc =
      cudnn_conv1d_scratch(p.g, sizeof(T), dx != nullptr, dw != nullptr, bytes);
  check_workspace(workspace, workspace_bytes, sc.total, "backward");
  char* ws = static_cast<char*>(workspace);
  const float one = 1.f, zero = 0.f;
  if (dx) {
    const PassPlan& d = p.pass[kBackwardData];
    const T* wf = extended_filter(w, p, k, ws, sc.w_ext, s);
    GDN_KCUDNN_CHECK(dnn().cudnnConvolutionBackwardData(
        h, &one, p.filter, wf, p.data, dy, d.conv, cudnnConvolutionBwdDataAlgo_t(d.chosen.algo),
        d.chosen.bytes ? ws + sc.cudnn : nullptr, d.chosen.bytes, &zero, p.data, dx));
  }
  if (dw) {
    const PassPlan& f = p.pass[kBackwardFilter];
    const bool extended = p.g.taps != k;
    T* dwf = extended ? reinterpret_cast<T*>(ws + sc.dw_ext) : dw;
    GDN_KCUDNN_CHECK(dnn().cudnnConvolutionBackwardFilter(
        h, &one, p.data, x, p.data, dy, f.conv, cudnnConvolutionBwdFilterAlgo_t(f.chosen.algo),
        f.chosen.bytes ? ws + sc.cudnn : nullptr, f.chosen.bytes, &zero, p.filter, dwf));
    if (extended) {
      first_taps_kernel<T><<<grid_1d(c * k, kThreads), kThreads, 0, s>>>(dwf, c, k, p.g.taps, dw);
      GDN_KCUDA_LAUNCHED("causal_conv1d (cuDNN) filter gradient");
    }
  }
}

template <typename T>
std::string causal_conv1d_cudnn_algorithms(int64_t b, int64_t t, int64_t c, int64_t k,
                                           void* stream) {
  const cudnnHandle_t h = handle_for(as_stream(stream));
  Plan& p = plan_for(CudnnType<T>::value, b, t, c, k);
  std::string out;
  for (Pass pass : {kForward, kBackwardData, kBackwardFilter}) {
    const Candidate& cand = prepare(p, pass, h, sizeof(T)).chosen;
    out += std::string(out.empty() ? "" : "; ") + kPassName[pass] + " " +
           algo_name(pass, cand.algo) + " (" + math_name(run_math(p.dtype, cand.math)) + ", " +
           std::to_string(cand.bytes) + " B)";
  }
  return out;
}

CudnnConv1dDescriptors cudnn_conv1d_descriptors(int64_t b, int64_t t, int64_t c, int64_t k) {
  const CudnnConv1dGeometry g = cudnn_conv1d_geometry(b, t, c, k);
  cudnnTensorDescriptor_t data = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  CudnnConv1dDescriptors r;
  try {
    GDN_KCUDNN_CHECK(dnn().cudnnCreateTensorDescriptor(&data));
    GDN_KCUDNN_CHECK(dnn().cudnnCreateFilterDescriptor(&filter));
    GDN_KCUDNN_CHECK(dnn().cudnnCreateConvolutionDescriptor(&conv));
    set_data(data, g, CUDNN_DATA_BFLOAT16);
    set_filter(filter, g, CUDNN_DATA_BFLOAT16);
    set_conv(conv, g);
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolution2dForwardOutputDim(conv, data, filter, &r.out[0],
                                                                 &r.out[1], &r.out[2], &r.out[3]));
    cudnnDataType_t dt;
    int nb = 0, dims[4];
    GDN_KCUDNN_CHECK(dnn().cudnnGetTensorNdDescriptor(data, 4, &dt, &nb, dims, r.data_strides));
    cudnnTensorFormat_t format;
    GDN_KCUDNN_CHECK(dnn().cudnnGetFilterNdDescriptor(filter, 4, &dt, &format, &nb, r.filter));
    r.filter_nhwc = format == CUDNN_TENSOR_NHWC;
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolutionGroupCount(conv, &r.groups));
    int stride[2], dilation[2];
    cudnnConvolutionMode_t mode;
    GDN_KCUDNN_CHECK(dnn().cudnnGetConvolution2dDescriptor(conv, &r.pad[0], &r.pad[1], &stride[0],
                                                           &stride[1], &dilation[0], &dilation[1],
                                                           &mode, &dt));
  } catch (...) {
    if (conv) dnn().cudnnDestroyConvolutionDescriptor(conv);
    if (filter) dnn().cudnnDestroyFilterDescriptor(filter);
    if (data) dnn().cudnnDestroyTensorDescriptor(data);
    throw;
  }
  dnn().cudnnDestroyConvolutionDescriptor(conv);
  dnn().cudnnDestroyFilterDescriptor(filter);
  dnn().cudnnDestroyTensorDescriptor(data);
  return r;
}

#define INST(T)                                                                                  \
  template size_t causal_conv1d_cudnn_forward_workspace<T>(int64_t, int64_t, int64_t, int64_t,   \
                                                           void*);                               \
  template void causal_conv1d_cudnn_forward<T>(const T*, const T*, int64_t, int64_t, int64_t,    \
                                               int64_t, T*, void*, size_t, void*);               \
  template size_t causal_conv1d_cudnn_backward_workspace<T>(int64_t, int64_t, int64_t, int64_t,  \
                                                            bool, bool, void*);                  \
  template void causal_conv1d_cudnn_backward<T>(const T*, const T*, const T*, int64_t, int64_t,  \
                                                int64_t, int64_t, T*, T*, void*, size_t, void*); \
  template std::string causal_conv1d_cudnn_algorithms<T>(int64_t, int64_t, int64_t, int64_t, void*);
INST(float)
INST(bf16)

}  // namespace gdn::cuda
