// The entry points of every delta-rule family's CPU implementations (kernels/cpu/gdr_internal.h,
// kernels/cpu/kda_internal.h), declared, defined and instantiated the same way in the family's
// detail namespace (Problem, Inputs, ... are the family's): NAME_forward_workspace,
// NAME_backward_workspace, NAME_forward<T>, NAME_backward<T>, which the family's registry holds
// (GDN_DELTA_RULE_CPU_KERNELS, kernels/device_kernels.h); its forward_cpu / backward_cpu check
// the arguments first.
#pragma once

#define GDN_DELTA_RULE_DECLARE(name)                                                        \
  int64_t name##_forward_workspace(const Problem& p);                                       \
  int64_t name##_backward_workspace(const Problem& p);                                      \
  template <typename T>                                                                     \
  void name##_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out); \
  template <typename T>                                                                     \
  void name##_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args);

// Explicit instantiations of one implementation for float, double and bf16.
#define GDN_DELTA_RULE_INSTANTIATE(name)                                       \
  template void name##_forward<float>(const Problem&, const Inputs<float>&,    \
                                      const ForwardOutputs<float>&);           \
  template void name##_forward<double>(const Problem&, const Inputs<double>&,  \
                                       const ForwardOutputs<double>&);         \
  template void name##_forward<bf16>(const Problem&, const Inputs<bf16>&,      \
                                     const ForwardOutputs<bf16>&);             \
  template void name##_backward<float>(const Problem&, const Inputs<float>&,   \
                                       const BackwardArgs<float>&);            \
  template void name##_backward<double>(const Problem&, const Inputs<double>&, \
                                        const BackwardArgs<double>&);          \
  template void name##_backward<bf16>(const Problem&, const Inputs<bf16>&,     \
                                      const BackwardArgs<bf16>&);

// Defines the entry points of an implementation that runs every slice with scratch of its own:
// Scratch<A> carves one scratch set of a slice, slices_workspace<Scratch<float>>(p, seqs,
// backward) sizes all sets, and for_each_slice<Scratch<A>>(p, seqs, backward, ws, body) runs
// the implementation's forward_slice(p, in, out, s, w) on every value Slice s and
// backward_slice(p, in, args, kh, w) on every key Slice kh (the value heads of its group in
// order, so that the dq, dk sums are deterministic), over the sequences slices_of(p); packed
// Problems run all their sequences' slices side by side.
#define GDN_DELTA_RULE_DEFINE_BY_SLICES(name, Scratch, slices_of)                            \
  int64_t name##_forward_workspace(const Problem& p) {                                       \
    return slices_workspace<Scratch<float>>(p, slices_of(p), false);                         \
  }                                                                                          \
  int64_t name##_backward_workspace(const Problem& p) {                                      \
    return slices_workspace<Scratch<float>>(p, slices_of(p), true);                          \
  }                                                                                          \
  template <typename T>                                                                      \
  void name##_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out) { \
    for_each_slice<Scratch<acc_t<T>>>(                                                       \
        p, slices_of(p), false, out.workspace,                                               \
        [&](const Slice& s, const auto& w) { forward_slice(p, in, out, s, w); });            \
  }                                                                                          \
  template <typename T>                                                                      \
  void name##_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& args) { \
    for_each_slice<Scratch<acc_t<T>>>(                                                       \
        p, slices_of(p), true, args.workspace,                                               \
        [&](const Slice& kh, const auto& w) { backward_slice(p, in, args, kh, w); });        \
  }                                                                                          \
  GDN_DELTA_RULE_INSTANTIATE(name)
