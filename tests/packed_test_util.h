// Packed sequences (Problem::cu_seqlens) for the kernel tests (test_fused_emulation,
// test_cuda_packed): a packed Problem from sequence lengths, its test data (h0, dht with one row
// per sequence), and the reference the packed kernels must equal: each sequence run alone,
// unpacked, by the CPU fp64 kernels (recurrent; ssd for ssd), its outputs placed at the sequence's
// tokens and rows. The reference calls the CPU kernels through the registry without validate(), so
// it covers head dims the entry points do not take yet (V = 512).
#pragma once
#include <numeric>
#include <random>
#include <vector>

#include "kernels/gdr_registry.h"
#include "kernels/gdr_split.h"
#include "tests/gdr_test_data.h"

namespace gdn::gdr::test_data {

// B = 1 and cu_seqlens from the lengths; h0 given and ht wanted unless told otherwise.
inline Problem packed_problem(const std::vector<int64_t>& lens, int64_t H, int64_t HV, int64_t K,
                              int64_t V, int chunk, Impl impl, bool state_io = true) {
  const int64_t T = std::accumulate(lens.begin(), lens.end(), int64_t(0));
  Problem p = problem_of(1, T, H, HV, K, V, chunk, impl);
  p.cu_seqlens.assign(1, 0);
  for (int64_t len : lens) p.cu_seqlens.push_back(p.cu_seqlens.back() + len);
  p.has_h0 = p.want_ht = state_io;
  return p;
}

// make_data over the packed row, with h0 and dht of one row per sequence.
inline Data make_packed_data(const Problem& p, Gates gates, uint64_t seed) {
  Data d = make_data(p, gates, seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<double> n01(0, 1);
  const int64_t states = p.num_seqs() * p.HV * p.K * p.V;
  d.h0.resize(states);
  d.dht.resize(states);
  for (auto& x : d.h0) x = 0.5 * n01(rng);
  for (auto& x : d.dht) x = n01(rng);
  return d;
}

// [from, from + n) of x.
inline Vec slice(const Vec& x, int64_t from, int64_t n) {
  return Vec(x.begin() + from, x.begin() + from + n);
}

// The CPU fp64 kernel of p.impl (recurrent for every delta-rule implementation, ssd for ssd) on
// one unpacked Problem, through the registry without validate().
inline Result reference_unchecked(Problem p, const Data& d) {
  p.impl = p.impl == Impl::ssd ? Impl::ssd : Impl::recurrent;
  p.residual = Residual::minimal;
  const Implementation& impl = implementation_of(p);
  const CpuKernels::Pair<double>& k = impl.cpu.of<double>();
  return run_fp64(p, d, impl.residual_elems(p), impl.cpu_forward_workspace(p),
                  impl.cpu_backward_workspace(p), k.forward, k.backward);
}

// Each sequence of packed p run alone, unpacked, by run(one, its data) -> Result, the results
// placed as the packed kernels write them: outputs and gradients at its tokens, ht and dh0 in its
// rows.
template <class Run>
Result by_sequence(const Problem& p, const Data& d, const Run& run) {
  const Sequences s = sequences(p);
  const int64_t HK = p.H * p.K, HVV = p.HV * p.V, KV = p.K * p.V, N = s.count();
  Result r;
  r.o.resize(d.v.size());
  r.ht.resize(p.want_ht ? N * p.HV * KV : 0);
  r.dq.resize(d.q.size());
  r.dk.resize(d.k.size());
  r.dv.resize(d.v.size());
  r.dg.resize(d.g.size());
  r.dbeta.resize(d.g.size());
  r.dh0.resize(p.has_h0 ? N * p.HV * KV : 0);
  const auto place = [](const Vec& part, Vec& whole, int64_t at) {
    std::copy(part.begin(), part.end(), whole.begin() + at);
  };
  for (int64_t n = 0; n < N; ++n) {
    const Problem one = detail::sequence_problem(p, s, n);
    const int64_t t0 = s.token[n], len = s.len(n), state = n * p.HV * KV;
    Data dn;
    dn.q = slice(d.q, t0 * HK, len * HK);
    dn.k = slice(d.k, t0 * HK, len * HK);
    dn.v = slice(d.v, t0 * HVV, len * HVV);
    dn.d_o = slice(d.d_o, t0 * HVV, len * HVV);
    dn.g = slice(d.g, t0 * p.HV, len * p.HV);
    dn.beta = slice(d.beta, t0 * p.HV, len * p.HV);
    dn.h0 = slice(d.h0, state, p.HV * KV);
    dn.dht = slice(d.dht, state, p.HV * KV);
    const Result rn = run(one, dn);
    place(rn.o, r.o, t0 * HVV);
    if (p.want_ht) place(rn.ht, r.ht, state);
    place(rn.dq, r.dq, t0 * HK);
    place(rn.dk, r.dk, t0 * HK);
    place(rn.dv, r.dv, t0 * HVV);
    place(rn.dg, r.dg, t0 * p.HV);
    place(rn.dbeta, r.dbeta, t0 * p.HV);
    if (p.has_h0) place(rn.dh0, r.dh0, state);
  }
  return r;
}

// The reference: each sequence alone through the CPU fp64 kernels (reference_unchecked).
inline Result reference_by_sequence(const Problem& p, const Data& d) {
  return by_sequence(p, d, reference_unchecked);
}

// The packed lengths every packed test runs: sequences of 1 and 2 tokens, one longer than two
// chunks of 64, lengths that are no multiple of any chunk; many short sequences.
inline const std::vector<int64_t> kMixedLens = {1, 63, 2, 130};
inline const std::vector<int64_t> kShortLens = {5, 7, 11, 13, 17, 19, 23};

}  // namespace gdn::gdr::test_data
