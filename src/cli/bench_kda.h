// `gdn bench --op kda`: the Kimi Delta Attention implementations (kernels/kda.h) timed in the
// bench's schema, through ops::kimi_delta_rule as the layer calls it, at the gated delta rule's
// shapes (B, H = HV, T, K = V = D, dtype, chunk, packing). Rows are named `kda_<impl>` and carry
// "op": "kda"; `--op gdr,kda` runs both families in one sweep, so their times compare in one run.
// Inputs as the layer makes them: q ~ N(0, 1), k L2-normalised, v ~ N(0, 1), per-channel log
// decays g = log sigmoid(N(4, 1)) [B, T, H, D], beta = sigmoid(N(0, 1)); rel_err against the fp64
// recurrent kernel on the same inputs.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/kda.h"
#include "src/cli/bench_util.h"
#include "src/core/dtype.h"
#include "src/core/tensor.h"

namespace gdn::cli {

struct KdaCase {
  int64_t B, H, T, D;
  DType dtype;
  int chunk;
  std::vector<int64_t> cu_seqlens;  // packed sequences (B = 1); empty: unpacked
};

// The case's inputs q, k, v, g, beta, d_o in fp64 on the CPU (rounded to the case dtype), and
// with a reference the fp64 recurrent kernel's o and (fwd_bwd) gradients on them.
struct KdaInputs {
  std::vector<Tensor> in64;  // q, k, v, g, beta, d_o
  bool has_o = false, has_grads = false;
  std::vector<double> o, dq, dk, dv, dg, dbeta;
};
// reference: "" (none), "fwd" or "fwd_bwd".
KdaInputs kda_inputs(const KdaCase& c, const std::string& reference);

// The fields that name a KDA row (also of one that failed).
nlohmann::json kda_row(const KdaCase& c, const kda::Implementation& impl, const std::string& mode);

// Runs and measures one row on `dev`: median/q1/q3 ms, peak and inputs MB, GFLOP/s (the kernel's
// FLOP count, docs/design.md) and the fraction of `peak`, rel_err of o and of every gradient
// where `in` has the reference.
nlohmann::json run_kda_case(const KdaCase& c, const kda::Implementation& impl,
                            const std::string& mode, Device dev, int repeats, double min_sample_ms,
                            const DevicePeak& peak, const KdaInputs& in);

}  // namespace gdn::cli
