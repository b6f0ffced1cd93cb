// The rows of the op-case table (src/ops/op_cases.h). First the gradient-check cases: small
// shapes, each also compared CUDA against CPU. Then cases for CUDA against CPU only, at the
// shapes that reach each kernel's paths (short and long rows, permuted dims, ties, every GEMM
// layout, many tokens, many rows), which fp64 finite differences would make slow.
#include <string>
#include <utility>

#include "kernels/gdr_registry.h"
#include "kernels/kda.h"
#include "src/ops/attention.h"
#include "src/ops/gated_delta_rule.h"
#include "src/ops/kimi_delta_rule.h"
#include "src/ops/linear_cross_entropy.h"
#include "src/ops/op_cases.h"
#include "src/ops/ops.h"
#include "src/ops/rope.h"

namespace gdn::ops {

namespace {

using In = InputSpec;
using Cases = std::vector<OpCase>;

const std::vector<DType> kFp32AndBf16 = {DType::float32, DType::bfloat16};
const std::vector<DType> kEveryFloat = {DType::float32, DType::float64, DType::bfloat16,
                                        DType::float16};

// fp64 finite differences, and CUDA against CPU in fp32 and bf16.
void add_checked(Cases& cases, std::string name, std::vector<InputSpec> inputs, OpCase::Fn fn) {
  cases.push_back({std::move(name), std::move(inputs), std::move(fn), true, kFp32AndBf16});
}

// Appends cases compared CUDA against CPU only, all at `dtypes` and within `tolerance`.
struct ParityRows {
  Cases& cases;
  std::vector<DType> dtypes;
  Tolerance tolerance = kReorderedSums;
  void add(std::string name, std::vector<InputSpec> inputs, OpCase::Fn fn) const {
    cases.push_back({std::move(name), std::move(inputs), std::move(fn), false, dtypes, tolerance});
  }
};

// The `gdn gradcheck --op` names, at sizes small enough for fp64 finite differences.
void add_gradcheck_cases(Cases& c) {
  add_checked(c, "add", {In::normal({3, 4}), In::normal({4})},
              [](auto& x) { return add(x[0], x[1]); });
  add_checked(c, "sub", {In::normal({2, 1, 3}), In::normal({4, 1})},
              [](auto& x) { return sub(x[0], x[1]); });
  add_checked(c, "mul", {In::normal({2, 3}), In::normal({2, 1})},
              [](auto& x) { return mul(x[0], x[1]); });
  add_checked(c, "div", {In::away_from_zero({3, 2}), In::away_from_zero({3, 2})},
              [](auto& x) { return div(x[0], x[1]); });
  add_checked(c, "affine", {In::normal({5})}, [](auto& x) { return affine(x[0], -1.5, 0.25); });
  add_checked(c, "pow", {In::positive({5})}, [](auto& x) { return pow(x[0], 2.5); });
  add_checked(c, "exp", {In::normal({6})}, [](auto& x) { return exp(x[0]); });
  add_checked(c, "log", {In::positive({6})}, [](auto& x) { return log(x[0]); });
  add_checked(c, "sigmoid", {In::normal({6})}, [](auto& x) { return sigmoid(x[0]); });
  add_checked(c, "silu", {In::normal({6})}, [](auto& x) { return silu(x[0]); });
  add_checked(c, "softplus", {In::normal({6})}, [](auto& x) { return softplus(mul(x[0], 3.0)); });
  add_checked(c, "rsqrt", {In::positive({6})}, [](auto& x) { return rsqrt(x[0]); });
  add_checked(c, "sqrt", {In::positive({6})}, [](auto& x) { return sqrt(x[0]); });
  add_checked(c, "square", {In::normal({6})}, [](auto& x) { return square(x[0]); });
  add_checked(c, "tanh", {In::normal({6})}, [](auto& x) { return tanh(x[0]); });
  add_checked(c, "abs", {In::away_from_zero({6})}, [](auto& x) { return abs(x[0]); });
  add_checked(c, "sum", {In::normal({2, 3, 4})}, [](auto& x) { return sum(x[0], {0, 2}); });
  add_checked(c, "sum_keepdim", {In::normal({2, 3, 4})},
              [](auto& x) { return sum(x[0], {1}, true); });
  add_checked(c, "mean", {In::normal({2, 3, 4})}, [](auto& x) { return mean(x[0], {-1}); });
  add_checked(c, "max", {In::normal({3, 5})}, [](auto& x) { return max(x[0], 1); });
  add_checked(c, "matmul", {In::normal({3, 4}), In::normal({4, 5})},
              [](auto& x) { return matmul(x[0], x[1]); });
  add_checked(c, "matmul_batched", {In::normal({2, 3, 4}), In::normal({4, 2})},
              [](auto& x) { return matmul(x[0], x[1]); });
  add_checked(c, "matmul_transposed", {In::normal({4, 3}), In::normal({2, 5, 4})},
              [](auto& x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 1, 2)); });
  add_checked(c, "linear", {In::normal({2, 3, 4}), In::normal({5, 4}), In::normal({5})},
              [](auto& x) { return linear(x[0], x[1], x[2]); });
  add_checked(c, "softmax", {In::normal({3, 5})}, [](auto& x) { return softmax(x[0], -1); });
  add_checked(c, "softmax_dim0", {In::normal({3, 5})}, [](auto& x) { return softmax(x[0], 0); });
  add_checked(c, "log_softmax", {In::normal({3, 5})},
              [](auto& x) { return log_softmax(x[0], -1); });
  add_checked(c, "cross_entropy", {In::normal({4, 7}), In::fixed({3, -100, 0, 6}, {4})},
              [](auto& x) { return cross_entropy(x[0], x[1], -100); });
  add_checked(c, "linear_cross_entropy",
              {In::normal({7, 4}), In::normal({5, 4}), In::fixed({3, -100, 0, 4, 1, 1, 2}, {7})},
              [](auto& x) {
                return linear_cross_entropy(x[0], x[1], x[2], -100, 3);  // chunks of 3, 3, 1 rows
              });
  add_checked(c, "embedding",
              {In::normal({5, 3}), In::fixed({4, 0, 4, 2, 1, 4}, {2, 3}, DType::int32)},
              [](auto& x) { return embedding(x[0], x[1]); });
  add_checked(c, "rms_norm", {In::normal({3, 6}), In::normal({6})},
              [](auto& x) { return rms_norm(x[0], x[1], 1e-6); });
  add_checked(c, "l2_norm", {In::normal({2, 3, 5})}, [](auto& x) { return l2_norm(x[0], 1e-6); });
  add_checked(c, "causal_conv1d", {In::normal({2, 5, 3}), In::normal({3, 1, 4})},
              [](auto& x) { return causal_conv1d(x[0], x[1]); });
  // The fused layer ops (src/ops/fused.cpp): every input, and both outputs of add_rms_norm.
  add_checked(c, "causal_conv1d_silu", {In::normal({2, 5, 3}), In::normal({3, 1, 4})},
              [](auto& x) { return causal_conv1d_silu(x[0], x[1]); });
  add_checked(c, "causal_conv1d_silu_packed", {In::normal({1, 9, 3}), In::normal({3, 4})},
              [](auto& x) {
                return causal_conv1d_silu(x[0], x[1], {0, 2, 3, 9});
              });
  add_checked(c, "causal_conv1d_silu_l2norm", {In::normal({2, 5, 6}), In::normal({6, 1, 4})},
              [](auto& x) { return causal_conv1d_silu_l2norm(x[0], x[1], 3, 1e-6); });
  add_checked(c, "causal_conv1d_silu_l2norm_packed", {In::normal({1, 9, 4}), In::normal({4, 3})},
              [](auto& x) {
                return causal_conv1d_silu_l2norm(x[0], x[1], 2, 1e-6, {0, 2, 3, 9});
              });
  add_checked(c, "swiglu", {In::normal({3, 5}), In::normal({3, 5})},
              [](auto& x) { return swiglu(x[0], x[1]); });
  for (bool sig : {false, true})
    add_checked(c, sig ? "gated_rms_norm_sigmoid" : "gated_rms_norm_silu",
                {In::normal({2, 2, 6}), In::normal({6}), In::normal({2, 2, 6})},
                [sig](auto& x) { return gated_rms_norm(x[0], x[1], x[2], 1e-6, sig); });
  add_checked(c, "add_rms_norm", {In::normal({3, 6}), In::normal({3, 6}), In::normal({6})},
              [](auto& x) {
                auto [h, y] = add_rms_norm(x[0], x[1], x[2], 1e-6);
                return concat({h, y}, 0);
              });
  add_checked(c, "views", {In::normal({2, 3, 4})}, [](auto& x) {
    Tensor a = permute(x[0], {2, 0, 1});            // [4, 2, 3]
    Tensor b = slice(reshape(a, {8, 3}), 0, 2, 7);  // [5, 3]
    Tensor sums = expand(unsqueeze(sum(b, {0}), 0), {2, 3});
    return concat({b, sums, reshape(transpose(slice(a, 0, 0, 1), 1, 2), {2, 3})}, 0);
  });
}

// Softmax attention (full causal, sliding window, GQA, packed sequences) and rotary embeddings
// (plain, with a position offset, packed): fp64 finite differences, and CUDA against CPU (the
// CUDA kernels, kernels/cuda/attention.cu and rope.cu).
void add_attention_cases(Cases& c) {
  auto attn = [](AttentionOptions opt) {
    return [opt](auto& x) { return attention(x[0], x[1], x[2], opt); };
  };
  const In q = In::normal({2, 7, 2, 4}), kv = In::normal({2, 7, 2, 4});
  add_checked(c, "attention", {q, kv, kv}, attn({}));
  add_checked(c, "attention_window", {q, kv, kv}, attn({3, {}, {}}));
  const In q4 = In::normal({1, 9, 4, 3}), kv2 = In::normal({1, 9, 2, 3});
  add_checked(c, "attention_gqa", {q4, kv2, kv2}, attn({0, 0.7, {}}));
  // Sequences of 2, 1 and 6 tokens; the window of 4 cuts only the last.
  add_checked(c, "attention_packed", {q4, kv2, kv2}, attn({4, {}, {0, 2, 3, 9}}));
  auto rot = [](RopeOptions opt) { return [opt](auto& x) { return rope(x[0], opt); }; };
  add_checked(c, "rope", {In::normal({2, 5, 3, 6})}, rot({100.0, 0, {}}));
  add_checked(c, "rope_offset", {In::normal({1, 4, 2, 4})}, rot({10000.0, 7, {}}));
  add_checked(c, "rope_packed", {In::normal({1, 8, 2, 6})}, rot({50.0, 0, {0, 3, 4, 8}}));
}

// kernels/cuda/reduce: both kernel shapes (inner < 32, >= 32), permuted dims, long rows, and
// max with ties, where the first maximum wins on both devices, bit for bit.
void add_reduction_cases(Cases& c) {
  const ParityRows rows{c, kFp32AndBf16}, ties{c, kFp32AndBf16, kBitwise};
  rows.add("sum_inner_lt32", {In::normal({3, 37, 5})}, [](auto& x) { return sum(x[0], {1}); });
  rows.add("sum_inner_ge32", {In::normal({4, 6, 40})}, [](auto& x) { return sum(x[0], {1}); });
  rows.add("sum_permuted_keepdim", {In::normal({3, 37, 5})}, [](auto& x) {
    return sum(x[0], {0, 2}, true);
  });
  rows.add("sum_all_long", {In::normal({2, 5000})}, [](auto& x) { return sum(x[0]); });
  rows.add("sum_long_rows", {In::normal({2, 5000})}, [](auto& x) { return sum(x[0], {-1}); });
  rows.add("mean_dim0", {In::normal({4, 6, 40})}, [](auto& x) { return mean(x[0], {0}); });
  for (int64_t d : {0, 1, 2})
    rows.add("max_dim" + std::to_string(d), {In::normal({4, 6, 40})},
             [d](auto& x) { return max(x[0], d); });
  for (int64_t d : {1, 2})
    ties.add("max_ties_dim" + std::to_string(d), {In::small_ints({5, 64, 33})},
             [d](auto& x) { return max(x[0], d, true); });
}

// kernels/cuda/gemm: transposed views go to cuBLAS as they are (every op(A), op(B)), broadcast
// batches (stride 0 for one operand), vectors and a single element, in every float dtype.
void add_matmul_cases(Cases& c) {
  const ParityRows rows{c, kEveryFloat};
  auto mm = [](auto& x) { return matmul(x[0], x[1]); };
  auto t = [](const Tensor& x) { return transpose(x, -1, -2); };
  rows.add("matmul_nn", {In::normal({5, 7}), In::normal({7, 3})}, mm);
  rows.add("matmul_tn", {In::normal({7, 5}), In::normal({7, 3})},
           [t](auto& x) { return matmul(t(x[0]), x[1]); });
  rows.add("matmul_nt", {In::normal({5, 7}), In::normal({3, 7})},
           [t](auto& x) { return matmul(x[0], t(x[1])); });
  rows.add("matmul_tt", {In::normal({7, 5}), In::normal({3, 7})},
           [t](auto& x) { return matmul(t(x[0]), t(x[1])); });
  rows.add("matmul_broadcast_batch", {In::normal({2, 1, 5, 7}), In::normal({3, 7, 4})}, mm);
  rows.add("matmul_batched_tn", {In::normal({3, 7, 5}), In::normal({3, 7, 4})},
           [t](auto& x) { return matmul(t(x[0]), x[1]); });
  rows.add("matmul_m1", {In::normal({1, 7}), In::normal({7, 3})}, mm);
  rows.add("matmul_n1", {In::normal({5, 7}), In::normal({7, 1})}, mm);
  rows.add("matmul_k1", {In::normal({6, 1}), In::normal({1, 4})}, mm);
  rows.add("linear_bias_3d", {In::normal({2, 3, 7}), In::normal({5, 7}), In::normal({5})},
           [](auto& x) { return linear(x[0], x[1], x[2]); });
}

// Targets of 37 rows over a vocabulary of 101: every fifth row ignored (-100).
std::vector<double> spread_targets() {
  std::vector<double> targets;
  for (int i = 0; i < 37; ++i) targets.push_back(i % 5 == 0 ? -100 : (i * 13) % 101);
  return targets;
}

// kernels/cuda/nn: softmax over long rows and over dim 0; cross-entropy with ignored rows,
// int32 and int64 targets, and every row ignored.
void add_softmax_cases(Cases& c) {
  const ParityRows rows{c, kFp32AndBf16};
  const InputSpec wide = In::normal({3, 1000}, 3.0), tall = In::normal({7, 5});
  rows.add("softmax_wide", {wide}, [](auto& x) { return softmax(x[0], -1); });
  rows.add("log_softmax_wide", {wide}, [](auto& x) { return log_softmax(x[0], -1); });
  rows.add("softmax_dim0_7x5", {tall}, [](auto& x) { return softmax(x[0], 0); });
  rows.add("log_softmax_dim0_7x5", {tall}, [](auto& x) { return log_softmax(x[0], 0); });
  auto ce = [](auto& x) { return cross_entropy(x[0], x[1]); };
  const InputSpec logits = In::normal({37, 101}, 2.0);
  rows.add("cross_entropy_int64_targets", {logits, In::fixed(spread_targets(), {37}, DType::int64)},
           ce);
  rows.add("cross_entropy_int32_targets", {logits, In::fixed(spread_targets(), {37}, DType::int32)},
           ce);
  rows.add("cross_entropy_all_ignored", {logits, In::fixed(std::vector<double>(37, -100), {37})},
           ce);
}

// Embedding (repeated ids: dweight rows summed in token order, the CPU's order and rounding;
// many tokens over a vocabulary of several blocks), RMSNorm (with and without weight, many rows
// so dw sums many parts of the two-pass split, wide rows), L2 norm, causal depthwise conv1d.
void add_nn_cases(Cases& c) {
  const ParityRows rows{c, kFp32AndBf16}, exact{c, kFp32AndBf16, kBitwise};
  auto emb = [](auto& x) { return embedding(x[0], x[1]); };
  for (DType ids : {DType::int64, DType::int32})
    exact.add(std::string("embedding_") + dtype_name(ids) + "_ids",
              {In::normal({50, 33}), In::indices({4, 9}, 10, ids)}, emb);
  exact.add("embedding_many_tokens", {In::normal({5000, 64}), In::indices({3, 1100}, 5000)}, emb);
  rows.add("rms_norm_3d", {In::normal({6, 5, 48}), In::normal({48})},
           [](auto& x) { return rms_norm(x[0], x[1], 1e-6); });
  rows.add("rms_norm_no_weight", {In::normal({6, 5, 48})},
           [](auto& x) { return rms_norm(x[0], Tensor(), 1e-6); });
  rows.add("rms_norm_many_rows", {In::normal({10000, 64}), In::normal({64})},
           [](auto& x) { return rms_norm(x[0], x[1], 1e-5); });
  rows.add("rms_norm_wide", {In::normal({3, 1000}), In::normal({1000})},
           [](auto& x) { return rms_norm(x[0], x[1], 1e-5); });
  rows.add("l2_norm_2d", {In::normal({7, 33})}, [](auto& x) { return l2_norm(x[0]); });
  rows.add("l2_norm_3d", {In::normal({2, 3, 64})}, [](auto& x) { return l2_norm(x[0], 1e-6); });
  auto conv = [](auto& x) { return causal_conv1d(x[0], x[1]); };
  rows.add("causal_conv1d_basic", {In::normal({2, 37, 24}), In::normal({24, 4})}, conv);
  rows.add("causal_conv1d_t_below_w", {In::normal({1, 5, 3}), In::normal({3, 1, 4})}, conv);
  rows.add("causal_conv1d_long", {In::normal({3, 500, 40}), In::normal({40, 3})}, conv);
}

// A small model-like graph: embedding -> conv -> silu -> L2 norm -> linear -> RMSNorm ->
// cross-entropy. In bf16 each of the six ops rounds its output (<= 2^-8 relative) and the two
// devices may round a value differently, so the bound is the chain's: six roundings, doubled
// for the amplification of the norms, 6 * 2 * 2^-8 ~ 5e-2.
void add_graph_cases(Cases& c) {
  const ParityRows rows{c, kFp32AndBf16, Tolerance{1e-10, 1e-4, 5e-2}};
  rows.add("small_graph",
           {In::normal({40, 16}), In::normal({16, 4}, 0.5), In::normal({40, 16}, 0.3),
            In::normal({40}), In::indices({2, 23}, 40), In::indices({46}, 40)},
           [](auto& z) {
             Tensor h = embedding(z[0], z[4]);
             h = l2_norm(silu(causal_conv1d(h, z[1])));
             Tensor logits = rms_norm(linear(h, z[2]), z[3], 1e-6);
             return cross_entropy(reshape(logits, {46, 40}), z[5]);
           });
}

// kernels/cuda/elementwise: unary ops, broadcasting binary ops, a strided operand, in every
// float dtype; and a chain whose backward runs the *_grad kernels.
void add_elementwise_cases(Cases& c) {
  const ParityRows rows{c, kEveryFloat, kSameExpression};
  const InputSpec a = In::normal({3, 5, 7}), b = In::normal({5, 1}), pos = In::positive({3, 5, 7});
  rows.add("elementwise_add_broadcast", {a, b}, [](auto& x) { return x[0] + x[1]; });
  rows.add("elementwise_mul_broadcast", {a, b}, [](auto& x) { return x[0] * x[1]; });
  rows.add("elementwise_div", {a, pos}, [](auto& x) { return x[0] / x[1]; });
  rows.add("elementwise_transposed_minus_scalar", {a},
           [](auto& x) { return transpose(x[0], 0, 2) - 1.0; });
  using Unary = Tensor (*)(const Tensor&);
  const std::pair<const char*, Unary> on_any[] = {{"exp", exp},   {"sigmoid", sigmoid},
                                                  {"silu", silu}, {"softplus", softplus},
                                                  {"tanh", tanh}, {"square", square}};
  for (const auto& [name, f] : on_any)
    rows.add(std::string("elementwise_") + name, {a}, [f = f](auto& x) { return f(x[0]); });
  const std::pair<const char*, Unary> on_positive[] = {
      {"log", log}, {"sqrt", sqrt}, {"rsqrt", rsqrt}};
  for (const auto& [name, f] : on_positive)
    rows.add(std::string("elementwise_") + name, {pos}, [f = f](auto& x) { return f(x[0]); });
  const ParityRows fp32{c, {DType::float32}, kSameExpression};
  fp32.add("elementwise_backward_chain", {In::normal({4, 6})},
           [](auto& x) { return silu(x[0]) * sigmoid(x[0]) + exp(x[0] * 0.5); });
}

// The gated delta rule, one row per registry entry, chunk size (16, and 64 over a single partial
// chunk) and packing (B = 2 rows, or 3 sequences packed in one): q, k, v, the raw gates and h0
// drawn normal and shaped as the layer shapes them (k L2-normalised, g = -softplus / 10, beta =
// sigmoid; ssd has no beta), GVA (2 value heads over 1 key head); the output o with the final
// state ht appended, so every input's gradient and both outputs are checked: fp64 finite
// differences, and CUDA against CPU (bf16 within 5e-2: the gates' three ops round, and the CUDA
// kernels round their operands to bf16 where the CPU's compute in fp32).
void add_gated_delta_rule_cases(Cases& c) {
  for (const gdr::Implementation& impl : gdr::implementations())
    for (int chunk : {16, 64})
      for (bool packed : {false, true}) {
        const int64_t B = packed ? 1 : 2, T = packed ? 23 : 13, N = packed ? 3 : 2;
        std::vector<In> inputs = {In::normal({B, T, 1, 4}), In::normal({B, T, 1, 4}),
                                  In::normal({B, T, 2, 4}), In::normal({B, T, 2}),
                                  In::normal({N, 2, 4, 4}, 0.5)};
        if (impl.delta_rule) inputs.push_back(In::normal({B, T, 2}));
        GdrOptions opt;
        opt.use(impl);
        opt.chunk_size = chunk;
        opt.output_final_state = true;
        if (packed) opt.cu_seqlens = {0, 7, 16, 23};
        const bool beta = impl.delta_rule;
        add_checked(
            c,
            std::string("gated_delta_rule_") + impl.name + "_c" + std::to_string(chunk) +
                (packed ? "_packed" : ""),
            std::move(inputs), [opt, beta](auto& x) {
              const Tensor g = mul(softplus(x[3]), -0.1);
              // h0 in the accumulator type (fp32 for 16-bit inputs), as the kernels keep states
              const Tensor h0 =
                  cast(x[4], x[4].dtype() == DType::float64 ? DType::float64 : DType::float32);
              const GdrOutput r = gated_delta_rule(x[0], l2_norm(x[1], 1e-6), x[2], g,
                                                   beta ? sigmoid(x[5]) : Tensor(), opt, h0);
              return concat({reshape(r.o, {-1}), reshape(cast(r.ht, r.o.dtype()), {-1})}, 0);
            });
        c.back().tolerance = Tolerance{1e-10, 2e-4, 5e-2};
      }
}

// Kimi Delta Attention, one row per implementation, chunk size (16, and 64 over a single partial
// chunk) and packing, shaped as the gated delta rule's rows but with a log decay per key channel
// (g [B, T, HV, K] = -softplus, strong enough to matter).
void add_kimi_delta_rule_cases(Cases& c) {
  for (const kda::Implementation& impl : kda::implementations())
    for (int chunk : {16, 64})
      for (bool packed : {false, true}) {
        const int64_t B = packed ? 1 : 2, T = packed ? 23 : 13, N = packed ? 3 : 2;
        std::vector<In> inputs = {In::normal({B, T, 1, 4}),      In::normal({B, T, 1, 4}),
                                  In::normal({B, T, 2, 4}),      In::normal({B, T, 2, 4}),
                                  In::normal({N, 2, 4, 4}, 0.5), In::normal({B, T, 2})};
        KdaOptions opt;
        opt.impl = impl.impl;
        opt.chunk_size = chunk;
        opt.output_final_state = true;
        if (packed) opt.cu_seqlens = std::vector<int64_t>{0, 7, 16, 23};
        add_checked(
            c,
            std::string("kimi_delta_rule_") + impl.name + "_c" + std::to_string(chunk) +
                (packed ? "_packed" : ""),
            std::move(inputs), [opt](auto& x) {
              const Tensor g = neg(softplus(x[3]));
              const Tensor h0 =
                  cast(x[4], x[4].dtype() == DType::float64 ? DType::float64 : DType::float32);
              const KdaOutput r =
                  kimi_delta_rule(x[0], l2_norm(x[1], 1e-6), x[2], g, sigmoid(x[5]), opt, h0);
              return concat({reshape(r.o, {-1}), reshape(cast(r.ht, r.o.dtype()), {-1})}, 0);
            });
        c.back().tolerance = Tolerance{1e-10, 2e-4, 5e-2};
      }
}

Cases build_table() {
  Cases cases;
  add_gradcheck_cases(cases);
  add_attention_cases(cases);
  add_gated_delta_rule_cases(cases);
  add_kimi_delta_rule_cases(cases);
  add_reduction_cases(cases);
  add_matmul_cases(cases);
  add_softmax_cases(cases);
  add_nn_cases(cases);
  add_graph_cases(cases);
  add_elementwise_cases(cases);
  return cases;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const Cases cases = build_table();
  return cases;
}

}  // namespace gdn::ops
