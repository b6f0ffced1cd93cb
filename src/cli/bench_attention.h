// `gdn bench --impls attention`: causal softmax attention timed in the bench's schema, beside the
// gated-delta-rule rows of the same shapes (B, H, T, head dim D, dtype, packing), so that the two
// are compared at the same T. Its FLOPs are the registry entry's (kernels/attention_registry.h),
// as flash-attention counts them: per head, forward 2 products (Q K^T, P V) and backward 5 (S, dP,
// dV, dQ, dK recomputed or formed), each D multiply-adds (2 FLOPs) per visible (query, key) pair;
// full causal attention has T (T + 1) / 2 pairs, a window w about T w.
//
// Rows are named by the attention registry's entry they run: `attention` is what ops::attention
// picks on the device (the CPU kernel; on CUDA cuDNN's fused attention where it supports the case,
// else our flash kernel, or as GDN_ATTENTION says), `attention_flash` our CUDA flash kernel
// (kernels/cuda/attention_cuda.h) and `attention_cudnn` cuDNN's fused attention
// (kernels/cuda/attention_cudnn.h, bf16 only), the last two on CUDA only. The entries' kernels are
// called directly, as the op calls them, with workspaces from the allocator; a CUDA row says which
// kernel ran (`attention_kernel`, and `attention_kernel_bwd` where the backward's differs).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/attention_registry.h"
#include "src/cli/bench_util.h"
#include "src/core/dtype.h"
#include "src/core/tensor.h"

namespace gdn::cli {

struct AttentionCase {
  int64_t B, H, T, D;
  DType dtype;
  int64_t window;                   // 0: full causal
  std::vector<int64_t> cu_seqlens;  // packed sequences (B = 1); empty: unpacked
};

// The attention registry's entry of --impls `name` (kernels/attention_registry.h: attention,
// attention_flash, attention_cudnn); an entry that runs on CUDA only on another device is an error
// naming the flag and the device.
const attn::Implementation& attention_entry(const std::string& name, Device dev);

// The case's inputs q, k, v, d_o ~ N(0, 1) [B, T, H, D] in fp64 on the CPU, rounded to the case
// dtype, and (with a reference) the fp64 CPU kernel's outputs on them: shared by the rows of the
// case, so that the reference runs once.
struct AttentionInputs {
  std::vector<Tensor> in64;  // q, k, v, d_o
  bool has_o = false, has_grads = false;
  std::vector<double> o, dq, dk, dv;
};
// reference: "" (none), "fwd" (o) or "fwd_bwd" (o and the gradients).
AttentionInputs attention_inputs(const AttentionCase& c, const std::string& reference);

// The fields that name an attention row (also of one that failed).
nlohmann::json attention_row(const AttentionCase& c, const std::string& impl,
                             const std::string& mode);

// Runs and measures one row of `kernel` on `dev` (CUDA: each call ends with a device
// synchronisation): median/q1/q3 ms, temp/residual/peak/inputs MB from the device's allocator,
// GFLOP/s and the fraction of `peak`, and (where `in` has it) rel_err of o and of dq, dk, dv
// against the fp64 CPU kernel on the same inputs. Throws where the kernel cannot run the case
// (attention_cudnn: the reason cuDNN gives).
nlohmann::json run_attention_case(const AttentionCase& c, const attn::Implementation& kernel,
                                  const std::string& mode, Device dev, int repeats,
                                  double min_sample_ms, const DevicePeak& peak,
                                  const AttentionInputs& in);

// "attention fwd_bwd float32 D=64: costs more than chunked from T = 4096 (1.3x)" for each
// gated-delta-rule implementation and mode of `results` that attention overtakes within the
// measured T, and the largest T measured where it does not; one line per attention row name
// (attention, attention_flash, attention_cudnn; `@w` added for a window).
std::vector<std::string> attention_crossovers(const nlohmann::json& results);

}  // namespace gdn::cli
