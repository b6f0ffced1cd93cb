// conv_lab: the two CUDA implementations of the causal depthwise conv1d side by side, the direct
// kernels (kernels/cuda/nn.cu) and cuDNN (kernels/cuda/conv_cudnn.cu), on the kernel API with
// buffers allocated once. Every (shape, dtype, implementation) is first checked: y, dx and dw
// against the CPU kernel in fp64 on the same inputs, and a second run must give the same bits.
// Then each pass (fwd: y; bwd: dx and dw) is timed with CUDA events after a warm-up, the L2 cache
// scrubbed before every run; median and quartiles of --repeats runs. One JSON line per (shape,
// dtype, implementation, pass) on stdout (and appended to --out), e.g.
//   {"lab":"conv1d","device":"NVIDIA H200","dtype":"bfloat16","b":8,"t":2048,"c":4096,"k":4,
//    "impl":"cudnn","pass":"fwd","median_ms":0.1,"q1_ms":0.1,"q3_ms":0.1,"gb_per_s":2900,
//    "max_rel_err":0.002,"worst":"y","bitwise_rerun":true,"ok":true,"algo":"forward ..."}
// gb_per_s counts the bytes a pass must move at least (fwd: read x, write y; bwd: read x and dy,
// write dx). The inputs are rounded to bf16 for both dtypes (bf16 values are exact in fp32), so
// one fp64 reference serves both. Exit status 1 when a check fails or an implementation throws.
//
//   build/conv_lab                          # b x t in {8x2048, 1x8192}, c in {1024, 2048, 4096},
//                                           # k = 4, float32 and bfloat16, direct and cudnn
//   build/conv_lab --bt 4x4096 --c 2048 --k 3 --dtypes bfloat16 --repeats 50 --out conv.jsonl
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/nn.h"
#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/lab/lab_util.h"
#include "kernels/cuda/nn.h"
#include "kernels/numeric.h"

namespace gdn::cuda {
namespace {

using namespace lab_util;  // kernels/cuda/lab/lab_util.h

struct Args {
  std::vector<std::string> bt{"8x2048", "1x8192"};
  std::vector<int64_t> c{1024, 2048, 4096}, k{4};
  std::vector<std::string> dtypes{"float32", "bfloat16"}, impls{"direct", "cudnn"};
  int repeats = 20, warmup = 3;
  std::string check = "cpu", out;
  uint64_t seed = 1;
};

struct Shape {
  int64_t b = 0, t = 0, c = 0, k = 0;
  int64_t n() const { return b * t * c; }
};

// Uniform in [-1, 1) from a counter (splitmix64): fast enough for 10^8 values, and the same
// numbers on every machine.
double uniform_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-52 - 1.0;
}
std::vector<double> bf16_values(int64_t n, uint64_t seed, double scale) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(bf16(float(scale * uniform_at(seed, i))));
  return v;
}

struct Host {
  std::vector<double> x, w, dy;   // inputs (bf16 values)
  std::vector<double> y, dx, dw;  // the fp64 reference (empty with --check none)
};

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += (ch == '\n' || ch == '\t') ? ' ' : ch;
  }
  return o + "\"";
}

// One implementation on device buffers: forward and backward (dx and dw) with its workspace.
template <typename T>
struct Impl {
  std::string name;
  std::function<void()> forward, backward;
};

template <typename T>
struct Buffers {
  const T *x = nullptr, *w = nullptr, *dy = nullptr;
  T *y = nullptr, *dx = nullptr, *dw = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

template <typename T>
Impl<T> make_impl(const std::string& name, const Shape& s, Buffers<T>& buf, cudaStream_t stream) {
  Impl<T> im;
  im.name = name;
  if (name == "direct") {
    im.forward = [&buf, s, stream] {
      causal_conv1d_forward<T>(buf.x, buf.w, s.b, s.t, s.c, s.k, buf.y, stream);
    };
    im.backward = [&buf, s, stream] {
      causal_conv1d_backward<T>(buf.x, buf.w, buf.dy, s.b, s.t, s.c, s.k, buf.dx, buf.dw,
                                static_cast<acc_t<T>*>(buf.workspace), stream);
    };
  } else if (name == "cudnn") {
    im.forward = [&buf, s, stream] {
      causal_conv1d_cudnn_forward<T>(buf.x, buf.w, s.b, s.t, s.c, s.k, buf.y, buf.workspace,
                                     buf.workspace_bytes, stream);
    };
    im.backward = [&buf, s, stream] {
      causal_conv1d_cudnn_backward<T>(buf.x, buf.w, buf.dy, s.b, s.t, s.c, s.k, buf.dx, buf.dw,
                                      buf.workspace, buf.workspace_bytes, stream);
    };
  } else {
    throw std::invalid_argument("unknown implementation " + name + " (direct, cudnn)");
  }
  return im;
}

// All implementations on one shape and dtype; returns false when a check failed.
template <typename T>
bool run_shape(const Args& a, const Shape& s, const Host& h, const char* dtype, cudaStream_t stream,
               const L2Scrub& scrub, const std::string& device, FILE* out) {
  Buffers<T> buf;
  T* x = upload<T>(h.x);
  T* w = upload<T>(h.w);
  T* dy = upload<T>(h.dy);
  buf.x = x;
  buf.w = w;
  buf.dy = dy;
  buf.y = device_alloc<T>(s.n());
  buf.dx = device_alloc<T>(s.n());
  buf.dw = device_alloc<T>(s.c * s.k);
  // One workspace, the largest any implementation asks for (bytes).
  size_t ws = size_t(causal_conv1d_backward_workspace(s.b, s.t, s.c, s.k)) * sizeof(acc_t<T>);
  std::string cudnn_error;
  try {
    ws = std::max(
        {ws, causal_conv1d_cudnn_forward_workspace<T>(s.b, s.t, s.c, s.k, stream),
         causal_conv1d_cudnn_backward_workspace<T>(s.b, s.t, s.c, s.k, true, true, stream)});
  } catch (const std::exception& e) {
    cudnn_error = e.what();
  }
  LAB_CUDA(cudaMalloc(&buf.workspace, std::max<size_t>(ws, 256)));
  buf.workspace_bytes = std::max<size_t>(ws, 256);
  bool all_ok = true;
  for (const std::string& name : a.impls) {
    const Impl<T> im = make_impl<T>(name, s, buf, stream);
    std::string error = name == "cudnn" ? cudnn_error : "", algo, worst = "-";
    double max_err = 0;
    bool rerun_equal = false;
    Stats fwd, bwd;
    try {
      if (!error.empty()) throw std::runtime_error(error);
      if (name == "cudnn") algo = causal_conv1d_cudnn_algorithms<T>(s.b, s.t, s.c, s.k, stream);
      im.forward();
      im.backward();
      LAB_CUDA(cudaStreamSynchronize(stream));
      const std::vector<double> y = download(buf.y, s.n()), dx = download(buf.dx, s.n()),
                                dw = download(buf.dw, s.c * s.k);
      im.forward();
      im.backward();
      LAB_CUDA(cudaStreamSynchronize(stream));
      rerun_equal = download(buf.y, s.n()) == y && download(buf.dx, s.n()) == dx &&
                    download(buf.dw, s.c * s.k) == dw;
      if (!h.y.empty()) {
        const std::pair<const char*, double> errs[] = {
            {"y", rel_err(y, h.y)}, {"dx", rel_err(dx, h.dx)}, {"dw", rel_err(dw, h.dw)}};
        for (const auto& [field, e] : errs)
          if (!(e <= max_err)) {  // NaN counts as worst
            max_err = e;
            worst = field;
          }
      }
      fwd = time_runs(im.forward, a.warmup, a.repeats, stream, scrub);
      bwd = time_runs(im.backward, a.warmup, a.repeats, stream, scrub);
    } catch (const std::exception& e) {
      error = e.what();
      cudaGetLastError();
    }
    // fp32 sums stay within 1e-4 of the largest value; bf16 outputs round once (2^-9).
    const double tol = sizeof(T) == 4 ? 1e-4 : 1e-2;
    const bool ok = error.empty() && rerun_equal && max_err <= tol;
    all_ok = all_ok && ok;
    const double elem = double(sizeof(T)), n = double(s.n());
    for (int pass = 0; pass < 2; ++pass) {
      const Stats& st = pass == 0 ? fwd : bwd;
      const double bytes = (pass == 0 ? 2 : 3) * n * elem;
      std::string line = "{\"lab\":\"conv1d\",\"device\":" + json_str(device) + ",\"dtype\":\"" +
                         dtype + "\",\"b\":" + std::to_string(s.b) +
                         ",\"t\":" + std::to_string(s.t) + ",\"c\":" + std::to_string(s.c) +
                         ",\"k\":" + std::to_string(s.k) + ",\"impl\":\"" + name +
                         "\",\"pass\":\"" + (pass == 0 ? "fwd" : "bwd") + "\"";
      char num[256];
      if (error.empty()) {
        std::snprintf(num, sizeof(num),
                      ",\"median_ms\":%.5f,\"q1_ms\":%.5f,\"q3_ms\":%.5f,\"gb_per_s\":%.1f,"
                      "\"max_rel_err\":%.3g",
                      st.median, st.q1, st.q3, st.median > 0 ? bytes / (st.median * 1e6) : 0.0,
                      max_err);
        line += num;
        line +=
            ",\"worst\":\"" + worst + "\",\"bitwise_rerun\":" + (rerun_equal ? "true" : "false");
      }
      line += std::string(",\"ok\":") + (ok ? "true" : "false");
      if (!algo.empty()) line += ",\"algo\":" + json_str(algo);
      if (!error.empty()) line += ",\"error\":" + json_str(error);
      line += "}";
      std::printf("%s\n", line.c_str());
      if (out) std::fprintf(out, "%s\n", line.c_str());
    }
    std::fflush(stdout);
  }
  for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(dy),
                  static_cast<void*>(buf.y), static_cast<void*>(buf.dx), static_cast<void*>(buf.dw),
                  buf.workspace})
    LAB_CUDA(cudaFree(p));
  return all_ok;
}

Shape parse_bt(const std::string& spec) {
  const size_t at = spec.find('x');
  if (at == std::string::npos) throw std::invalid_argument("--bt " + spec + ": expected BxT");
  Shape s;
  s.b = std::stoll(spec.substr(0, at));
  s.t = std::stoll(spec.substr(at + 1));
  if (s.b < 1 || s.t < 1) throw std::invalid_argument("--bt " + spec + ": B and T must be >= 1");
  return s;
}

int run_lab(const Args& a) {
  for (const std::string& d : a.dtypes)
    if (d != "float32" && d != "bfloat16")
      throw std::invalid_argument("--dtypes: float32 or bfloat16, got " + d);
  for (const std::string& im : a.impls)
    if (im != "direct" && im != "cudnn")
      throw std::invalid_argument("--impls: direct or cudnn, got " + im);
  cudaStream_t stream;
  LAB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int dev = 0;
  LAB_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  LAB_CUDA(cudaGetDeviceProperties(&prop, dev));
  const L2Scrub scrub = L2Scrub::make();
  FILE* out = a.out.empty() ? nullptr : std::fopen(a.out.c_str(), "a");
  if (!a.out.empty() && !out) throw std::runtime_error("cannot open " + a.out);
  bool ok = true;
  for (const std::string& bt : a.bt)
    for (int64_t c : a.c)
      for (int64_t k : a.k) {
        Shape s = parse_bt(bt);
        s.c = c;
        s.k = k;
        if (c < 1 || k < 1) throw std::invalid_argument("--c and --k must be >= 1");
        Host h;
        h.x = bf16_values(s.n(), a.seed * 3 + 0, 1.0);
        h.w = bf16_values(s.c * s.k, a.seed * 3 + 1, 0.5);
        h.dy = bf16_values(s.n(), a.seed * 3 + 2, 1.0);
        if (a.check == "cpu") {
          h.y.resize(h.x.size());
          h.dx.resize(h.x.size());
          h.dw.resize(h.w.size());
          cpu::causal_conv1d_forward<double>(h.x.data(), h.w.data(), s.b, s.t, s.c, s.k,
                                             h.y.data());
          cpu::causal_conv1d_backward<double>(h.x.data(), h.w.data(), h.dy.data(), s.b, s.t, s.c,
                                              s.k, h.dx.data(), h.dw.data());
        }
        for (const std::string& d : a.dtypes)
          ok = (d == "bfloat16"
                    ? run_shape<bf16>(a, s, h, "bfloat16", stream, scrub, prop.name, out)
                    : run_shape<float>(a, s, h, "float32", stream, scrub, prop.name, out)) &&
               ok;
      }
  if (out) std::fclose(out);
  LAB_CUDA(cudaFree(scrub.buffer));
  LAB_CUDA(cudaStreamDestroy(stream));
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace gdn::cuda

int main(int argc, char** argv) {
  gdn::cuda::Args a;
  CLI::App app{"conv_lab: the direct and cuDNN causal depthwise conv1d, checked and timed"};
  app.add_option("--bt", a.bt, "batch x time, e.g. 8x2048,1x8192")->delimiter(',');
  app.add_option("--c", a.c, "channels, e.g. 1024,2048,4096")->delimiter(',');
  app.add_option("--k", a.k, "kernel widths, e.g. 4")->delimiter(',');
  app.add_option("--dtypes", a.dtypes, "float32,bfloat16")->delimiter(',');
  app.add_option("--impls", a.impls, "direct,cudnn")->delimiter(',');
  app.add_option("--repeats", a.repeats, "timed runs per pass")->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup, "untimed runs before them");
  app.add_option("--check", a.check, "cpu (fp64 reference) or none")
      ->check(CLI::IsMember({"cpu", "none"}));
  app.add_option("--out", a.out, "also append the JSON lines to this file");
  app.add_option("--seed", a.seed, "input seed");
  CLI11_PARSE(app, argc, argv);
  try {
    return gdn::cuda::run_lab(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_lab: %s\n", e.what());
    return 1;
  }
}
