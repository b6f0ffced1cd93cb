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
#include "kernels/cpu/recurrent_slices.h"

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

// Advances S by token tok of key head h, value head hv (q, k, v loaded into w), writing o_t to o;
// u: a V-vector of scratch.
template <typename T, typename A>
void step_token(const Problem& p, const Inputs<T>& in, int64_t tok, int64_t h, int64_t hv,
                const Scratch<A>& w, A* S, A* u, A* o) {
  const StepGates<A> gates = load_step(p, in, tok, h, hv, w.q, w.k, w.v);
  step_forward(p.K, p.V, gates.alpha, gates.beta, w.q, w.k, w.v, S, u, o);
}

// One forward slice (sequence, value head), step by step from its h0 row (recurrent_slices.h);
// o_t is written over v, which the step has consumed.
template <typename T, typename A>
void forward_slice(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                   const Slice& s, const Scratch<A>& w) {
  recurrent_forward_slice(p, in, out, s, w.S, w.v,
                          [&](int64_t tok, int64_t h, int64_t hv, A* S, A* o) {
                            step_token(p, in, tok, h, hv, w, S, w.u, o);
                          });
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

// The backward of key slice (sequence n, key head h) (recurrent_slices.h): the chunk's states
// recomputed with du and dr as the step's scratch, then the steps in reverse.
template <typename T, typename A>
void backward_slice(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                    const Slice& kh, const Scratch<A>& w) {
  recurrent_backward_slice(
      p, args, kh, w,
      [&](int64_t tok, int64_t h, int64_t hv, A* S) {
        step_token(p, in, tok, h, hv, w, S, w.du, w.dr);
      },
      [&](int64_t t, int64_t hv, const A* S_prev, const A* S_t) {
        step_backward(p, in, args, kh.tok0, t, hv, S_prev, S_t, w);
      });
}

}  // namespace

GDN_DELTA_RULE_DEFINE_BY_SLICES(recurrent, Scratch, sequences)

}  // namespace gdn::gdr::detail
