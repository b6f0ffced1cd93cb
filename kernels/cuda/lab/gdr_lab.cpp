// gdr_lab: the development loop of the CUDA gated-delta-rule kernels. Runs kernel variants side
// by side on one shape, straight on the kernel API (no tensors, no autograd, buffers allocated
// once), checks every output and gradient against the fp64 recurrent reference on the CPU (or
// against the first variant), and times each with the L2 cache scrubbed before every run
// (CUDA events; median and quartiles).
//
//   build/gdr_lab --B 4 --T 8192 --H 8 --K 128 --V 128 --dtype bfloat16
//       --variants fused,fused:vt=16,fused:vt=64,chunked,lab --check cpu --repeats 20
//
// Variants: recurrent, chunked, chunked_fat, fused (the library, through gdr::forward_cuda /
// backward_cuda; fused:vt=N forces the V tile, fused:sub=N the kernels' chunk), lab
// (kernels/cuda/lab/lab_block.cuh, the copy a developer edits). TFLOP/s use docs/design.md's FLOP
// count (gdr::forward_flops / backward_flops); --peak-tflops gives the fraction of the device's
// dense bf16 peak.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/gdr_cuda.h"
#include "kernels/cuda/lab/lab_kernels.h"
#include "kernels/cuda/lab/lab_util.h"

namespace gdn::gdr {
namespace {

using namespace lab_util;  // kernels/cuda/lab/lab_util.h

struct Args {
  int64_t B = 4, T = 2048, H = 8, HV = 0, K = 128, V = 128;
  int chunk = 64, repeats = 20;
  std::string dtype = "bfloat16", check = "cpu", modes = "fwd,fwd_bwd";
  std::vector<std::string> variants{"fused", "chunked"};
  double peak_tflops = 0;
  uint64_t seed = 1;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t next = std::min(s.find(sep, at), s.size());
    if (next > at) out.push_back(s.substr(at, next - at));
    at = next + 1;
  }
  return out;
}

// Host inputs in fp64, already rounded to the run's dtype (the reference sees what the GPU sees).
struct HostData {
  std::vector<double> q, k, v, g, beta, d_o;
};

template <typename T>
double round_to(double x) {
  return double(to_acc(from_acc<T>(acc_t<T>(x))));
}

template <typename T>
HostData make_data(const Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0, 1);
  HostData d;
  auto fill = [&](std::vector<double>& x, int64_t n) {
    x.resize(n);
    for (auto& e : x) e = n01(rng);
  };
  fill(d.q, p.B * p.T * p.H * p.K);
  fill(d.k, p.B * p.T * p.H * p.K);
  for (int64_t r = 0; r < p.B * p.T * p.H; ++r) {  // k L2-normalised, as the layer makes it
    double ss = 1e-6;
    for (int64_t i = 0; i < p.K; ++i) ss += d.k[r * p.K + i] * d.k[r * p.K + i];
    for (int64_t i = 0; i < p.K; ++i) d.k[r * p.K + i] /= std::sqrt(ss);
  }
  fill(d.v, p.B * p.T * p.HV * p.V);
  fill(d.d_o, p.B * p.T * p.HV * p.V);
  fill(d.g, p.B * p.T * p.HV);
  fill(d.beta, p.B * p.T * p.HV);
  for (auto& x : d.g) x = -std::log1p(std::exp(-(x + 4)));  // log sigmoid(x + 4)
  for (auto& x : d.beta) x = 1 / (1 + std::exp(-x));
  for (auto* x : {&d.q, &d.k, &d.v, &d.g, &d.beta, &d.d_o})
    for (auto& e : *x) e = round_to<T>(e);
  return d;
}

// Outputs of one run, in fp64.
struct Outputs {
  std::vector<double> o, dq, dk, dv, dg, dbeta;
};

Outputs reference(const Problem& problem, const HostData& d) {
  Problem p = problem;
  p.impl = Impl::recurrent;
  Outputs r;
  r.o.resize(d.v.size());
  std::vector<double> residual(residual_elems(p)), fws(forward_workspace_elems(p)),
      bws(backward_workspace_elems(p));
  const Inputs<double> in{d.q.data(), d.k.data(), d.v.data(), d.g.data(), d.beta.data(), nullptr};
  forward_cpu<double>(p, in,
                      ForwardOutputs<double>{r.o.data(), nullptr, residual.data(), fws.data()});
  r.dq.resize(d.q.size());
  r.dk.resize(d.k.size());
  r.dv.resize(d.v.size());
  r.dg.resize(d.g.size());
  r.dbeta.resize(d.g.size());
  backward_cpu<double>(
      p, in,
      BackwardArgs<double>{d.d_o.data(), nullptr, residual.data(), bws.data(), r.dq.data(),
                           r.dk.data(), r.dv.data(), r.dg.data(), r.dbeta.data(), nullptr});
  return r;
}

// One variant: the Problem it runs (impl, residual, the fused kernels' V tile and chunk:
// Problem::fused_vt, fused_sub; 0 the plan's choice) and how (library or lab).
struct Variant {
  std::string name;
  Problem p;
  bool lab = false;
};

Variant parse_variant(const std::string& spec, const Problem& base) {
  Variant v;
  v.name = spec;
  v.p = base;
  const auto parts = split(spec, ':');
  const std::string impl = parts.empty() ? "" : parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].rfind("vt=", 0) == 0) {
      v.p.fused_vt = std::atoll(parts[i].c_str() + 3);
    } else if (parts[i].rfind("sub=", 0) == 0) {
      v.p.fused_sub = std::atoll(parts[i].c_str() + 4);
    } else {
      throw std::invalid_argument("variant " + spec + ": unknown option " + parts[i] +
                                  " (expected vt=N or sub=N)");
    }
  }
  if (impl == "lab") {
    v.lab = true;
    v.p.impl = Impl::fused;
  } else if (impl == "chunked_fat") {
    v.p.impl = Impl::chunked;
    v.p.residual = Residual::full;
  } else {
    v.p.impl = parse_impl(impl);
  }
  return v;
}

template <typename T>
struct Lab {
  using A = acc_t<T>;
  Problem base;
  const T *q, *k, *v, *g, *beta, *d_o;
  T *o, *dq, *dk, *dv, *dg, *dbeta;
  A *residual = nullptr, *workspace = nullptr;
  int64_t workspace_elems = 0;
  cudaStream_t stream = nullptr;

  void forward(const Variant& var) {
    const Inputs<T> in{q, k, v, g, beta, nullptr};
    const ForwardOutputs<T> out{o, nullptr, residual, workspace};
    if (var.lab) return lab::lab_forward<T>(var.p, in, out, stream);
    forward_cuda<T>(var.p, in, out, stream);
  }
  void backward(const Variant& var) {
    const Inputs<T> in{q, k, v, g, beta, nullptr};
    const BackwardArgs<T> args{d_o, nullptr, residual, workspace, dq, dk, dv, dg, dbeta, nullptr};
    if (var.lab) return lab::lab_backward<T>(var.p, in, args, stream);
    backward_cuda<T>(var.p, in, args, stream);
  }
  Outputs outputs() const {
    const int64_t nqk = base.B * base.T * base.H * base.K, nv = base.B * base.T * base.HV * base.V;
    const int64_t ng = base.B * base.T * base.HV;
    return Outputs{download(o, nv),  download(dq, nqk), download(dk, nqk),
                   download(dv, nv), download(dg, ng),  download(dbeta, ng)};
  }
};

template <typename T>
int run_lab(const Args& a) {
  using A = acc_t<T>;
  Problem base;
  base.B = a.B;
  base.T = a.T;
  base.H = a.H;
  base.HV = a.HV > 0 ? a.HV : a.H;
  base.K = a.K;
  base.V = a.V;
  base.chunk = a.chunk;
  base.scale = 1 / std::sqrt(double(a.K));
  validate(base);
  std::vector<Variant> variants;
  for (const auto& s : a.variants) variants.push_back(parse_variant(s, base));

  const HostData h = make_data<T>(base, a.seed);
  Lab<T> lab;
  lab.base = base;
  lab.q = upload<T>(h.q);
  lab.k = upload<T>(h.k);
  lab.v = upload<T>(h.v);
  lab.g = upload<T>(h.g);
  lab.beta = upload<T>(h.beta);
  lab.d_o = upload<T>(h.d_o);
  lab.o = device_alloc<T>(int64_t(h.v.size()));
  lab.dq = device_alloc<T>(int64_t(h.q.size()));
  lab.dk = device_alloc<T>(int64_t(h.k.size()));
  lab.dv = device_alloc<T>(int64_t(h.v.size()));
  lab.dg = device_alloc<T>(int64_t(h.g.size()));
  lab.dbeta = device_alloc<T>(int64_t(h.g.size()));
  int64_t residual_max = 0, workspace_max = 0;
  for (const Variant& v : variants) {
    residual_max = std::max(residual_max, residual_elems(v.p));
    workspace_max = std::max({workspace_max, cuda_forward_workspace_elems(v.p, sizeof(T)),
                              cuda_backward_workspace_elems(v.p, sizeof(T))});
  }
  lab.residual = device_alloc<A>(residual_max);
  lab.workspace = device_alloc<A>(workspace_max);
  LAB_CUDA(cudaStreamCreate(&lab.stream));
  int dev = 0;
  LAB_CUDA(cudaGetDevice(&dev));
  const L2Scrub scrub = L2Scrub::make();
  cudaDeviceProp prop;
  LAB_CUDA(cudaGetDeviceProperties(&prop, dev));

  Outputs ref;
  if (a.check == "cpu") {
    std::fprintf(stderr, "gdr_lab: fp64 reference on the CPU...\n");
    ref = reference(base, h);
  }
  std::printf(
      "gdr_lab on %s: B=%lld T=%lld H=%lld HV=%lld K=%lld V=%lld C=%d %s, %d runs, L2 "
      "scrubbed (%zu MiB)\n",
      prop.name, (long long)base.B, (long long)base.T, (long long)base.H, (long long)base.HV,
      (long long)base.K, (long long)base.V, base.chunk, a.dtype.c_str(), a.repeats,
      scrub.bytes >> 20);
  std::printf("%-16s %-8s %5s %5s %10s %10s %10s %9s %7s %10s  %s\n", "variant", "mode", "vt",
              "sub", "median_ms", "q1_ms", "q3_ms", "TFLOP/s", "%peak", "max_err", "(worst of)");
  const auto modes = split(a.modes, ',');
  for (const Variant& var : variants) {
    const std::string fallback =
        var.p.impl == Impl::fused ? cuda_fused_fallback(var.p, true, sizeof(T)) : "";
    const fused::Plan plan = var.p.impl == Impl::fused && fallback.empty()
                                 ? cuda_fused_plan(var.p, true, sizeof(T))
                                 : fused::Plan{};
    // Correctness first: one forward + backward, every output against the reference.
    lab.forward(var);
    lab.backward(var);
    LAB_CUDA(cudaStreamSynchronize(lab.stream));
    const Outputs out = lab.outputs();
    if (a.check == "first" && ref.o.empty()) ref = out;
    double worst = 0;
    std::string worst_name = "-";
    if (!ref.o.empty()) {
      const std::pair<const char*,
                      std::pair<const std::vector<double>*, const std::vector<double>*>>
          fields[] = {{"o", {&out.o, &ref.o}},    {"dq", {&out.dq, &ref.dq}},
                      {"dk", {&out.dk, &ref.dk}}, {"dv", {&out.dv, &ref.dv}},
                      {"dg", {&out.dg, &ref.dg}}, {"dbeta", {&out.dbeta, &ref.dbeta}}};
      for (const auto& [name, pr] : fields) {
        const double e = rel_err(*pr.first, *pr.second);
        if (!(e <= worst)) {  // NaN counts as worst
          worst = e;
          worst_name = name;
        }
      }
    }
    for (const std::string& mode : modes) {
      const bool bwd = mode == "fwd_bwd";
      const Stats s = time_runs(
          [&] {
            lab.forward(var);
            if (bwd) lab.backward(var);
          },
          1, a.repeats, lab.stream, scrub);
      const double flops = forward_flops(var.p) + (bwd ? backward_flops(var.p) : 0);
      const double tflops = flops / (s.median * 1e-3) / 1e12;
      std::printf(
          "%-16s %-8s %5lld %5lld %10.3f %10.3f %10.3f %9.2f %7s %10.3g  %s%s\n", var.name.c_str(),
          mode.c_str(), (long long)plan.vt, (long long)plan.sub, s.median, s.q1, s.q3, tflops,
          a.peak_tflops > 0 ? (std::to_string(int(100 * tflops / a.peak_tflops)) + "%").c_str()
                            : "-",
          worst, worst_name.c_str(),
          fallback.empty() ? "" : ("  [ran chunked: " + fallback + "]").c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace gdn::gdr

int main(int argc, char** argv) {
  gdn::gdr::Args a;
  CLI::App app{"gdr_lab: CUDA gated-delta-rule kernel variants side by side"};
  app.add_option("--B", a.B, "batch");
  app.add_option("--T", a.T, "sequence length");
  app.add_option("--H", a.H, "key heads");
  app.add_option("--HV", a.HV, "value heads (default H)");
  app.add_option("--K", a.K, "key head dim");
  app.add_option("--V", a.V, "value head dim");
  app.add_option("--chunk", a.chunk, "chunk size (16, 32, 64)");
  app.add_option("--dtype", a.dtype, "bfloat16 or float32")
      ->check(CLI::IsMember({"bfloat16", "float32"}));
  app.add_option("--variants", a.variants,
                 "recurrent,chunked,chunked_fat,fused[:vt=N][:sub=N],lab[...]")
      ->delimiter(',');
  app.add_option("--modes", a.modes, "fwd,fwd_bwd");
  app.add_option("--check", a.check, "cpu (fp64 reference), first (the first variant) or none")
      ->check(CLI::IsMember({"cpu", "first", "none"}));
  app.add_option("--repeats", a.repeats, "timed runs per variant and mode");
  app.add_option("--peak-tflops", a.peak_tflops, "the device's dense bf16 peak, for %peak");
  app.add_option("--seed", a.seed, "input seed");
  CLI11_PARSE(app, argc, argv);
  try {
    return a.dtype == "bfloat16" ? gdn::gdr::run_lab<gdn::bf16>(a) : gdn::gdr::run_lab<float>(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdr_lab: %s\n", e.what());
    return 1;
  }
}
