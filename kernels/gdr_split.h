// Packed sequences through kernels that do not take cu_seqlens (DeviceKernels::packed false): the
// entry points run the Problem one sequence at a time, each as an unpacked B = 1 Problem over its
// tokens, its rows of h0/ht/dht/dh0 and its part of the residual, reusing one workspace (sized
// for the longest). Exact, but the sequences run one after another: the kernels that take
// cu_seqlens run them together.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/gated_delta_rule.h"

namespace gdn::gdr::detail {

// Sequence n of a packed Problem as a Problem of its own: every field but the offsets, which are
// not copied (a copy for each of N sequences would cost N^2).
inline Problem sequence_problem(const Problem& p, const Sequences& s, int64_t n) {
  Problem one;
  static_cast<ProblemShape&>(one) = p;
  one.B = 1;
  one.T = s.len(n);
  return one;
}

// max over the sequences of size(sequence_problem) (a workspace reused by each in turn).
template <class Size>
int64_t max_over_sequences(const Problem& p, const Size& size) {
  const Sequences s = sequences(p);
  int64_t m = 0;
  for (int64_t n = 0; n < s.count(); ++n) m = std::max(m, size(sequence_problem(p, s, n)));
  return m;
}

// Offsets of sequence n in the inputs and outputs (elements), and of its residual.
struct SequenceOffsets {
  int64_t qk, vo, gate, state;
};
inline SequenceOffsets sequence_offsets(const Problem& p, const Sequences& s, int64_t n) {
  const int64_t t = s.token[n];
  return {t * p.H * p.K, t * p.HV * p.V, t * p.HV, n * p.HV * p.K * p.V};
}

template <typename P>
P* shifted(P* ptr, int64_t by) {
  return ptr ? ptr + by : nullptr;
}

// The inputs, or their gradients (the same layouts), of the sequence at o: q, k, v, g, beta, h0.
template <typename Q, typename G, typename S>
void shift_input_layout(const SequenceOffsets& o, Q*& q, Q*& k, Q*& v, G*& g, G*& beta, S*& h0) {
  q = shifted(q, o.qk);
  k = shifted(k, o.qk);
  v = shifted(v, o.vo);
  g = shifted(g, o.gate);
  beta = shifted(beta, o.gate);
  h0 = shifted(h0, o.state);
}

template <typename T>
Inputs<T> sequence_inputs(const Inputs<T>& in, const SequenceOffsets& o) {
  Inputs<T> r = in;
  shift_input_layout(o, r.q, r.k, r.v, r.g, r.beta, r.h0);
  return r;
}

// The outputs of the sequence at o, its residual at `residual`.
template <typename T>
ForwardOutputs<T> sequence_outputs(const ForwardOutputs<T>& out, const SequenceOffsets& o,
                                   acc_t<T>* residual) {
  ForwardOutputs<T> r = out;
  r.o = shifted(out.o, o.vo);
  r.ht = shifted(out.ht, o.state);
  r.residual = residual;
  return r;
}
template <typename T>
BackwardArgs<T> sequence_outputs(const BackwardArgs<T>& args, const SequenceOffsets& o,
                                 const acc_t<T>* residual) {
  BackwardArgs<T> a = args;
  a.d_o = shifted(args.d_o, o.vo);
  a.dht = shifted(args.dht, o.state);
  a.residual = residual;
  shift_input_layout(o, a.dq, a.dk, a.dv, a.dg, a.dbeta, a.dh0);
  return a;
}

// fn(sub, offsets, residual_at) for each sequence, residual_at advancing by residual_elems(sub).
template <class Fn, class ResidualElems>
void for_each_sequence(const Problem& p, const ResidualElems& residual_elems, const Fn& fn) {
  const Sequences s = sequences(p);
  int64_t residual_at = 0;
  for (int64_t n = 0; n < s.count(); ++n) {
    const Problem one = sequence_problem(p, s, n);
    fn(one, sequence_offsets(p, s, n), residual_at);
    residual_at += residual_elems(one);
  }
}

// run(sub, inputs, outputs) for each sequence, outputs ForwardOutputs or BackwardArgs;
// residual_elems(sub) sizes its residual part.
template <typename T, class Outputs, class Run, class ResidualElems>
void run_by_sequence(const Problem& p, const Inputs<T>& in, const Outputs& out, const Run& run,
                     const ResidualElems& residual_elems) {
  for_each_sequence(p, residual_elems,
                    [&](const Problem& one, const SequenceOffsets& o, int64_t residual_at) {
                      run(one, sequence_inputs(in, o),
                          sequence_outputs(out, o, shifted(out.residual, residual_at)));
                    });
}
template <typename T, class Forward, class ResidualElems>
void forward_by_sequence(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                         const Forward& forward, const ResidualElems& residual_elems) {
  run_by_sequence(p, in, out, forward, residual_elems);
}
template <typename T, class Backward, class ResidualElems>
void backward_by_sequence(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                          const Backward& backward, const ResidualElems& residual_elems) {
  run_by_sequence(p, in, args, backward, residual_elems);
}

}  // namespace gdn::gdr::detail
