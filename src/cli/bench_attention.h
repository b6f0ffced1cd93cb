// `gdn bench --impls attention`: causal softmax attention (kernels/cpu/attention.h) timed in the
// bench's schema, beside the gated-delta-rule rows of the same shapes (B, H, T, head dim D, dtype,
// packing), so that the two are compared at the same T. Its FLOPs are counted as
// flash-attention counts them: per head, forward 2 products (Q K^T, P V) and backward 5 (S, dP,
// dV, dQ, dK recomputed or formed), each D multiply-adds (2 FLOPs) per visible (query, key) pair;
// full causal attention has T (T + 1) / 2 pairs, a window w about T w.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/cli/bench_util.h"
#include "src/core/dtype.h"

namespace gdn::cli {

struct AttentionCase {
  int64_t B, H, T, D;
  DType dtype;
  int64_t window;                   // 0: full causal
  std::vector<int64_t> cu_seqlens;  // packed sequences (B = 1); empty: unpacked
};

// (query, key) pairs that causal attention computes: each query sees itself and the keys before
// it in its sequence (at most window - 1 of them with a window).
double attention_pairs(const AttentionCase& c);
// FLOPs of one call: 4 D per pair forward, 10 D per pair backward, per head.
double attention_flops(const AttentionCase& c, bool fwd_bwd);

// Runs and measures one row: median/q1/q3 ms, temp/residual/peak/inputs MB, GFLOP/s and the
// fraction of `peak`, and (with_reference) rel_err of o and of dq, dk, dv against the fp64
// kernel on the same inputs. CPU only; a CUDA device is refused naming it.
nlohmann::json run_attention_case(const AttentionCase& c, const std::string& mode, Device dev,
                                  int repeats, double min_sample_ms, const DevicePeak& peak,
                                  bool with_reference);

// "attention fwd_bwd float32 D=64: costs more than chunked from T = 4096 (1.3x)" for each
// gated-delta-rule implementation and mode of `results` that attention overtakes within the
// measured T, and the largest T measured where it does not.
std::vector<std::string> attention_crossovers(const nlohmann::json& results);

}  // namespace gdn::cli
