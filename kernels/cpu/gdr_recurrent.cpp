// The recurrent gated delta rule on the CPU: the readable, step-by-step reference (fp64 when the
// inputs are fp64) that every other implementation is checked against.
//
// Forward, per (b, value head), one step at a time; it saves the state at the start of every
// chunk as the residual. Backward walks the chunks in reverse: it recomputes the per-step states
// of one chunk from the saved chunk-start state (C states, never the whole sequence) and then
// runs the step backward in reverse. Threads split (b, key head); the value heads of a group run
// in order inside one thread, so the dq and dk sums over the group are deterministic.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/gdr_internal.h"

namespace gdn::gdr::detail {

namespace {

// Per (b, value head) scratch of the forward: S (K x V), q, k (K), v, u (V).
template <typename A>
struct ForwardScratch {
  A *S, *q, *k, *v, *u;
  ForwardScratch(const Problem& p, A* base) {
    Carver<A> c(base);
    S = c.take(p.K * p.V);
    q = c.take(p.K);
    k = c.take(p.K);
    v = c.take(p.V);
    u = c.take(p.V);
    used = c.used();
  }
  int64_t used = 0;
};

// Per (b, key head) scratch of the backward: the states after each step of one chunk (C x K x V),
// dS (K x V), step vectors, and the fp32/fp64 dq, dk of the whole sequence summed over the group.
template <typename A>
struct BackwardScratch {
  A *states, *dS, *q, *k, *v, *d_o, *r, *du, *dr, *dq, *dk;
  explicit BackwardScratch(const Problem& p, A* base) {
    Carver<A> c(base);
    states = c.take(p.chunk * p.K * p.V);
    dS = c.take(p.K * p.V);
    q = c.take(p.K);
    k = c.take(p.K);
    v = c.take(p.V);
    d_o = c.take(p.V);
    r = c.take(p.V);
    du = c.take(p.V);
    dr = c.take(p.V);
    dq = c.take(p.T * p.K);
    dk = c.take(p.T * p.K);
    used = c.used();
  }
  int64_t used = 0;
};

template <typename T, typename A>
void load_vec(const T* src, int64_t n, A mul, A* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = mul * to_acc(src[i]);
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

}  // namespace

int64_t recurrent_forward_workspace(const Problem& p) {
  return p.B * p.HV * ForwardScratch<float>(p, nullptr).used;
}
int64_t recurrent_backward_workspace(const Problem& p) {
  return p.B * p.H * BackwardScratch<float>(p, nullptr).used;
}

template <typename T>
void recurrent_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) {
  using A = acc_t<T>;
  const int64_t K = p.K, V = p.V, C = p.chunk, NT = p.num_chunks(), KV = K * V;
  const int64_t per_slice = ForwardScratch<A>(p, nullptr).used;
  const A scale = A(p.scale);
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < p.B * p.HV; ++s) {
    const int64_t b = s / p.HV, hv = s % p.HV, h = hv / p.group();
    ForwardScratch<A> w(p, out.workspace + s * per_slice);
    if (p.has_h0) {
      std::memcpy(w.S, in.h0 + s * KV, KV * sizeof(A));
    } else {
      std::memset(w.S, 0, KV * sizeof(A));
    }
    for (int64_t t = 0; t < p.T; ++t) {
      if (t % C == 0) std::memcpy(out.residual + (s * NT + t / C) * KV, w.S, KV * sizeof(A));
      load_vec(in.q + qk_offset(p, b, t, h), K, scale, w.q);
      load_vec(in.k + qk_offset(p, b, t, h), K, A(1), w.k);
      load_vec(in.v + vo_offset(p, b, t, hv), V, A(1), w.v);
      const A alpha = std::exp(to_acc(in.g[gate_offset(p, b, t, hv)]));
      const A beta = to_acc(in.beta[gate_offset(p, b, t, hv)]);
      A* o = w.v;  // v is consumed before o is written
      step_forward(K, V, alpha, beta, w.q, w.k, w.v, w.S, w.u, o);
      store_rows(o, V, 1, V, A(1), out.o + vo_offset(p, b, t, hv), V);
    }
    if (p.want_ht) std::memcpy(out.ht + s * KV, w.S, KV * sizeof(A));
  }
}

template <typename T>
void recurrent_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) {
  using A = acc_t<T>;
  const int64_t K = p.K, V = p.V, C = p.chunk, NT = p.num_chunks(), KV = K * V;
  const int64_t per_slice = BackwardScratch<A>(p, nullptr).used;
  const A scale = A(p.scale);
#pragma omp parallel for schedule(static)
  for (int64_t kh = 0; kh < p.B * p.H; ++kh) {
    const int64_t b = kh / p.H, h = kh % p.H;
    BackwardScratch<A> w(p, args.workspace + kh * per_slice);
    std::memset(w.dq, 0, p.T * K * sizeof(A));
    std::memset(w.dk, 0, p.T * K * sizeof(A));
    for (int64_t hv = h * p.group(); hv < (h + 1) * p.group(); ++hv) {
      const int64_t s = b * p.HV + hv;
      if (args.dht) {
        std::memcpy(w.dS, args.dht + s * KV, KV * sizeof(A));
      } else {
        std::memset(w.dS, 0, KV * sizeof(A));
      }
      for (int64_t c = NT - 1; c >= 0; --c) {
        const int64_t t0 = c * C, len = std::min(C, p.T - t0);
        const A* S0 = args.residual + (s * NT + c) * KV;
        // Recompute the states after each step of this chunk: states[i] = S_{t0 + i}.
        for (int64_t i = 0; i < len; ++i) {
          const int64_t t = t0 + i;
          A* S = w.states + i * KV;
          std::memcpy(S, i == 0 ? S0 : S - KV, KV * sizeof(A));
          load_vec(in.q + qk_offset(p, b, t, h), K, scale, w.q);
          load_vec(in.k + qk_offset(p, b, t, h), K, A(1), w.k);
          load_vec(in.v + vo_offset(p, b, t, hv), V, A(1), w.v);
          const A alpha = std::exp(to_acc(in.g[gate_offset(p, b, t, hv)]));
          const A beta = to_acc(in.beta[gate_offset(p, b, t, hv)]);
          step_forward(K, V, alpha, beta, w.q, w.k, w.v, S, w.du, w.dr);
        }
        for (int64_t i = len - 1; i >= 0; --i) {
          const int64_t t = t0 + i;
          const A* S_prev = i == 0 ? S0 : w.states + (i - 1) * KV;
          const A* S_t = w.states + i * KV;
          load_vec(in.q + qk_offset(p, b, t, h), K, scale, w.q);
          load_vec(in.k + qk_offset(p, b, t, h), K, A(1), w.k);
          load_vec(in.v + vo_offset(p, b, t, hv), V, A(1), w.v);
          load_vec(args.d_o + vo_offset(p, b, t, hv), V, A(1), w.d_o);
          const A alpha = std::exp(to_acc(in.g[gate_offset(p, b, t, hv)]));
          const A beta = to_acc(in.beta[gate_offset(p, b, t, hv)]);
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
          const int64_t gi = gate_offset(p, b, t, hv);
          args.dbeta[gi] = from_acc<T>(dot(w.du, w.v, V));
          for (int64_t j = 0; j < V; ++j) w.dr[j] = -beta * w.du[j];
          store_rows(w.du, V, 1, V, beta, args.dv + vo_offset(p, b, t, hv), V);
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
      }
      if (p.has_h0) std::memcpy(args.dh0 + s * KV, w.dS, KV * sizeof(A));
    }
    for (int64_t t = 0; t < p.T; ++t) {
      store_rows(w.dq + t * K, K, 1, K, A(1), args.dq + qk_offset(p, b, t, h), K);
      store_rows(w.dk + t * K, K, 1, K, A(1), args.dk + qk_offset(p, b, t, h), K);
    }
  }
}

GDN_GDR_INSTANTIATE(recurrent)

}  // namespace gdn::gdr::detail
