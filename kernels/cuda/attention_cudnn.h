// Causal softmax attention through cuDNN's fused attention (scaled dot-product attention of the
// cuDNN graph API, built with its header-only C++ frontend; kernels/cuda/attention_cudnn.cu),
// next to our flash kernel (kernels/cuda/attention_cuda.h) with its contract: q, o [B, T, H, D],
// k, v [B, T, HKV, D] (cuDNN's [b, h, s, d] dims over our strides, no transpose), lse [B, H, T]
// fp32 (cuDNN's softmax stats are the natural-log log-sum-exp of the scaled scores: the lse of
// the CPU and CUDA kernels, so either backward runs on the other's forward), window w as cuDNN's
// diagonal band left bound w (a key s is seen when s > t - w), GQA as HKV < H.
// Which of the two runs is decided in one place, run_on_cudnn() below: the op's impl (the model's
// `attention_impl`, auto|cudnn|flash, or GDN_ATTENTION read once at start-up,
// layers/config.h), `auto` (the default) taking cuDNN where it supports the problem and the flash
// kernel otherwise. Packed sequences (cu_seqlens), fp32 and fp64 always run
// the flash kernel.
//
// A plain header (no cuDNN types): the choice, the support predicate and the graph-cache key are
// used and tested without CUDA; the functions below the line are defined in attention_cudnn.cu.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/optional_libraries.h"
#include "kernels/enum_table.h"
#include "kernels/numeric.h"

namespace gdn::attn {

// ---- which implementation runs ------------------------------------------------------------------

enum class Impl { automatic, cudnn, flash };
inline constexpr EnumEntry<Impl> kImplNames[] = {
    {Impl::automatic, "auto"}, {Impl::cudnn, "cudnn"}, {Impl::flash, "flash"}};
inline EnumTable<Impl> enum_table(Impl) {
  return kImplNames;
}

inline const char* impl_name(Impl i) {
  return enum_name(i);
}

// "auto", "cudnn" or "flash"; null or empty is auto. Throws std::invalid_argument otherwise.
inline Impl parse_impl(const char* s) {
  if (!s || !*s) return Impl::automatic;
  if (const auto v = enum_table(Impl{}).parse(s)) return *v;
  throw std::invalid_argument(std::string("attention impl must be auto, cudnn or flash, got '") +
                              s + "'");
}

// A window that covers the whole sequence is full causal: no diagonal band (same graph).
inline int64_t band_of(const Problem& p) {
  return p.window > 0 && p.window < p.T ? p.window : 0;
}

// Element types cuDNN's fused attention is asked about (the framework has fp32, fp64, bf16).
enum class SdpaType { f32, f64, bf16, f16 };

// Why cuDNN's fused attention cannot run p on a device of compute capability `sm` (major * 10 +
// minor), or "" when it can as far as is known before a graph is built (the graph's own support
// check has the last word, and the op falls back when it fails): 16-bit inputs, sm_80 or newer,
// one sequence per batch row (packed sequences need cuDNN's ragged layout, not used), head dim a
// multiple of 8 and at most 128 (256 on sm_90+), sizes within 32-bit strides.
inline std::string cudnn_unsupported(const Problem& p, SdpaType t, int sm) {
  if (t != SdpaType::bf16 && t != SdpaType::f16) return "cuDNN's fused attention takes bf16/fp16";
  if (sm < 80) return "cuDNN's fused attention needs sm_80 or newer, got sm_" + std::to_string(sm);
  if (p.packed()) return "packed sequences (cu_seqlens) run the flash kernel";
  const int64_t max_d = sm >= 90 ? 256 : 128;
  if (p.D % 8 != 0 || p.D > max_d)
    return "head dim " + std::to_string(p.D) + " is not a multiple of 8 up to " +
           std::to_string(max_d);
  if (p.B * p.T * p.H * p.D >= (int64_t(1) << 31)) return "more than 2^31 elements";
  return "";
}

// Why the cuDNN this process found (`cudnn`, kernels/cuda/optional_libraries.h: opened at run time)
// cannot run p, or "": absent or not cuDNN 9, or older than 9.6 for a sliding window (cuDNN's
// diagonal band). The message names the version found and the one needed.
inline std::string cudnn_library_unsupported(const Problem& p, const LibraryInfo& cudnn) {
  std::string why = why_unusable(cudnn, "cuDNN's fused attention", cuda::kCudnnMinVersion);
  if (why.empty() && band_of(p) > 0)
    why = why_unusable(
        cudnn,
        "a sliding window (window " + std::to_string(p.window) + ") on cuDNN's fused attention",
        cuda::kCudnnBandMinVersion);
  return why;
}

// Whether this call runs on cuDNN: `requested` and whether cuDNN can (`why_not` empty: built and
// supported). Asking for cudnn where it cannot run throws std::invalid_argument with the reason.
inline bool run_on_cudnn(Impl requested, const std::string& why_not) {
  if (requested == Impl::flash) return false;
  if (requested == Impl::cudnn && !why_not.empty())
    throw std::invalid_argument("attention impl cudnn: " + why_not);
  return why_not.empty();
}

// The key of a cached graph: the device, the pass and everything the graph is built from.
struct GraphKey {
  int device = 0, backward = 0, type = 0;
  int64_t B = 0, T = 0, H = 0, HKV = 0, D = 0, band = 0;
  uint64_t scale_bits = 0;  // the float the graph holds (attn_scale), bit for bit
  auto tie() const { return std::tie(device, backward, type, B, T, H, HKV, D, band, scale_bits); }
  bool operator<(const GraphKey& o) const { return tie() < o.tie(); }
  bool operator==(const GraphKey& o) const { return tie() == o.tie(); }
};

inline GraphKey graph_key(const Problem& p, SdpaType t, int device, bool backward) {
  GraphKey k;
  k.device = device;
  k.backward = backward ? 1 : 0;
  k.type = int(t);
  k.B = p.B;
  k.T = p.T;
  k.H = p.H;
  k.HKV = p.HKV;
  k.D = p.D;
  k.band = band_of(p);
  const float s = float(p.scale);
  uint32_t bits = 0;
  std::memcpy(&bits, &s, sizeof(bits));
  k.scale_bits = bits;
  return k;
}

// ---- defined in attention_cudnn.cu (CUDA builds) ------------------------------------------------

// Whether this build has the cuDNN path (GDN_WITH_CUDNN_SDPA: the frontend's headers were found).
bool cudnn_sdpa_built();

// Bytes of workspace the bf16 forward / backward graph of p needs on the current device, building
// and caching the graph (per host thread, device and key) on first use; -1 when cuDNN cannot run
// p, with the reason in *why (not built, cudnn_unsupported, cudnn_library_unsupported, or the
// graph's support check). The first problem turned away for want of a usable cuDNN library says
// so once on stderr (the flash kernel runs it under auto).
int64_t cudnn_workspace_bytes(const Problem& p, bool backward, void* stream, std::string* why);

// The forward: o and lse (fp32 [B, H, T]). `workspace` holds cudnn_workspace_bytes(p, false).
void forward_cudnn(const Problem& p, const bf16* q, const bf16* k, const bf16* v, bf16* o,
                   float* lse, void* workspace, void* stream);

// The backward from o and lse of either forward (deterministic algorithm): dq, dk, dv
// overwritten. `workspace` holds cudnn_workspace_bytes(p, true).
void backward_cudnn(const Problem& p, const bf16* q, const bf16* k, const bf16* v, const bf16* o,
                    const float* lse, const bf16* d_o, bf16* dq, bf16* dk, bf16* dv,
                    void* workspace, void* stream);

}  // namespace gdn::attn
