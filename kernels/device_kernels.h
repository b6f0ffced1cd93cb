// What the registries of the delta-rule families (kernels/gdr_registry.h, kernels/kda.h) hold per
// device: an implementation's forward and backward for every input type (TypedKernels, which the
// attention registry shares), and its scratch sizes.
#pragma once
#include <cstdint>
#include <tuple>

#include "kernels/delta_rule_args.h"
#include "kernels/numeric.h"

namespace gdn::delta_rule {

// A forward and a backward for each input type (float, double, bf16), null where a type has
// none: the typed kernels of a registry entry on one device (here and in
// kernels/attention_registry.h).
template <template <typename> class Fwd, template <typename> class Bwd>
struct TypedKernels {
  template <typename T>
  struct Pair {
    Fwd<T> forward = nullptr;
    Bwd<T> backward = nullptr;
  };
  using Tuple = std::tuple<Pair<float>, Pair<double>, Pair<bf16>>;
  template <typename T>
  static const Pair<T>& of(const Tuple& typed) {
    return std::get<Pair<T>>(typed);
  }
};

// One device's forward and backward for each input type (float, double, bf16), and the scratch
// each needs in accumulator elements. CUDA's scratch also depends on the bytes of an input
// element (the fused kernels keep keys in the input type), which the CPU's ignores.
template <class Problem, template <typename> class Fwd, template <typename> class Bwd>
struct DeviceKernels {
  using Typed = TypedKernels<Fwd, Bwd>;
  template <typename T>
  using Pair = typename Typed::template Pair<T>;
  typename Typed::Tuple typed;
  int64_t (*forward_workspace)(const Problem&, int64_t in_bytes) = nullptr;
  int64_t (*backward_workspace)(const Problem&, int64_t in_bytes) = nullptr;
  // The kernels take packed sequences (Problem::cu_seqlens) themselves; otherwise the entry
  // points run a packed Problem one sequence at a time (kernels/gdr_split.h).
  bool packed = false;

  template <typename T>
  const Pair<T>& of() const {
    return Typed::template of<T>(typed);
  }
};

// A family's kernel calls on the CPU (plain calls) and on CUDA (device pointers, run on `stream`,
// a cudaStream_t).
template <class Problem>
struct CpuCalls {
  template <typename T>
  using Forward = void (*)(const Problem&, const Inputs<T>&, const ForwardOutputs<T>&);
  template <typename T>
  using Backward = void (*)(const Problem&, const Inputs<T>&, const BackwardArgs<T>&);
};
template <class Problem>
struct CudaCalls {
  template <typename T>
  using Forward = void (*)(const Problem&, const Inputs<T>&, const ForwardOutputs<T>&,
                           void* stream);
  template <typename T>
  using Backward = void (*)(const Problem&, const Inputs<T>&, const BackwardArgs<T>&, void* stream);
};
template <class Problem>
using CpuKernels = DeviceKernels<Problem, CpuCalls<Problem>::template Forward,
                                 CpuCalls<Problem>::template Backward>;
template <class Problem>
using CudaKernels = DeviceKernels<Problem, CudaCalls<Problem>::template Forward,
                                  CudaCalls<Problem>::template Backward>;

// The CPU scratch does not depend on the input type.
template <class Problem, int64_t (*Size)(const Problem&)>
int64_t cpu_size(const Problem& p, int64_t /*in_bytes*/) {
  return Size(p);
}

}  // namespace gdn::delta_rule

// A family's CpuKernels of detail::NAME_forward / NAME_backward for every input type, with their
// workspace sizes; every CPU kernel runs packed sequences (cu_seqlens) itself.
#define GDN_DELTA_RULE_CPU_KERNELS(NAME)                                                           \
  CpuKernels {                                                                                     \
    {{&detail::NAME##_forward<float>, &detail::NAME##_backward<float>},                            \
     {&detail::NAME##_forward<double>, &detail::NAME##_backward<double>},                          \
     {&detail::NAME##_forward<bf16>, &detail::NAME##_backward<bf16>}},                             \
        &::gdn::delta_rule::cpu_size<Problem, &detail::NAME##_forward_workspace>,                  \
        &::gdn::delta_rule::cpu_size<Problem, &detail::NAME##_backward_workspace>, /*packed=*/true \
  }
