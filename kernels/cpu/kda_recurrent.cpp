// The recurrent Kimi Delta Attention on the CPU: the readable, step-by-step reference (fp64 when
// the inputs are fp64) that the chunked form is checked against.
//
// Forward, per (sequence, value head), one step at a time; it saves the state at the start of every
// chunk of p.chunk steps as the residual. Backward walks the chunks in reverse: it recomputes the
// chunk's states from the saved one (C states, never the whole sequence), then runs the steps'
// backward in reverse. Threads split (sequence, key head); the value heads of a group run in order
// inside one thread, so the dq and dk sums over the group are deterministic.
#include <cmath>
#include <cstring>

#include "kernels/cpu/kda_internal.h"
#include "kernels/cpu/recurrent_slices.h"

namespace gdn::kda::detail {

namespace {

// One slice's scratch: the state (forward) or the chunk's states and dS (backward), the step's
// vectors, and the group's dq, dk rows of the whole sequence (backward).
template <typename A>
struct Scratch {
  A *S = nullptr, *states = nullptr, *dS = nullptr;
  A *q = nullptr, *k = nullptr, *alpha = nullptr;
  A *v = nullptr, *u = nullptr, *d_o = nullptr, *r = nullptr, *du = nullptr, *dr = nullptr;
  A *dq = nullptr, *dk = nullptr;
  int64_t used = 0;

  Scratch(const gdr::Problem& p, A* base, bool backward) {
    Carver<A*> c(base);
    c.take_each(p.K, q, k, alpha);
    c.take_each(p.V, v, u);
    if (!backward) {
      S = c.take(p.K * p.V);
    } else {
      states = c.take(p.chunk * p.K * p.V);
      dS = c.take(p.K * p.V);
      c.take_each(p.V, d_o, r, du, dr);
      c.take_each(p.T * p.K, dq, dk);
    }
    used = c.used();
  }
};

// Loads token `tok` of key head h, value head hv: q (scaled), k, v, alpha = exp(g_t) per channel;
// returns beta_t.
template <typename T, typename A>
A load_step(const Problem& p, const Inputs<T>& in, int64_t tok, int64_t h, int64_t hv,
            const Scratch<A>& w) {
  const T* q = in.q + qk_offset(p, tok, h);
  const T* k = in.k + qk_offset(p, tok, h);
  const T* g = in.g + gk_offset(p, tok, hv);
  for (int64_t a = 0; a < p.K; ++a) {
    w.q[a] = A(p.scale) * to_acc(q[a]);
    w.k[a] = to_acc(k[a]);
    w.alpha[a] = std::exp(to_acc(g[a]));
  }
  const T* v = in.v + vo_offset(p, tok, hv);
  for (int64_t j = 0; j < p.V; ++j) w.v[j] = to_acc(v[j]);
  return to_acc(in.beta[gate_offset(p, tok, hv)]);
}

// One step on S (K x V) from the loaded vectors; writes o_t into `o`:
//   S = Diag(alpha) S;  u = beta (v - S^T k);  S = S + k u^T;  o = S^T q
template <typename A>
void step_forward(int64_t K, int64_t V, A beta, const Scratch<A>& w, A* S, A* o) {
  A* u = w.u;
  for (int64_t j = 0; j < V; ++j) u[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    A* row = S + a * V;
    for (int64_t j = 0; j < V; ++j) {
      row[j] *= w.alpha[a];
      u[j] += w.k[a] * row[j];
    }
  }
  for (int64_t j = 0; j < V; ++j) u[j] = beta * (w.v[j] - u[j]);
  for (int64_t j = 0; j < V; ++j) o[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    A* row = S + a * V;
    for (int64_t j = 0; j < V; ++j) {
      row[j] += w.k[a] * u[j];
      o[j] += w.q[a] * row[j];
    }
  }
}

// Advances S by token tok of key head h, value head hv (q, k, alpha, v loaded into w), writing
// o_t to o.
template <typename T, typename A>
void step_token(const Problem& p, const Inputs<T>& in, int64_t tok, int64_t h, int64_t hv,
                const Scratch<A>& w, A* S, A* o) {
  const A beta = load_step(p, in, tok, h, hv, w);
  step_forward(p.K, p.V, beta, w, S, o);
}

// One forward slice (sequence, value head), step by step from its h0 row
// (kernels/cpu/recurrent_slices.h); o_t overwrites v, which the step has consumed.
template <typename T, typename A>
void forward_slice(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                   const Slice& s, const Scratch<A>& w) {
  gdr::detail::recurrent_forward_slice(p, in, out, s, w.S, w.v,
                                       [&](int64_t tok, int64_t h, int64_t hv, A* S, A* o) {
                                         step_token(p, in, tok, h, hv, w, S, o);
                                       });
}

// The backward of step `t` of the slice at token tok0 (value head hv), from the states before
// (S_prev) and after (S_t) it: dS holds dL/dS_t and leaves holding dL/dS_prev; adds to the group's
// dq, dk rows of t and writes dv, dg, dbeta of t. With S_a = Diag(alpha) S_prev, r = S_a^T k:
//   o = S_t^T q:           dS += q do^T,  dq += scale S_t do
//   S_t = S_a + k u^T:     dk += dS u,    du = dS^T k
//   u = beta (v - r):      dbeta = du.(v - r),  dv = beta du,  dr = -beta du
//   r = S_a^T k:           dS_a = dS + k dr^T,  dk += S_a dr
//   S_a = Diag(alpha) S_prev:  dg_a = <S_a[a], dS_a[a]>,  dS_prev = Diag(alpha) dS_a
template <typename T, typename A>
void step_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args, int64_t tok0,
                   int64_t t, int64_t hv, const A* S_prev, const A* S_t, A* dS,
                   const Scratch<A>& w) {
  const int64_t K = p.K, V = p.V, h = hv / p.group(), tok = tok0 + t;
  const A beta = load_step(p, in, tok, h, hv, w);
  const T* d_o = args.d_o + vo_offset(p, tok, hv);
  for (int64_t j = 0; j < V; ++j) w.d_o[j] = to_acc(d_o[j]);
  A* dq = w.dq + t * K;
  A* dk = w.dk + t * K;
  for (int64_t a = 0; a < K; ++a) {
    dq[a] += A(p.scale) * gdr::detail::dot(S_t + a * V, w.d_o, V);
    A* ds = dS + a * V;
    for (int64_t j = 0; j < V; ++j) ds[j] += w.q[a] * w.d_o[j];
  }
  for (int64_t j = 0; j < V; ++j) w.r[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    const A* sp = S_prev + a * V;
    const A ka = w.alpha[a] * w.k[a];
    for (int64_t j = 0; j < V; ++j) w.r[j] += ka * sp[j];
  }
  for (int64_t j = 0; j < V; ++j) w.v[j] -= w.r[j];  // v - r
  for (int64_t j = 0; j < V; ++j) w.du[j] = 0;
  for (int64_t a = 0; a < K; ++a) {
    const A* ds = dS + a * V;
    dk[a] += beta * gdr::detail::dot(ds, w.v, V);
    for (int64_t j = 0; j < V; ++j) w.du[j] += w.k[a] * ds[j];
  }
  args.dbeta[gate_offset(p, tok, hv)] = from_acc<T>(gdr::detail::dot(w.du, w.v, V));
  T* dv = args.dv + vo_offset(p, tok, hv);
  for (int64_t j = 0; j < V; ++j) {
    dv[j] = from_acc<T>(beta * w.du[j]);
    w.dr[j] = -beta * w.du[j];
  }
  T* dg = args.dg + gk_offset(p, tok, hv);
  for (int64_t a = 0; a < K; ++a) {
    const A* sp = S_prev + a * V;
    A* ds = dS + a * V;
    const A al = w.alpha[a];
    dk[a] += al * gdr::detail::dot(sp, w.dr, V);
    A dga = 0;
    for (int64_t j = 0; j < V; ++j) {
      ds[j] += w.k[a] * w.dr[j];
      dga += sp[j] * ds[j];
      ds[j] *= al;
    }
    dg[a] = from_acc<T>(al * dga);
  }
}

// The backward of key slice (sequence, key head h) (kernels/cpu/recurrent_slices.h): the chunk's
// states recomputed with dr as the step's output scratch, then the steps in reverse.
template <typename T, typename A>
void backward_slice(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args,
                    const Slice& kh, const Scratch<A>& w) {
  gdr::detail::recurrent_backward_slice(
      p, args, kh, w,
      [&](int64_t tok, int64_t h, int64_t hv, A* S) { step_token(p, in, tok, h, hv, w, S, w.dr); },
      [&](int64_t t, int64_t hv, const A* S_prev, const A* S_t) {
        step_backward(p, in, args, kh.tok0, t, hv, S_prev, S_t, w.dS, w);
      });
}

}  // namespace

GDN_DELTA_RULE_DEFINE_BY_SLICES(recurrent, Scratch, sequences)

}  // namespace gdn::kda::detail
