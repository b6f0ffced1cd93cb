// The pointers a delta-rule kernel takes, the same for every family: the gated delta rule
// (kernels/gated_delta_rule.h: g [B, T, HV]) and Kimi Delta Attention (kernels/kda.h: g per key
// channel, [B, T, HV, K]). Each family's namespace names them (gdr::Inputs, kda::Inputs, ...).
#pragma once
#include "kernels/numeric.h"

namespace gdn::delta_rule {

template <typename T>
struct Inputs {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* g = nullptr;          // [B, T, HV], or per channel [B, T, HV, K] (kda)
  const T* beta = nullptr;       // [B, T, HV]; null for ssd
  const acc_t<T>* h0 = nullptr;  // [N, HV, K, V] when p.has_h0
};

template <typename T>
struct ForwardOutputs {
  T* o = nullptr;                 // [B, T, HV, V]
  acc_t<T>* ht = nullptr;         // [N, HV, K, V] when p.want_ht
  acc_t<T>* residual = nullptr;   // residual_elems(p)
  acc_t<T>* workspace = nullptr;  // forward_workspace_elems(p)
};

template <typename T>
struct BackwardArgs {
  const T* d_o = nullptr;              // [B, T, HV, V]
  const acc_t<T>* dht = nullptr;       // [N, HV, K, V] when want_ht; may be null (zero)
  const acc_t<T>* residual = nullptr;  // what the forward saved
  acc_t<T>* workspace = nullptr;       // backward_workspace_elems(p)
  T* dq = nullptr;                     // [B, T, H, K] (summed over the value heads of a group)
  T* dk = nullptr;                     // [B, T, H, K]
  T* dv = nullptr;                     // [B, T, HV, V]
  T* dg = nullptr;                     // g's shape
  T* dbeta = nullptr;                  // [B, T, HV] (unused for ssd)
  acc_t<T>* dh0 = nullptr;             // [N, HV, K, V] when p.has_h0
};

}  // namespace gdn::delta_rule
