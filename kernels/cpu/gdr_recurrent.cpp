// The recurrent gated delta rule on the CPU: the readable, step-by-step reference (fp64 when the
// inputs are fp64) that every other implementation is checked against.
//
// Forward, per (sequence, value head), one step at a time; it saves the state at the start of every
// chunk as the residual. Backward walks the chunks in reverse: it recomputes the per-step states
// of one chunk from the saved chunk-start state (C states, never the whole sequence) and then
// runs the step backward in reverse. Threads split (sequence, key head); the value heads of a group
// run in order inside one thread, so the dq and dk sums over the group are deterministic.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

namespace {

// The scratch of one slice (kernels/gdr_workspace_layout.h), with the step vectors.
template <typename A>
using Scratch = RecurrentScratch<A*>;

template <typename T, typename A>
void load_vec(const T* src, int64_t n, A mul, A* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = mul * to_acc(src[i]);
}

// The decay and beta of step t of value head hv.
template <typename A>
struct StepGates {
  A alpha, beta;
};

// Loads token t of key head h, value head hv: q (scaled), k, v, and returns alpha = exp(g_t),
// beta_t.
template <typename T, typename A>
StepGates<A> load_step(const Problem& p, const Inputs<T>& in, int64_t t, int64_t h, int64_t hv,
                       A* q, A* k, A* v) {
  load_vec(in.q + qk_offset(p, t, h), p.K, A(p.scale), q);
  load_vec(in.k + qk_offset(p, t, h), p.K, A(1), k);
  load_vec(in.v + vo_offset(p, t, hv), p.V, A(1), v);
  const int64_t gi = gate_offset(p, t, hv);
  return StepGates<A>{std::exp(to_acc(in.g[gi])), to_acc(in.beta[gi])};
}

// One forward step on S (K x V) with row vectors q (already scaled), k, v; writes o_t.
//   S = alpha S;  u = beta (v - S^T k);  S = S + k u^T;  o = S^T q
template <typename A>
void step_forward(int64_t K, int64_t V, A alpha, A beta, const A* q, const A* k, const A* v, A* S,
                  A* u, A* o) {
  for (int64_t j = 0; j < V; ++j) u[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    A* row = S + a * V;
    for (int64_t j = 0; j < V; ++j) {
      row[j] *= alpha;
      u[j] += k[a] * row[j];
    }
  }
  for (int64_t j = 0; j < V; ++j) u[j] = beta * (v[j] - u[j]);
  for (int64_t j = 0; j < V; ++j) o[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    A* row = S + a * V;
    for (int64_t j = 0; j < V; ++j) {
      row[j] += k[a] * u[j];
      o[j] += q[a] * row[j];
    }
  }
}

// One forward slice (sequence, value head), step by step from its h0 row; the state at every
// chunk start goes to the residual, the last to its ht row.
template <typename T, typename A>
void forward_slice(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                   const Slice& s, const Scratch<A>& w) {
  const int64_t K = p.K, V = p.V, C = p.chunk, KV = K * V;
  const int64_t hv = s.head, h = hv / p.group();
  copy_or_zero(w.S, p.has_h0 ? in.h0 + s.index * KV : nullptr, KV);
  for (int64_t t = 0; t < s.len; ++t) {
    if (t % C == 0) std::memcpy(out.residual + s.tile(p.HV, hv, t / C) * KV, w.S, KV * sizeof(A));
    const StepGates<A> gates = load_step(p, in, s.tok0 + t, h, hv, w.q, w.k, w.v);
    A* o = w.v;  // v is consumed before o is written
    step_forward(K, V, gates.alpha, gates.beta, w.q, w.k, w.v, w.S, w.u, o);
    store_rows(o, V, 1, V, A(1), out.o + vo_offset(p, s.tok0 + t, hv), V);
  }
  if (p.want_ht) std::memcpy(out.ht + s.index * KV, w.S, KV * sizeof(A));
}

// The states after each step of the chunk at token t0 of value head hv: states[i] = S_{t0 + i},
// recomputed from the chunk-start state S0.
template <typename T, typename A>
void recompute_states(const Problem& p, const Inputs<T>& in, int64_t hv, int64_t t0, int64_t len,
                      const A* S0, const Scratch<A>& w) {
  const int64_t KV = p.K * p.V, h = hv / p.group();
  for (int64_t i = 0; i < len; ++i) {
    A* S = w.states + i * KV;
    std::memcpy(S, i == 0 ? S0 : S - KV, KV * sizeof(A));
    const StepGates<A> gates = load_step(p, in, t0 + i, h, hv, w.q, w.k, w.v);
    step_forward(p.K, p.V, gates.alpha, gates.beta, w.q, w.k, w.v, S, w.du, w.dr);
  }
}

// The backward of step t (of the slice starting at token tok0) of value head hv, from the states
// before (S_prev) and after (S_t) it: adds to dS (then dS_prev), to the group's dq, dk rows of t,
// and writes dv, dg, dbeta of t.
template <typename T, typename A>
void step_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args, int64_t tok0,
                   int64_t t, int64_t hv, const A* S_prev, const A* S_t, const Scratch<A>& w) {
  const int64_t K = p.K, V = p.V, h = hv / p.group(), tok = tok0 + t;
  const A scale = A(p.scale);
  const StepGates<A> gates = load_step(p, in, tok, h, hv, w.q, w.k, w.v);
  const A alpha = gates.alpha, beta = gates.beta;
  load_vec(args.d_o + vo_offset(p, tok, hv), V, A(1), w.d_o);
  A* dq = w.dq + t * K;
  A* dk = w.dk + t * K;
  // o = S_t^T q:  dS += q do^T;  dq += scale S_t do
  for (int64_t a = 0; a < K; ++a) {
    dq[a] += scale * dot(S_t + a * V, w.d_o, V);
    A* ds = w.dS + a * V;
    for (int64_t j = 0; j < V; ++j) ds[j] += w.q[a] * w.d_o[j];
  }
  // r = (alpha S_prev)^T k,  u = beta (v - r)  (u kept in v: v - r, then scaled)
  for (int64_t j = 0; j < V; ++j) w.r[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    const A* sp = S_prev + a * V;
    for (int64_t j = 0; j < V; ++j) w.r[j] += alpha * w.k[a] * sp[j];
  }
  for (int64_t j = 0; j < V; ++j) w.v[j] -= w.r[j];  // v - r
  // S_t = S_a + k u^T:  dk += dS u;  du = dS^T k
  for (int64_t j = 0; j < V; ++j) w.du[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    const A* ds = w.dS + a * V;
    dk[a] += beta * dot(ds, w.v, V);
    for (int64_t j = 0; j < V; ++j) w.du[j] += w.k[a] * ds[j];
  }
  // u = beta (v - r):  dbeta = du.(v - r);  dv = beta du;  dr = -beta du
  const int64_t gi = gate_offset(p, tok, hv);
  args.dbeta[gi] = from_acc<T>(dot(w.du, w.v, V));
  for (int64_t j = 0; j < V; ++j) w.dr[j] = -beta * w.du[j];
  store_rows(w.du, V, 1, V, beta, args.dv + vo_offset(p, tok, hv), V);
  // r = S_a^T k:  dS_a = dS + k dr^T;  dk += S_a dr;  then S_a = alpha S_prev:
  // dg = <S_a, dS_a>,  dS_prev = alpha dS_a
  A dg = 0;
  for (int64_t a = 0; a < K; ++a) {
    const A* sp = S_prev + a * V;
    A* ds = w.dS + a * V;
    dk[a] += alpha * dot(sp, w.dr, V);
    for (int64_t j = 0; j < V; ++j) {
      ds[j] += w.k[a] * w.dr[j];
      dg += alpha * sp[j] * ds[j];
      ds[j] *= alpha;
    }
  }
  args.dg[gi] = from_acc<T>(dg);
}

// The backward of key slice (sequence n, key head h): the value heads of the group in order, each
// chunk by chunk in reverse (recomputing the chunk's states, then the steps in reverse); dq, dk
// summed over the group in the scratch (rows of the sequence's tokens), stored at the end.
template <typename T, typename A>
void backward_slice(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                    const Slice& kh, const Scratch<A>& w) {
  const int64_t K = p.K, C = p.chunk, KV = K * p.V, h = kh.head;
  std::memset(w.dq, 0, kh.len * K * sizeof(A));
  std::memset(w.dk, 0, kh.len * K * sizeof(A));
  for (int64_t hv = h * p.group(); hv < (h + 1) * p.group(); ++hv) {
    const int64_t s = kh.n * p.HV + hv;  // the value slice's row of dht, dh0
    copy_or_zero(w.dS, args.dht ? args.dht + s * KV : nullptr, KV);
    for (int64_t c = kh.chunks - 1; c >= 0; --c) {
      const int64_t t0 = c * C, len = kh.chunk_rows(C, c);
      const A* S0 = args.residual + kh.tile(p.HV, hv, c) * KV;
      recompute_states(p, in, hv, kh.tok0 + t0, len, S0, w);
      for (int64_t i = len - 1; i >= 0; --i)
        step_backward(p, in, args, kh.tok0, t0 + i, hv, i == 0 ? S0 : w.states + (i - 1) * KV,
                      w.states + i * KV, w);
    }
    if (p.has_h0) std::memcpy(args.dh0 + s * KV, w.dS, KV * sizeof(A));
  }
  for (int64_t t = 0; t < kh.len; ++t) {
    store_rows(w.dq + t * K, K, 1, K, A(1), args.dq + qk_offset(p, kh.tok0 + t, h), K);
    store_rows(w.dk + t * K, K, 1, K, A(1), args.dk + qk_offset(p, kh.tok0 + t, h), K);
  }
}

}  // namespace

GDN_GDR_DEFINE_BY_SLICES(recurrent, Scratch, sequences)

}  // namespace gdn::gdr::detail
