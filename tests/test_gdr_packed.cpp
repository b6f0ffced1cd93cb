// Tests of packed sequences (Problem::cu_seqlens) in the CPU gated delta rule kernels: for every
// implementation and dtype, a packed call equals each sequence run alone from its own h0 row (o,
// ht and every gradient), and the fp64 recurrent reference of the sequences alone; one sequence
// equals the unpacked call bit for bit; fp64 finite differences through cu_seqlens (the autograd
// op); the largest head sizes (K = 256, V = 512); malformed cu_seqlens named by entry; sizes and
// determinism.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gated_delta_rule.h"
#include "kernels/gdr_registry.h"
#include "src/autograd/gradcheck.h"
#include "src/ops/gated_delta_rule.h"
#include "src/ops/ops.h"
#include "tests/gdr_test_data.h"
#include "tests/packed_case.h"

namespace gdn::gdr {
namespace {

using namespace test_data;

// cu_seqlens of sequences of these lengths.
std::vector<int64_t> offsets(const std::vector<int64_t>& lens) {
  std::vector<int64_t> cu{0};
  for (int64_t l : lens) cu.push_back(cu.back() + l);
  return cu;
}

// A packed Problem (B = 1) of these lengths.
Problem packed_problem(const std::vector<int64_t>& lens, int64_t H, int64_t HV, int64_t K,
                       int64_t V, int chunk, const Implementation& impl) {
  Problem p = problem_of(1, 0, H, HV, K, V, chunk, impl.impl);
  p.residual = impl.residual;
  p.cu_seqlens = offsets(lens);
  p.T = p.cu_seqlens.back();
  return p;
}

// Inputs of the B * T tokens with N = p.num_seqs() rows of h0 and dht.
Data packed_data(const Problem& p, uint64_t seed) {
  Data d = make_data(p, Gates::realistic, seed);
  Problem rows = p;
  rows.cu_seqlens.clear();
  rows.B = p.num_seqs();
  rows.T = 1;
  const Data states = make_data(rows, Gates::realistic, seed + 1);
  d.h0 = states.h0;
  d.dht = states.dht;
  return d;
}

Result run_as(const std::string& dtype, const Problem& p, const Data& d) {
  if (dtype == "f64") return run<double>(p, d);
  if (dtype == "f32") return run<float>(p, d);
  return run<bf16>(p, d);
}
Data seen_as(const std::string& dtype, const Data& d) {
  if (dtype == "f64") return d;
  if (dtype == "f32") return round_to<float>(d);
  return round_to<bf16>(d);
}

// [from, from + n) of x, rows of `row` elements.
Vec rows(const Vec& x, int64_t from, int64_t n, int64_t row) {
  if (x.empty()) return x;
  return Vec(x.begin() + from * row, x.begin() + (from + n) * row);
}
void put_rows(const Vec& part, int64_t from, int64_t row, Vec& x) {
  std::copy(part.begin(), part.end(), x.begin() + from * row);
}

// Each sequence of packed p run alone (an unpacked B = 1 Problem from its own h0 row, with its own
// dht row) by `runner`, the results placed where the packed call writes them.
Result alone(const Problem& p, const Data& d,
             const std::function<Result(const Problem&, const Data&)>& runner) {
  const Sequences s = sequences(p);
  const int64_t qk = p.H * p.K, vo = p.HV * p.V, gate = p.HV, state = p.HV * p.K * p.V;
  Result all = zeros_for(d);
  if (p.want_ht) all.ht.assign(d.h0.size(), 0);
  if (p.has_h0) all.dh0.assign(d.h0.size(), 0);
  for (int64_t n = 0; n < s.count(); ++n) {
    Problem one = p;
    one.cu_seqlens.clear();
    one.T = s.len(n);
    const int64_t t0 = s.token[n], len = s.len(n);
    Data x;
    x.q = rows(d.q, t0, len, qk);
    x.k = rows(d.k, t0, len, qk);
    x.v = rows(d.v, t0, len, vo);
    x.g = rows(d.g, t0, len, gate);
    x.beta = rows(d.beta, t0, len, gate);
    x.d_o = rows(d.d_o, t0, len, vo);
    x.h0 = rows(d.h0, n, 1, state);
    x.dht = rows(d.dht, n, 1, state);
    const Result r = runner(one, x);
    put_rows(r.o, t0, vo, all.o);
    put_rows(r.dq, t0, qk, all.dq);
    put_rows(r.dk, t0, qk, all.dk);
    put_rows(r.dv, t0, vo, all.dv);
    put_rows(r.dg, t0, gate, all.dg);
    put_rows(r.dbeta, t0, gate, all.dbeta);
    if (p.want_ht) put_rows(r.ht, n, state, all.ht);
    if (p.has_h0) put_rows(r.dh0, n, state, all.dh0);
  }
  return all;
}

// The fp64 reference of the sequences alone: the recurrent kernel (ssd: the ssd kernel, which
// test_gdr_kernels checks against a plain recurrence), on the values a `dtype` run sees.
Result reference_alone(const Problem& p, const Data& seen) {
  return alone(p, seen, [](const Problem& one, const Data& x) { return reference(one, x); });
}

struct PackedCase : PackedSizes {
  bool h0, dht;
};

// 70 sequences of 1 to 3 tokens.
std::vector<int64_t> tiny_lens() {
  std::vector<int64_t> lens;
  for (int i = 0; i < 70; ++i) lens.push_back(1 + i % 3);
  return lens;
}

const PackedCase kCases[] = {
    // Lengths 1 and 2 beside a chunk less one and two chunks and a bit; GVA.
    {"lens_1_63_2_130_gva", {1, 63, 2, 130}, 2, 4, 16, 24, 64, true, true},
    // Without initial or final states the sequences share chunks (the training case): several
    // sequences in one chunk, a sequence starting at a chunk's first row (64), sequences of 1.
    {"seven_primes_no_states", {5, 7, 11, 13, 17, 19, 23}, 1, 2, 12, 8, 32, false, false},
    {"lens_1_63_2_130_no_states", {1, 63, 2, 130}, 2, 4, 16, 24, 64, false, false},
    {"many_tiny_no_states", tiny_lens(), 2, 2, 8, 8, 16, false, false},
    {"chunk_aligned_no_states", {16, 8, 40}, 1, 2, 8, 8, 16, false, false},
    {"seven_primes_c16", {5, 7, 11, 13, 17, 19, 23}, 1, 1, 8, 16, 16, true, true},
    // 140 slices each way, more than detail::kScratchSets: slices share scratch sets in turn.
    {"many_tiny_shared_scratch", tiny_lens(), 2, 2, 8, 8, 16, true, true},
};

struct Variant {
  const char* impl;  // registry name
  const char* dtype;
};

class GdrPacked : public testing::TestWithParam<Variant> {};

// Packed = the sequences alone, same implementation and dtype, and = the fp64 reference within
// the parity tests' tolerance. With states each sequence has its own chunks: the same arithmetic
// up to GEMM blocking. Without, the sequences share chunks (masked at the boundaries): other
// chunk edges, so other roundings, and the two runs agree to the reference's tolerance.
TEST_P(GdrPacked, EqualsEachSequenceAlone) {
  const Variant var = GetParam();
  const Implementation& impl = find_implementation(var.impl);
  const std::string dtype = var.dtype;
  const double same_tol = dtype == "f64" ? 1e-12 : dtype == "f32" ? 1e-6 : 1e-2;
  const double ref_tol = dtype == "f64" ? 1e-10 : dtype == "f32" ? 1e-5 : 1e-2;
  const bool ssd = !impl.delta_rule;
  for (const PackedCase& c : kCases) {
    SCOPED_TRACE(c.name);
    Problem p = packed_problem(c.lens, c.H, c.HV, c.K, c.V, c.chunk, impl);
    p.has_h0 = c.h0;
    p.want_ht = c.dht;
    const Data d = packed_data(p, 40 + c.lens.size());
    const Result packed = run_as(dtype, p, d);
    const Result apart =
        alone(p, d, [&](const Problem& one, const Data& x) { return run_as(dtype, one, x); });
    const bool shared = !c.h0 && !c.dht && impl.name != std::string("recurrent");
    expect_close(packed, apart, shared ? ref_tol : same_tol, ssd, "packed vs alone");
    expect_close(packed, reference_alone(p, seen_as(dtype, d)), ref_tol, ssd,
                 "packed vs fp64 reference");
  }
}

// One sequence through cu_seqlens is the unpacked call, bit for bit, with and without states.
TEST_P(GdrPacked, OneSequenceIsTheUnpackedCall) {
  const Variant var = GetParam();
  const Implementation& impl = find_implementation(var.impl);
  for (const bool states : {true, false}) {  // own chunks; shared chunks
    Problem p = packed_problem({100}, 2, 4, 16, 8, 32, impl);
    p.has_h0 = p.want_ht = states;
    const Data d = packed_data(p, 9);
    Problem unpacked = p;
    unpacked.cu_seqlens.clear();
    const Result a = run_as(var.dtype, p, d), b = run_as(var.dtype, unpacked, d);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.ht, b.ht);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
    EXPECT_EQ(a.dg, b.dg);
    EXPECT_EQ(a.dbeta, b.dbeta);
    EXPECT_EQ(a.dh0, b.dh0);
  }
}

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (const char* dt : {"f64", "f32", "bf16"})
    for (const char* impl : {"recurrent", "chunked", "chunked_fat", "fused", "ssd"})
      out.push_back({impl, dt});
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, GdrPacked, testing::ValuesIn(all_variants()),
                         [](const testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.impl) + "_" + info.param.dtype;
                         });

// ---- the largest head sizes
// ----------------------------------------------------------------------

// K = 256, V = 512 (fla's default GatedDeltaNetConfig): every implementation, packed, against the
// fp64 recurrent reference of the sequences alone; in fp64 to the parity tests' 1e-10, in fp32 to
// 3e-5: dg sums K V = 131072 terms, whose fp32 rounding is about sqrt(K V) ulp = 2e-5.
TEST(GdrPackedLarge, MaxHeadSizes) {
  for (const Implementation& impl : implementations()) {
    SCOPED_TRACE(impl.name);
    Problem p = packed_problem({7, 20}, 1, 1, 256, 512, 16, impl);
    p.has_h0 = p.want_ht = true;
    const Data d = packed_data(p, 3);
    const bool ssd = !impl.delta_rule;
    expect_close(run<double>(p, d), reference_alone(p, d), 1e-10, ssd, "fp64");
    expect_close(run<float>(p, d), reference_alone(p, round_to<float>(d)), 3e-5, ssd, "fp32");
  }
}

// ---- fp64 finite differences through cu_seqlens
// ---------------------------------------------------

// d <o, R> + <ht, R'> / d (q, k, v, g, beta, h0) of the autograd op with cu_seqlens, C = 16,
// GVA, T = 24. With states (h0 of N rows, ht) each sequence has its own chunks; without, the
// sequences share chunks and the boundaries are masked inside them.
void gradcheck_packed(const std::vector<int64_t>& cu, bool with_states) {
  const int64_t T = cu.back(), N = int64_t(cu.size()) - 1;
  for (const Implementation& impl : implementations()) {
    ops::GdrOptions opt;
    opt.use(impl);
    opt.chunk_size = 16;
    opt.output_final_state = with_states;
    opt.cu_seqlens = cu;
    const bool ssd = !impl.delta_rule;
    Generator gen(11);
    auto input = [&](const Shape& s) {
      Tensor t = ops::randn(s, DType::float64, Device::cpu(), &gen);
      t.set_requires_grad(true);
      return t;
    };
    std::vector<Tensor> in = {input({1, T, 1, 4}), input({1, T, 1, 4}), input({1, T, 2, 3}),
                              input({1, T, 2}), input({1, T, 2})};
    std::vector<std::string> names = {"q", "k", "v", "g", "beta"};
    if (with_states) {
      in.push_back(input({N, 2, 4, 3}));
      names.push_back("h0");
    }
    if (ssd) in[4] = in[4].detach();  // unused by ssd
    autograd::MultiFn f = [opt, ssd, with_states](const std::vector<Tensor>& x) {
      // In the kernel's domain: unit keys, log decay <= 0 (strong enough to matter), beta in (0,
      // 1).
      Tensor k = ops::l2_norm(x[1], 1e-6);
      Tensor g = ops::mul(ops::neg(ops::softplus(x[3])), 2.0);
      auto r = ops::gated_delta_rule(x[0], k, x[2], g, ssd ? Tensor() : ops::sigmoid(x[4]), opt,
                                     with_states ? x[5] : Tensor());
      return with_states ? std::vector<Tensor>{r.o, r.ht} : std::vector<Tensor>{r.o};
    };
    const auto report = autograd::gradcheck(std::string("packed ") + impl.name, f, in, names,
                                            autograd::GradcheckOptions{});
    EXPECT_TRUE(report.ok()) << autograd::format_report({report});
  }
}

// Lengths 3, 17 (across a chunk edge) and 4: boundaries at rows 3 and 4 of the two chunks.
TEST(GdrPackedGradcheck, ThroughTheOp) {
  gradcheck_packed({0, 3, 20, 24}, true);
}
TEST(GdrPackedGradcheck, SharedChunks) {
  gradcheck_packed({0, 3, 20, 24}, false);
  gradcheck_packed({0, 16, 17, 30}, false);  // a sequence starts at a chunk's first row
}

// ---- malformed cu_seqlens
// ------------------------------------------------------------------------

// validate(p with cu_seqlens = cu, B) throws naming `needle`.
void expect_refused(const std::vector<int64_t>& cu, int64_t B, const std::string& needle) {
  Problem p = problem_of(B, 10, 1, 1, 8, 8, 16, Impl::chunked);
  p.cu_seqlens = cu;
  try {
    validate(p);
    ADD_FAILURE() << "accepted cu_seqlens, expected a message with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cu_seqlens"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(GdrPackedValidate, RefusesMalformedOffsetsNamingTheEntry) {
  expect_refused({1, 5, 10}, 1, "cu_seqlens[0] = 1");     // not starting at 0
  expect_refused({0, 6, 4, 10}, 1, "cu_seqlens[2] = 4");  // decreasing
  expect_refused({0, 5, 5, 10}, 1, "cu_seqlens[2] = 5");  // equal neighbours (empty sequence)
  expect_refused({0, 5, 9}, 1, "cu_seqlens[2] = 9");      // not ending at T = 10
  expect_refused({0, 5, 11}, 1, "T = 10");                // past T
  expect_refused({0, 5, 10}, 2, "B must be 1, got 2");    // B > 1
  expect_refused({0}, 1, "at least 2 entries");           // no sequence
  Problem good = problem_of(1, 10, 1, 1, 8, 8, 16, Impl::chunked);
  good.cu_seqlens = {0, 5, 10};
  EXPECT_NO_THROW(validate(good));
  // The entry points validate too.
  good.cu_seqlens = {0, 5, 5, 10};
  EXPECT_THROW(forward_cpu(good, Inputs<float>{}, ForwardOutputs<float>{}), std::invalid_argument);
}

TEST(GdrPackedValidate, OpNamesStateRows) {
  ops::GdrOptions opt;
  opt.cu_seqlens = {0, 4, 10};
  const auto x = [](const Shape& s) { return ops::zeros(s, DType::float32, Device::cpu()); };
  Tensor q = x({1, 10, 1, 8}), v = x({1, 10, 1, 8}), g = x({1, 10, 1});
  try {
    ops::gated_delta_rule(q, q, v, g, g, opt,
                          ops::zeros({1, 1, 8, 8}, DType::float32, Device::cpu()));
    ADD_FAILURE() << "accepted h0 of 1 row for 2 sequences";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("N sequences in cu_seqlens"), std::string::npos)
        << e.what();
  }
}

// The value head limits: V = 512 runs, V = 513 and K = 257 are refused naming the value and limit.
TEST(GdrPackedValidate, HeadSizeLimits) {
  Problem p = problem_of(1, 10, 1, 1, 256, 512, 64, Impl::fused);
  EXPECT_NO_THROW(validate(p));
  p.V = 513;
  EXPECT_THROW(validate(p), std::invalid_argument);
  try {
    validate(p);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("V = 513"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  p.V = 512;
  p.K = 257;
  try {
    validate(p);
    ADD_FAILURE() << "accepted K = 257";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("K = 257"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
}

// ---- sizes and determinism
// -------------------------------------------------------------------------

TEST(GdrPackedSizes, ChunksPerSequence) {
  Problem p = packed_problem({1, 63, 2, 130}, 2, 4, 16, 24, 64, find_implementation("chunked"));
  EXPECT_EQ(p.num_seqs(), 4);
  EXPECT_EQ(p.total_chunks(), 1 + 1 + 1 + 3);  // each sequence chunked from its own first token
  const Sequences s = sequences(p);
  EXPECT_EQ(s.token, (std::vector<int64_t>{0, 1, 64, 66, 196}));
  EXPECT_EQ(s.chunk, (std::vector<int64_t>{0, 1, 2, 3, 6}));
  EXPECT_EQ(residual_elems(p), p.HV * 6 * p.K * p.V);
  p.residual = Residual::full;
  EXPECT_EQ(residual_elems(p), p.HV * 6 * (p.K * p.V + 64 * 64 + 64 * (p.K + p.V)));
  // With states the fused kernels' scratch is per slice: N sequences take N times one
  // sequence's.
  p.impl = Impl::fused;
  p.has_h0 = true;
  Problem one = p;
  one.cu_seqlens.clear();
  one.T = 130;
  EXPECT_EQ(forward_workspace_elems(p), 4 * forward_workspace_elems(one));
  EXPECT_EQ(backward_workspace_elems(p), 4 * backward_workspace_elems(one));
  // Beyond 128 slices they share 128 scratch sets: 1000 one-token sequences (4000 value and 2000
  // key slices) take what 32 sequences do.
  for (Impl impl : {Impl::recurrent, Impl::fused, Impl::ssd}) {
    Problem many = packed_problem(std::vector<int64_t>(1000, 1), 2, 4, 16, 24, 64,
                                  find_implementation(impl_name(impl)));
    Problem some = packed_problem(std::vector<int64_t>(32, 1), 2, 4, 16, 24, 64,
                                  find_implementation(impl_name(impl)));
    many.has_h0 = some.has_h0 = true;
    EXPECT_EQ(forward_workspace_elems(many), forward_workspace_elems(some)) << impl_name(impl);
    some.cu_seqlens = offsets(std::vector<int64_t>(64, 1));
    some.T = 64;
    EXPECT_EQ(backward_workspace_elems(many), backward_workspace_elems(some)) << impl_name(impl);
  }
}

// Without states the chunk-based CPU kernels chunk the row as one sequence: their scratch is
// the unpacked row's, however many sequences it holds.
TEST(GdrPackedSizes, SharedChunksTakeTheUnpackedScratch) {
  for (const char* name : {"chunked", "chunked_fat", "fused", "ssd"}) {
    Problem p =
        packed_problem(std::vector<int64_t>(64, 16), 2, 4, 16, 24, 64, find_implementation(name));
    Problem row = p;
    row.cu_seqlens.clear();
    EXPECT_EQ(forward_workspace_elems(p), forward_workspace_elems(row)) << name;
    EXPECT_EQ(backward_workspace_elems(p), backward_workspace_elems(row)) << name;
    p.has_h0 = true;  // with states: per-sequence chunks, 64 chunks instead of 16
    EXPECT_GT(forward_workspace_elems(p), forward_workspace_elems(row)) << name;
  }
}

TEST(GdrPackedDeterminism, SameBitsAcrossThreadCounts) {
  const int threads = omp_get_max_threads();
  for (const Implementation& impl : implementations())
    for (const bool states : {true, false}) {  // own chunks; shared chunks
      Problem p = packed_problem({5, 40, 1, 33}, 2, 4, 16, 16, 16, impl);
      p.has_h0 = p.want_ht = states;
      const Data d = packed_data(p, 21);
      omp_set_num_threads(1);
      const Result one = run<float>(p, d);
      omp_set_num_threads(std::max(2, threads));
      const Result many = run<float>(p, d);
      omp_set_num_threads(threads);
      EXPECT_EQ(many.o, one.o) << impl.name;
      EXPECT_EQ(many.ht, one.ht) << impl.name;
      EXPECT_EQ(many.dq, one.dq) << impl.name;
      EXPECT_EQ(many.dk, one.dk) << impl.name;
      EXPECT_EQ(many.dg, one.dg) << impl.name;
      EXPECT_EQ(many.dh0, one.dh0) << impl.name;
    }
}

}  // namespace
}  // namespace gdn::gdr
