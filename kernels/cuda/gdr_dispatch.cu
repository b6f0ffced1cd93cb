// The CUDA side of the gated-delta-rule registry (kernels/gdr_registry.h: cuda_kernels) and the
// entry points gdr::forward_cuda / gdr::backward_cuda (kernels/gated_delta_rule.h): argument
// checks, then the implementation's kernels (kernels/cuda/gdr_*.cu) on the given stream.
// `fused` runs its own kernels where its plan fits the device, else the chunked kernels with the
// minimal residual (the same residual), and says so once per shape on stderr. Workspaces are
// sized by cuda_*_workspace_elems (the CUDA kernels' own scratch, not the CPU's).
// Packed sequences: recurrent, ssd and fused take them natively (one launch set for every
// sequence, gdr_seqs.h); chunked (and fused where it falls back to chunked) runs them one
// sequence at a time (kernels/gdr_split.h).
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "kernels/cuda/gdr_common.cuh"
#include "kernels/cuda/gdr_cuda.h"
#include "kernels/gdr_checks.h"
#include "kernels/gdr_registry.h"
#include "kernels/gdr_split.h"

namespace gdn::gdr {

namespace {

using cuda::as_stream;

// One line on stderr the first time a shape falls back, so that no fused run is silently chunked.
void report_fallback_once(const Problem& p, bool backward, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> seen;
  const std::string key = std::string(backward ? "backward" : "forward") +
                          " K=" + std::to_string(p.K) + " V=" + std::to_string(p.V) +
                          " C=" + std::to_string(p.chunk) + ": " + why;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(key).second)
    std::fprintf(stderr, "gdn: fused gated delta rule runs as chunked on this GPU (%s)\n",
                 key.c_str());
}

// The CUDA kernels' head-dim limits (kMaxK, kMaxV), checked besides validate()'s so that a
// larger size names the CUDA limit rather than failing inside a kernel.
void check_cuda_limits(const Problem& p) {
  if (p.K > cuda_detail::kMaxK)
    throw std::invalid_argument("gdr (CUDA): K = " + std::to_string(p.K) +
                                " exceeds the CUDA kernels' maximum head dim " +
                                std::to_string(cuda_detail::kMaxK));
  if (p.V > cuda_detail::kMaxV)
    throw std::invalid_argument("gdr (CUDA): V = " + std::to_string(p.V) +
                                " exceeds the CUDA kernels' maximum value dim " +
                                std::to_string(cuda_detail::kMaxV));
}

// Each family's entry points with the registry's signature.
template <typename T>
void recurrent_fwd(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, void* s) {
  cuda_detail::recurrent_forward(p, in, out, false, as_stream(s));
}
template <typename T>
void ssd_fwd(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, void* s) {
  cuda_detail::recurrent_forward(p, in, out, true, as_stream(s));
}
template <typename T>
void recurrent_bwd(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& a, void* s) {
  cuda_detail::recurrent_backward(p, in, a, as_stream(s));
}
template <typename T>
void ssd_bwd(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& a, void* s) {
  cuda_detail::ssd_backward(p, in, a, as_stream(s));
}
// The chunked kernels take one sequence: a packed Problem runs per sequence. The `minimal`
// residual (the states, [sequence][head][chunk]) of the sequences alone lies end to end as the
// packed one does; the `full` one of a sequence alone (its states, A, [W | U]) is three parts of
// the packed one (cuda_seqs::full_residual_parts), so it is written to the workspace, behind the
// chunked scratch, and copied to (forward) or from (backward) its places.
int64_t chunked_scratch_any(const Problem& p, bool backward) {
  if (!p.packed()) return cuda_detail::chunked_workspace(p, backward);
  return detail::max_over_sequences(
      p, [&](const Problem& one) { return cuda_detail::chunked_workspace(one, backward); });
}
int64_t chunked_workspace_any(const Problem& p, bool backward) {
  const int64_t scratch = chunked_scratch_any(p, backward);
  if (!p.packed() || p.residual != Residual::full) return scratch;
  const Implementation& impl = implementation_of(p);
  return detail::round_up16(scratch) + detail::max_over_sequences(p, [&](const Problem& one) {
           return impl.residual_elems(one);
         });
}

// Copies the `full` residual parts of sequence n between the packed residual and `alone`.
template <typename A>
void copy_full_residual(const Problem& p, const Sequences& s, int64_t n, A* packed, A* alone,
                        bool to_packed, cudaStream_t stream) {
  for (const cuda_seqs::ResidualPart& part : cuda_seqs::full_residual_parts(p, s, n)) {
    A *dst = to_packed ? packed + part.packed_at : alone + part.alone_at,
      *src = to_packed ? alone + part.alone_at : packed + part.packed_at;
    GDN_KCUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(part.elems) * sizeof(A),
                                    cudaMemcpyDeviceToDevice, stream));
  }
}

template <typename T>
void chunked_fwd(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, void* s) {
  const cudaStream_t stream = as_stream(s);
  const auto one = [&](const Problem& q, const Inputs<T>& i, const ForwardOutputs<T>& o) {
    cuda_detail::chunked_forward(q, i, o, stream);
  };
  if (!p.packed()) return one(p, in, out);
  if (p.residual == Residual::minimal)
    return detail::forward_by_sequence(p, in, out, one,
                                       [&](const Problem& q) { return residual_elems(q); });
  acc_t<T>* alone = out.workspace + detail::round_up16(chunked_scratch_any(p, false));
  const Sequences seqs = sequences(p);
  for (int64_t n = 0; n < seqs.count(); ++n) {
    const detail::SequenceOffsets o = detail::sequence_offsets(p, seqs, n);
    ForwardOutputs<T> r = out;
    r.o = detail::shifted(out.o, o.vo);
    r.ht = detail::shifted(out.ht, o.state);
    r.residual = alone;
    one(detail::sequence_problem(p, seqs, n), detail::sequence_inputs(in, o), r);
    copy_full_residual(p, seqs, n, out.residual, alone, true, stream);
  }
}
template <typename T>
void chunked_bwd(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& a, void* s) {
  const cudaStream_t stream = as_stream(s);
  const auto one = [&](const Problem& q, const Inputs<T>& i, const BackwardArgs<T>& b) {
    cuda_detail::chunked_backward(q, i, b, stream);
  };
  if (!p.packed()) return one(p, in, a);
  if (p.residual == Residual::minimal)
    return detail::backward_by_sequence(p, in, a, one,
                                        [&](const Problem& q) { return residual_elems(q); });
  acc_t<T>* alone = a.workspace + detail::round_up16(chunked_scratch_any(p, true));
  const Sequences seqs = sequences(p);
  for (int64_t n = 0; n < seqs.count(); ++n) {
    const detail::SequenceOffsets o = detail::sequence_offsets(p, seqs, n);
    copy_full_residual(p, seqs, n, const_cast<acc_t<T>*>(a.residual), alone, false, stream);
    BackwardArgs<T> b = a;
    b.d_o = detail::shifted(a.d_o, o.vo);
    b.dht = detail::shifted(a.dht, o.state);
    b.residual = alone;
    b.dq = detail::shifted(a.dq, o.qk);
    b.dk = detail::shifted(a.dk, o.qk);
    b.dv = detail::shifted(a.dv, o.vo);
    b.dg = detail::shifted(a.dg, o.gate);
    b.dbeta = detail::shifted(a.dbeta, o.gate);
    b.dh0 = detail::shifted(a.dh0, o.state);
    one(detail::sequence_problem(p, seqs, n), detail::sequence_inputs(in, o), b);
  }
}
// fused where its plan does not fit: the chunked kernels with the minimal residual (the same
// residual), per sequence when packed.
template <typename T>
void fused_fwd(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out, void* s) {
  const Problem run = cuda_problem(p, false, sizeof(T));
  if (run.impl == Impl::fused) return cuda_detail::fused_forward(p, in, out, as_stream(s));
  report_fallback_once(p, false, cuda_fused_fallback(p, false, sizeof(T)));
  chunked_fwd(run, in, out, s);
}
template <typename T>
void fused_bwd(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& a, void* s) {
  const Problem run = cuda_problem(p, true, sizeof(T));
  if (run.impl == Impl::fused) return cuda_detail::fused_backward(p, in, a, as_stream(s));
  report_fallback_once(p, true, cuda_fused_fallback(p, true, sizeof(T)));
  chunked_bwd(run, in, a, s);
}

int64_t recurrent_forward_ws(const Problem& p, int64_t) {
  return cuda_detail::recurrent_forward_workspace(p);
}
int64_t chunked_forward_ws(const Problem& p, int64_t) {
  return chunked_workspace_any(p, false);
}
int64_t chunked_backward_ws(const Problem& p, int64_t) {
  return chunked_workspace_any(p, true);
}
int64_t recurrent_backward_ws(const Problem& p, int64_t) {
  return cuda_detail::recurrent_backward_workspace(p);
}
int64_t ssd_backward_ws(const Problem& p, int64_t) {
  return cuda_detail::ssd_backward_workspace(p);
}
int64_t fused_forward_ws(const Problem& p, int64_t in_bytes) {
  const Problem run = cuda_problem(p, false, in_bytes);
  if (run.impl == Impl::chunked) return chunked_workspace_any(run, false);
  return cuda_seqs::with_seq_table(p, 0);
}
int64_t fused_backward_ws(const Problem& p, int64_t in_bytes) {
  const Problem run = cuda_problem(p, true, in_bytes);
  if (run.impl == Impl::chunked) return chunked_workspace_any(run, true);
  const int64_t sub = cuda_detail::fused_plan(p, true, in_bytes).sub;
  return cuda_seqs::with_seq_table(p, fused::backward_workspace(p, in_bytes, sub));
}

// PACKED: whether the kernels take packed sequences themselves (DeviceKernels::packed).
#define GDN_GDR_CUDA_KERNELS(FWD, BWD, FWD_WS, BWD_WS, PACKED)                                     \
  CudaKernels {                                                                                    \
    {{&FWD<float>, &BWD<float>}, {&FWD<double>, &BWD<double>}, {&FWD<bf16>, &BWD<bf16>}}, &FWD_WS, \
        &BWD_WS, PACKED                                                                            \
  }

const CudaKernels kRecurrent = GDN_GDR_CUDA_KERNELS(
    recurrent_fwd, recurrent_bwd, recurrent_forward_ws, recurrent_backward_ws, true);
// chunked: cuBLAS batches over [slice][chunk] tiles of one stride; a packed Problem runs per
// sequence (chunked_fwd / chunked_bwd: the packed residual layout kept, also under `full`)
const CudaKernels kChunked =
    GDN_GDR_CUDA_KERNELS(chunked_fwd, chunked_bwd, chunked_forward_ws, chunked_backward_ws, true);
const CudaKernels kFused =
    GDN_GDR_CUDA_KERNELS(fused_fwd, fused_bwd, fused_forward_ws, fused_backward_ws, true);
const CudaKernels kSsd =
    GDN_GDR_CUDA_KERNELS(ssd_fwd, ssd_bwd, recurrent_forward_ws, ssd_backward_ws, true);

#undef GDN_GDR_CUDA_KERNELS

}  // namespace

const CudaKernels& cuda_kernels(Impl impl) {
  switch (impl) {
    case Impl::recurrent:
      return kRecurrent;
    case Impl::chunked:
      return kChunked;
    case Impl::fused:
      return kFused;
    case Impl::ssd:
      return kSsd;
  }
  throw std::invalid_argument("gdr: no CUDA kernels for implementation id " +
                              std::to_string(int(impl)));
}

Problem cuda_problem(const Problem& p, bool backward, int64_t in_bytes) {
  Problem c = p;
  if (c.impl == Impl::fused && !cuda_detail::fused_plan(p, backward, in_bytes).ok) {
    c.impl = Impl::chunked;
    c.residual = Residual::minimal;
  }
  return c;
}

fused::Plan cuda_fused_plan(const Problem& p, bool backward, int64_t in_bytes) {
  return cuda_detail::fused_plan(p, backward, in_bytes);
}

std::string cuda_fused_fallback(const Problem& p, bool backward, int64_t in_bytes) {
  if (p.impl != Impl::fused) return "";
  const fused::Plan pl = cuda_detail::fused_plan(p, backward, in_bytes);
  return pl.ok ? "" : pl.why;
}

int64_t cuda_forward_workspace_elems(const Problem& p, int64_t in_bytes) {
  return implementation_of(p).cuda_forward_workspace(p, in_bytes);
}

int64_t cuda_backward_workspace_elems(const Problem& p, int64_t in_bytes) {
  return implementation_of(p).cuda_backward_workspace(p, in_bytes);
}

template <typename T>
void forward_cuda(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                  void* stream) {
  check_cuda_limits(p);
  detail::check_forward_args(p, in, out, cuda_forward_workspace_elems(p, sizeof(T)), "CUDA");
  Inputs<T> args = in;
  if (!p.has_h0) args.h0 = nullptr;
  ForwardOutputs<T> outs = out;
  if (!p.want_ht) outs.ht = nullptr;
  const Implementation& impl = implementation_of(p);
  const auto forward = impl.cuda->of<T>().forward;
  const auto run = [&](const Problem& q, const Inputs<T>& i, const ForwardOutputs<T>& o) {
    forward(q, i, o, stream);
  };
  if (!p.packed() || impl.cuda->packed) return run(p, args, outs);
  detail::forward_by_sequence(p, args, outs, run,
                              [&](const Problem& one) { return impl.residual_elems(one); });
}

template <typename T>
void backward_cuda(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                   void* stream) {
  check_cuda_limits(p);
  detail::check_backward_args(p, in, args, cuda_backward_workspace_elems(p, sizeof(T)), "CUDA");
  BackwardArgs<T> a = args;
  if (!p.has_h0) a.dh0 = nullptr;
  const Implementation& impl = implementation_of(p);
  const auto backward = impl.cuda->of<T>().backward;
  const auto run = [&](const Problem& q, const Inputs<T>& i, const BackwardArgs<T>& b) {
    backward(q, i, b, stream);
  };
  if (!p.packed() || impl.cuda->packed) return run(p, in, a);
  detail::backward_by_sequence(p, in, a, run,
                               [&](const Problem& one) { return impl.residual_elems(one); });
}

template void forward_cuda<float>(const Problem&, const Inputs<float>&,
                                  const ForwardOutputs<float>&, void*);
template void forward_cuda<double>(const Problem&, const Inputs<double>&,
                                   const ForwardOutputs<double>&, void*);
template void forward_cuda<bf16>(const Problem&, const Inputs<bf16>&, const ForwardOutputs<bf16>&,
                                 void*);
template void backward_cuda<float>(const Problem&, const Inputs<float>&, const BackwardArgs<float>&,
                                   void*);
template void backward_cuda<double>(const Problem&, const Inputs<double>&,
                                    const BackwardArgs<double>&, void*);
template void backward_cuda<bf16>(const Problem&, const Inputs<bf16>&, const BackwardArgs<bf16>&,
                                  void*);

}  // namespace gdn::gdr
