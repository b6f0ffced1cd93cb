// gdr::forward_cuda / gdr::backward_cuda (kernels/gated_delta_rule.h): validation of the Problem
// and the pointers, then the CUDA implementation (kernels/cuda/gdr_*.cu) on the given stream.
// `fused` runs its own kernels where its plan fits the device, else `chunked` with the minimal
// residual (gdr_cuda.h: cuda_problem). Workspaces are sized by cuda_*_workspace_elems (the CUDA
// kernels' own scratch, not the CPU's).
#include <stdexcept>
#include <string>

#include "kernels/cuda/gdr_common.cuh"
#include "kernels/cuda/gdr_cuda.h"

namespace gdn::gdr {

namespace {

void require(const void* ptr, const char* what, const Problem& p) {
  if (!ptr)
    throw std::invalid_argument(std::string("gdr: ") + what + " is null (impl " +
                                impl_name(p.impl) + ", CUDA)");
}

template <typename T>
void check_inputs(const Problem& p, const Inputs<T>& in) {
  validate(p);
  require(in.q, "q", p);
  require(in.k, "k", p);
  require(in.v, "v", p);
  require(in.g, "g", p);
  if (p.impl != Impl::ssd) require(in.beta, "beta", p);
  if (p.has_h0) require(in.h0, "h0 (has_h0 is set)", p);
}

}  // namespace

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

int64_t cuda_forward_workspace_elems(const Problem& problem, int64_t in_bytes) {
  const Problem p = cuda_problem(problem, false, in_bytes);
  return p.impl == Impl::chunked ? cuda_detail::chunked_workspace(p, false) : 0;
}

int64_t cuda_backward_workspace_elems(const Problem& problem, int64_t in_bytes) {
  const Problem p = cuda_problem(problem, true, in_bytes);
  switch (p.impl) {
    case Impl::recurrent:
      return cuda_detail::recurrent_backward_workspace(p);
    case Impl::ssd:
      return cuda_detail::ssd_backward_workspace(p);
    case Impl::chunked:
      return cuda_detail::chunked_workspace(p, true);
    case Impl::fused:
      return fused::backward_workspace(p, in_bytes, cuda_detail::fused_plan(p, true, in_bytes).sub);
  }
  return 0;
}

template <typename T>
void forward_cuda(const Problem& problem, const Inputs<T>& in, const ForwardOutputs<T>& out,
                  void* stream) {
  constexpr int64_t in_bytes = sizeof(T);
  const Problem p = cuda_problem(problem, false, in_bytes);
  check_inputs(p, in);
  require(out.o, "o", p);
  if (p.want_ht) require(out.ht, "ht (want_ht is set)", p);
  require(out.residual, "residual", p);
  if (cuda_forward_workspace_elems(p, in_bytes) > 0) require(out.workspace, "forward workspace", p);
  Inputs<T> args = in;
  if (!p.has_h0) args.h0 = nullptr;
  ForwardOutputs<T> outs = out;
  if (!p.want_ht) outs.ht = nullptr;
  cudaStream_t s = cuda::as_stream(stream);
  switch (p.impl) {
    case Impl::recurrent:
      return cuda_detail::recurrent_forward(p, args, outs, false, s);
    case Impl::ssd:
      return cuda_detail::recurrent_forward(p, args, outs, true, s);
    case Impl::chunked:
      return cuda_detail::chunked_forward(p, args, outs, s);
    case Impl::fused:
      return cuda_detail::fused_forward(p, args, outs, s);
  }
}

template <typename T>
void backward_cuda(const Problem& problem, const Inputs<T>& in, const BackwardArgs<T>& args,
                   void* stream) {
  constexpr int64_t in_bytes = sizeof(T);
  const Problem p = cuda_problem(problem, true, in_bytes);
  check_inputs(p, in);
  require(args.d_o, "d_o", p);
  require(args.residual, "residual", p);
  if (cuda_backward_workspace_elems(p, in_bytes) > 0)
    require(args.workspace, "backward workspace", p);
  require(args.dq, "dq", p);
  require(args.dk, "dk", p);
  require(args.dv, "dv", p);
  require(args.dg, "dg", p);
  if (p.impl != Impl::ssd) require(args.dbeta, "dbeta", p);
  if (p.has_h0) require(args.dh0, "dh0 (has_h0 is set)", p);
  BackwardArgs<T> a = args;
  if (!p.has_h0) a.dh0 = nullptr;
  cudaStream_t s = cuda::as_stream(stream);
  switch (p.impl) {
    case Impl::recurrent:
      return cuda_detail::recurrent_backward(p, in, a, s);
    case Impl::ssd:
      return cuda_detail::ssd_backward(p, in, a, s);
    case Impl::chunked:
      return cuda_detail::chunked_backward(p, in, a, s);
    case Impl::fused:
      return cuda_detail::fused_backward(p, in, a, s);
  }
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
