// Causal softmax attention's implementations as registered objects, the same entry shape as the
// gated delta rule's (kernels/gdr_registry.h): each of `attention` (what ops::attention runs on the
// device: the CPU kernel; on CUDA cuDNN's fused attention where it supports the problem, else our
// flash kernel), `attention_flash` (our CUDA flash kernel, kernels/cuda/attention_cuda.h) and
// `attention_cudnn` (cuDNN's fused attention, kernels/cuda/attention_cudnn.h, bf16) is one entry
// carrying its name, its attn::Impl, the devices it runs on, its residual and workspace sizes, its
// forward and backward per device and input type, and its FLOP count. ops::attention (and through
// it the layers and the memory profile, which measures a real step) and `gdn bench --impls
// attention,attention_flash,attention_cudnn` take their kernels from this one table.
//
// On CUDA, `attention` has no kernels of its own: cuda_pass() below resolves each pass to
// attention_cudnn or attention_flash (attn::run_on_cudnn decides), so the forward and the backward
// may run different kernels (both save the same lse).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/device_kernels.h"
#include "kernels/numeric.h"

namespace gdn::attn {

// One pass's buffers, in the layouts of kernels/cpu/attention.h: the forward reads q, k, v and
// writes o and lse; the backward reads q, k, v, o, lse and d_o and writes dq, dk, dv. `workspace`
// holds the bytes the device's workspace_bytes asked for (device memory on CUDA).
template <typename T>
struct Args {
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  T* o = nullptr;
  acc_t<T>* lse = nullptr;
  const T* d_o = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  void* workspace = nullptr;
};

// A forward or backward on one device; `stream` is the cudaStream_t of a CUDA kernel (ignored on
// the CPU).
template <typename T>
using Pass = void (*)(const Problem&, const Args<T>&, void* stream);

// Bytes of scratch one pass of p in element type t needs, or -1 where the kernel cannot run it,
// with the reason in *why (cuDNN's: its graph for p is built and cached on `stream`'s device).
using WorkspaceBytes = int64_t (*)(const Problem&, SdpaType t, bool backward, void* stream,
                                   std::string* why);

// One device's kernels: forward and backward per input type (null where the entry does not run
// that type there: cuDNN runs bf16 only), and their scratch.
struct DeviceKernels {
  using Typed = delta_rule::TypedKernels<Pass, Pass>;
  Typed::Tuple typed;
  WorkspaceBytes workspace_bytes = nullptr;

  template <typename T>
  const Typed::Pair<T>& of() const {
    return Typed::of<T>(typed);
  }
};

struct Implementation {
  const char* name;           // "attention_flash"
  Impl impl;                  // auto, flash or cudnn: what AttentionOptions::impl asks for
  const char* summary;        // one line for --help and docs
  bool on_cpu, on_cuda;       // the devices it runs on (CUDA: in a build with CUDA)
  const DeviceKernels* cpu;   // null: it does not run on the CPU
  const DeviceKernels* cuda;  // null: not on CUDA, gdn built without CUDA, or `attention`
                              // (resolved per pass by cuda_pass)

  // Accumulator elements the forward saves for the backward beyond q, k, v, o: lse [B, H, T].
  int64_t residual_elems(const Problem& p) const;
  // FLOPs of one call (visible_pairs below), the backward's too when with_backward.
  double flops(const Problem& p, bool with_backward) const;
};

// (query, key) pairs causal attention computes: each query sees itself and the keys before it in
// its sequence (at most window - 1 of them with a window): L (L + 1) / 2 per sequence of L tokens
// in full, about L w with a window w.
double visible_pairs(const Problem& p);

// Every implementation, in a fixed order (attention, attention_flash, attention_cudnn).
const std::vector<Implementation>& implementations();
// By name; throws std::invalid_argument naming the value and the known names.
const Implementation& find_implementation(const std::string& name);
// Whether `name` is an entry's.
bool is_implementation(const std::string& name);
// The entry of an attn::Impl (automatic: `attention`).
const Implementation& implementation_of(Impl impl);
// "attention, attention_flash, attention_cudnn" (cpu_only: "attention", the entries that also run
// on the CPU).
std::string implementation_names(bool cpu_only = false);
// The names of the entries that run on CUDA only: "attention_flash, attention_cudnn".
std::string cuda_only_names();

// Accumulator bytes per element of t (8 for f64, else 4) and the element type's name (DType's:
// "float32", "float64", "bfloat16", "float16").
int64_t acc_bytes(SdpaType t);
const char* type_name(SdpaType t);

// How one pass of p runs on CUDA when `requested` is asked for: on cuDNN's fused attention or our
// flash kernel (the entry in `runs`), the workspace bytes it needs, and, where cuDNN was considered
// and cannot run p, why not. flash: the flash kernel; cudnn: cuDNN, or std::invalid_argument from
// run_on_cudnn naming why it cannot; auto: cuDNN where it can, else the flash kernel.
struct CudaPass {
  const Implementation* runs = nullptr;
  int64_t workspace_bytes = 0;
  std::string why_not;
};
CudaPass cuda_pass(const Problem& p, Impl requested, SdpaType t, bool backward, void* stream);

}  // namespace gdn::attn
