// The chunk buffers of one slice that both chunked Kimi Delta Attention kernels carve, in the same
// order (kernels/cpu/kda_chunked.cpp, kernels/cuda/kda_chunked.cu; docs/design.md 4.11): the
// state, the chunk's C-row tiles and, for the backward, its gradients and the group's dq, dk sums
// over the sequence. Each kernel carves its own gated-form scratch between the two.
#pragma once
#include <cstdint>

#include "kernels/gdr_workspace_layout.h"  // Carver
#include "kernels/numeric.h"

namespace gdn::kda::detail {

template <typename A>
struct ChunkBuffers {
  A* S = nullptr;                                   // K x V running state / dS
  A *q = nullptr, *k, *G, *gam, *e, *qg, *kg, *ke;  // C x K
  A* gl;                                            // K: Gam of the chunk's last row
  A *v, *x, *u;                                     // C x V: Y (in v), diag(beta) Y, U
  A* beta;                                          // C
  A *abar, *p, *m;                                  // C x C
  A *d_o = nullptr, *du = nullptr, *dx = nullptr;   // backward
  A *dp = nullptr, *da = nullptr, *dq = nullptr, *dk = nullptr, *dG = nullptr, *t = nullptr;
  A *dq_sum = nullptr, *dk_sum = nullptr;  // T x K: the group's sums over the sequence

  // The forward's buffers, first in the scratch.
  GDN_HD void carve_forward(gdr::detail::Carver<A*>& c, int64_t C, int64_t K, int64_t V) {
    S = c.take(K * V);
    c.take_each(C * K, q, k, G, gam, e, qg, kg, ke);
    gl = c.take(K);
    c.take_each(C * V, v, x, u);
    beta = c.take(C);
    c.take_each(C * C, abar, p, m);
  }
  // The backward's, last (T: the longest sequence).
  GDN_HD void carve_backward(gdr::detail::Carver<A*>& c, int64_t C, int64_t K, int64_t V,
                             int64_t T) {
    c.take_each(C * V, d_o, du, dx);
    c.take_each(C * C, dp, da);
    c.take_each(C * K, dq, dk, dG, t);
    c.take_each(T * K, dq_sum, dk_sum);
  }
};

}  // namespace gdn::kda::detail
