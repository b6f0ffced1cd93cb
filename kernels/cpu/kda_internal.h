// Internal helpers of the CPU Kimi Delta Attention kernels (kda_*.cpp) and their entry points:
// argument checks (kernels/delta_rule_checks.h), the time-major offsets of kernels/kda.h, and the
// slice loop, which is the gated delta rule's (kernels/cpu/gdr_internal.h) over
// kda::Problem::as_gdr().
#pragma once
#include <cstdint>

#include "kernels/cpu/gdr_internal.h"
#include "kernels/delta_rule_checks.h"
#include "kernels/kda.h"

namespace gdn::kda {

// What the argument checks (kernels/delta_rule_checks.h) name; every implementation reads beta.
inline delta_rule::Checked check_context(const Problem& p, const char* device) {
  return {"kda", impl_name(p.impl), device};
}

}  // namespace gdn::kda

namespace gdn::kda::detail {

using delta_rule::check_backward_args;
using delta_rule::check_forward_args;
// Offsets at token `tok` of the B * T (flattened) tokens; g per channel: gk_offset, beta:
// gate_offset.
using delta_rule::gate_offset;
using delta_rule::gk_offset;
using delta_rule::qk_offset;
using delta_rule::vo_offset;
using gdr::detail::Carver;
using gdr::detail::copy_or_zero;
using gdr::detail::Slice;

// The sequences of p, each chunked from its own first token.
inline gdr::Sequences sequences(const Problem& p) {
  return gdr::sequences(p.as_gdr());
}

// Runs body(slice, w) over the value slices (sequence, value head) (forward) or the key slices
// (sequence, key head) (backward) of seqs in parallel; Scratch(one, base, backward) carves a
// slice's scratch (one: a gdr::Problem of the longest sequence).
template <class Scratch, typename A, class Body>
void for_each_slice(const Problem& p, const gdr::Sequences& seqs, bool backward, A* ws,
                    const Body& body) {
  gdr::detail::for_each_slice<Scratch>(p.as_gdr(), seqs, backward, ws, body);
}

// Workspace of an implementation whose slices carve Scratch: one set per slice, up to the cap.
template <class Scratch>
int64_t slices_workspace(const Problem& p, const gdr::Sequences& seqs, bool backward) {
  return gdr::detail::slices_workspace<Scratch>(p.as_gdr(), seqs, backward);
}

// Entry points (one file each, kernels/cpu/delta_rule_entries.h), held by the registry; every
// implementation runs its slices with scratch of its own (GDN_DELTA_RULE_DEFINE_BY_SLICES over
// sequences).
GDN_DELTA_RULE_DECLARE(recurrent)
GDN_DELTA_RULE_DECLARE(chunked)

}  // namespace gdn::kda::detail
