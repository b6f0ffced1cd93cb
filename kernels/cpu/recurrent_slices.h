// The slice loops of the CPU recurrent kernels of every delta-rule family
// (kernels/cpu/gdr_recurrent.cpp, kernels/cpu/kda_recurrent.cpp), around the family's own step:
// the forward of a value slice step by step, saving the state at every chunk start (the
// residual); the backward of a key slice, which recomputes one chunk's states from the saved one
// (C states, never the whole sequence) and then runs the steps' backward in reverse, the value
// heads of the group in order so that the dq and dk sums over the group are deterministic.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

// The forward of value slice s (sequence, value head) from its h0 row: step(tok, h, hv, S, o)
// advances the state S (K x V) by token tok of key head h, value head hv and writes o_t (V
// values) to o. The state at every chunk start goes to the residual, the last to its ht row.
template <typename T, typename A, class Step>
void recurrent_forward_slice(const delta_rule::Sizes& p, const Inputs<T>& in,
                             const ForwardOutputs<T>& out, const Slice& s, A* S, A* o,
                             const Step& step) {
  const int64_t V = p.V, C = p.chunk, KV = p.K * V;
  const int64_t hv = s.head, h = hv / p.group();
  copy_or_zero(S, p.has_h0 ? in.h0 + s.index * KV : nullptr, KV);
  for (int64_t t = 0; t < s.len; ++t) {
    if (t % C == 0) std::memcpy(out.residual + s.tile(p.HV, hv, t / C) * KV, S, KV * sizeof(A));
    step(s.tok0 + t, h, hv, S, o);
    store_rows(o, V, 1, V, A(1), out.o + vo_offset(p, s.tok0 + t, hv), V);
  }
  if (p.want_ht) std::memcpy(out.ht + s.index * KV, S, KV * sizeof(A));
}

// states[i] = S after step t0 + i of value head hv (i < len), recomputed from the chunk-start
// state S0 by step(tok, h, hv, S), which advances S by token tok.
template <typename A, class Step>
void recompute_states(const delta_rule::Sizes& p, int64_t hv, int64_t t0, int64_t len, const A* S0,
                      A* states, const Step& step) {
  const int64_t KV = p.K * p.V, h = hv / p.group();
  for (int64_t i = 0; i < len; ++i) {
    A* S = states + i * KV;
    std::memcpy(S, i == 0 ? S0 : S - KV, KV * sizeof(A));
    step(t0 + i, h, hv, S);
  }
}

// The backward of key slice kh (sequence, key head): the value heads of the group in order, each
// chunk by chunk in reverse: the chunk's states into w.states (recompute_states with step), then
// step_back(t, hv, S_prev, S_t) for its steps in reverse (t in the sequence; w.dS holds dL/dS_t
// and leaves holding dL/dS_prev; it adds to the group's dq, dk rows of t in w.dq, w.dk). dq, dk
// (the sequence's rows) are stored at the end.
template <typename T, class Scratch, class Step, class StepBack>
void recurrent_backward_slice(const delta_rule::Sizes& p, const BackwardArgs<T>& args,
                              const Slice& kh, const Scratch& w, const Step& step,
                              const StepBack& step_back) {
  using A = acc_t<T>;
  const int64_t K = p.K, C = p.chunk, KV = K * p.V, h = kh.head;
  std::memset(w.dq, 0, kh.len * K * sizeof(A));
  std::memset(w.dk, 0, kh.len * K * sizeof(A));
  for (int64_t hv = h * p.group(); hv < (h + 1) * p.group(); ++hv) {
    const int64_t s = kh.n * p.HV + hv;  // the value slice's row of dht, dh0
    copy_or_zero(w.dS, args.dht ? args.dht + s * KV : nullptr, KV);
    for (int64_t c = kh.chunks - 1; c >= 0; --c) {
      const int64_t t0 = c * C, len = kh.chunk_rows(C, c);
      const A* S0 = args.residual + kh.tile(p.HV, hv, c) * KV;
      recompute_states(p, hv, kh.tok0 + t0, len, S0, w.states, step);
      for (int64_t i = len - 1; i >= 0; --i)
        step_back(t0 + i, hv, i == 0 ? S0 : w.states + (i - 1) * KV, w.states + i * KV);
    }
    if (p.has_h0) std::memcpy(args.dh0 + s * KV, w.dS, KV * sizeof(A));
  }
  for (int64_t t = 0; t < kh.len; ++t) {
    store_rows(w.dq + t * K, K, 1, K, A(1), args.dq + qk_offset(p, kh.tok0 + t, h), K);
    store_rows(w.dk + t * K, K, 1, K, A(1), args.dk + qk_offset(p, kh.tok0 + t, h), K);
  }
}

}  // namespace gdn::gdr::detail
