// Host-side workspace layouts of the gated delta rule, shared by the CPU kernels
// (kernels/cpu/gdr_*.cpp) and the CUDA kernels (kernels/cuda/gdr_*): the carver that cuts a buffer
// into 16-element-aligned pieces, the residual's pieces, and the layouts that both sides carve the
// same way (the chunked buffers, the recurrent and ssd per-slice scratch). A layout written once
// sizes the workspace (base == nullptr) and carves it, on either side.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/gated_delta_rule.h"
#include "kernels/numeric.h"

namespace gdn::gdr::detail {

GDN_HD int64_t round_up16(int64_t n) {
  return (n + 15) / 16 * 16;
}

// Hands out consecutive pieces of a buffer, each rounded up to 16 elements (64-byte steps).
// Slot = A*: pointers into base; with base == nullptr it only counts, so one function both sizes
// and carves a workspace. Slot = int64_t: offsets from base (for device code, which adds its own
// pointer: a block's shared memory or its slice of the workspace).
template <typename Slot>
class Carver {
 public:
  GDN_HD explicit Carver(Slot base = Slot()) : base_(base) {}

  // The next n elements.
  GDN_HD Slot take(int64_t n) {
    const Slot at = next();
    used_ += round_up16(n);
    return at;
  }
  // The next n elements for each of `slots`, in order.
  template <typename... Slots>
  GDN_HD void take_each(int64_t n, Slots&... slots) {
    ((slots = take(n)), ...);
  }
  GDN_HD int64_t used() const { return used_; }

 private:
  GDN_HD Slot next() const {
    if constexpr (std::is_pointer<Slot>::value) {
      return base_ ? base_ + used_ : nullptr;
    } else {
      return base_ + used_;
    }
  }

  Slot base_;
  int64_t used_ = 0;
};

// The chunk-start states [B, HV, NT, K, V] that every implementation saves first in the residual
// (packed: HV states for each of the total_chunks() chunks).
inline int64_t states_elems(const Problem& p) {
  return p.HV * p.total_chunks() * p.K * p.V;
}
// The `full` policy of `chunked` appends A [B, HV, NT, C, C] and [W | U] [B, HV, NT, C, K + V].
inline int64_t full_a_elems(const Problem& p) {
  return p.HV * p.total_chunks() * p.chunk * p.chunk;
}
inline int64_t full_wu_elems(const Problem& p) {
  return p.HV * p.total_chunks() * p.chunk * (p.K + p.V);
}

// Where the tile of chunk c of sequence n, head h of `heads`, sits in a buffer of per-chunk tiles
// laid out [sequence][head][chunk] (sequence n's chunks start at chunk_start = Sequences::chunk[n]
// and number chunks_n). Without packing this is [B][heads][NT]: ((n heads + h) NT + c).
GDN_HD int64_t chunk_tile(int64_t chunk_start, int64_t chunks_n, int64_t heads, int64_t h,
                          int64_t c) {
  return chunk_start * heads + h * chunks_n + c;
}

// Who carves the chunked buffers: the CUDA kernels keep Vn in tiles of its own under either
// residual policy (the CPU writes it over the U columns of [W | U] under `minimal`), and their
// backward keeps T1, X, dG and s of every chunk (the CPU's live on the stack of one chunk).
enum class ChunkedSide { cpu, cuda };

// The chunked implementation's buffers (kernels/cpu/gdr_chunked.cpp, kernels/cuda/gdr_chunked*).
// Every buffer is [slice][NT][chunk tile]: value slices (b, hv) unless noted as key slices (b, h).
// The `full` residual is the same on both sides: the states, then A, then [W | U].
template <typename A>
struct ChunkedLayout {
  // forward and recompute
  A *kq = nullptr,
    *kqk = nullptr;  // key slices: [k; scale q] (2C x K), [KK; QK] (2C x C)
  A *v = nullptr, *G = nullptr, *gamma = nullptr, *e = nullptr,
    *beta = nullptr;              // C x V, C each
  A *a = nullptr, *p = nullptr;   // A, P (C x C)
  A *x = nullptr, *wu = nullptr;  // [Xw | Xu], [W | U] (C x (K + V))
  A *qg = nullptr, *ke = nullptr,
    *vn = nullptr;  // gamma Q, e K (C x K), Vn (C x V, ld_vn)
  // backward only
  A *d_o = nullptr, *gam = nullptr;      // dO, Gam
  A* dqk = nullptr;                      // [dQ; dK] of one value head
  A *dSloc = nullptr, *dSend = nullptr;  // K x V each
  A *dwu = nullptr, *dpb = nullptr;      // [dW | dU]; [dP (then dPG); Bsym]
  A* da = nullptr;                       // dA (then dM)
  A *t1 = nullptr, *xg = nullptr, *dG = nullptr,
    *s = nullptr;     // ChunkedSide::cuda only
  int64_t ld_vn = 0;  // K + V where Vn overwrites U, else V
  int64_t used = 0;

  ChunkedLayout(const Problem& pr, A* ws, A* residual, bool backward, ChunkedSide side) {
    const int64_t C = pr.chunk, K = pr.K, V = pr.V, NC = pr.total_chunks();
    const int64_t nk = pr.H * NC, nv = pr.HV * NC;  // key / value chunks
    const bool full = pr.residual == Residual::full;
    Carver<A*> c(ws);
    kq = c.take(nk * 2 * C * K);
    kqk = c.take(nk * 2 * C * C);
    v = c.take(nv * C * V);
    c.take_each(nv * C, G, gamma, e, beta);
    if (full) {
      a = residual ? residual + states_elems(pr) : nullptr;
      wu = residual ? a + full_a_elems(pr) : nullptr;
    } else {
      a = c.take(nv * C * C);
      wu = c.take(nv * C * (K + V));
    }
    p = c.take(nv * C * C);
    x = c.take(nv * C * (K + V));
    c.take_each(nv * C * K, qg, ke);
    if (full || side == ChunkedSide::cuda) {
      vn = c.take(nv * C * V);
      ld_vn = V;
    } else {
      vn = wu ? wu + K : nullptr;
      ld_vn = K + V;
    }
    if (backward) {
      d_o = c.take(nv * C * V);
      gam = c.take(nv * C * C);
      dqk = c.take(nv * 2 * C * K);
      c.take_each(nv * K * V, dSloc, dSend);
      dwu = c.take(nv * C * (K + V));
      dpb = c.take(nv * 2 * C * C);
      da = c.take(nv * C * C);
      if (side == ChunkedSide::cuda) {
        c.take_each(nv * C * C, t1, xg);
        c.take_each(nv * C, dG, s);
      }
    }
    used = c.used();
  }
};

// The recurrent implementation's scratch of one slice (kernels/cpu/gdr_recurrent.cpp; the CUDA
// backward, kernels/cuda/gdr_recurrent.cu, carves its per-key-slice workspace the same way, as
// offsets, without the step vectors, which it keeps in shared memory).
// Forward, per (b, value head): S (K x V) and the step vectors q, k (K), v, u (V).
// Backward, per (b, key head): the states after each step of one chunk (C x K x V), dS (K x V),
// the step vectors q, k, v, d_o, r, du, dr, and the fp32/fp64 dq, dk of the whole sequence summed
// over the group.
template <typename Slot>
struct RecurrentScratch {
  Slot S{}, u{};                               // forward
  Slot states{}, dS{}, dq{}, dk{};             // backward
  Slot q{}, k{}, v{}, d_o{}, r{}, du{}, dr{};  // step vectors (d_o, r, du, dr: backward)
  int64_t used = 0;
  RecurrentScratch(const Problem& p, Slot base, bool backward, bool step_vectors = true) {
    Carver<Slot> c(base);
    if (!backward) {
      S = c.take(p.K * p.V);
      c.take_each(p.K, q, k);
      c.take_each(p.V, v, u);
    } else {
      states = c.take(p.chunk * p.K * p.V);
      dS = c.take(p.K * p.V);
      if (step_vectors) {
        c.take_each(p.K, q, k);
        c.take_each(p.V, v, d_o, r, du, dr);
      }
      c.take_each(p.T * p.K, dq, dk);
    }
    used = c.used();
  }
};

// The ssd implementation's scratch of one slice: forward per (b, value head), backward per
// (b, key head) with one chunk of one value head at a time (kernels/cpu/gdr_ssd.cpp; the CUDA
// backward, kernels/cuda/gdr_ssd.cu, carves the same, as offsets into its workspace).
template <typename Slot>
struct SsdScratch {
  Slot kq{}, qk{}, dqk{};  // [k; scale q], Q K^T (later P), [dQ; dK] sums over the group
  Slot v{}, d_o{}, G{}, gamma{}, e{}, dG{}, s{}, gam{}, p{}, qg{}, ke{}, o{}, DS{}, dv{}, dp{},
      xg{}, col{}, tmp{}, dS_new{};
  Slot S{}, dS{};  // S (forward) / dS' of every value head of the group (backward)
  int64_t used = 0;
  SsdScratch(const Problem& pr, Slot base, bool backward) {
    const int64_t C = pr.chunk, K = pr.K, V = pr.V;
    Carver<Slot> c(base);
    kq = c.take(2 * C * K);
    qk = c.take(C * C);
    v = c.take(C * V);
    c.take_each(C, G, gamma, e);
    qg = c.take(C * K);
    if (!backward) {
      o = c.take(C * V);
      S = c.take(K * V);
    } else {
      dqk = c.take(2 * C * K);
      d_o = c.take(C * V);
      c.take_each(C, dG, s);
      c.take_each(C * C, gam, p);
      c.take_each(C * K, ke, DS);
      dv = c.take(C * V);
      c.take_each(C * C, dp, xg);
      col = c.take(C);
      tmp = c.take(C * K);
      dS_new = c.take(K * V);
      dS = c.take(pr.group() * K * V);
    }
    used = c.used();
  }
};

}  // namespace gdn::gdr::detail
