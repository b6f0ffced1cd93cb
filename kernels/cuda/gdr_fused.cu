// The fused gated delta rule on CUDA: one kernel launch for the forward, one for the backward. A
// block per (batch, value head, V tile) walks the chunks with the state tile and every
// chunk-local matrix in shared memory (gdr_fused_block.h); bf16 products run on tensor cores
// (mma.sync, fp32 accumulation), fp32 and fp64 ones on the CUDA cores. Nothing but the outputs,
// the chunk-start states (the residual) and the backward's running sums of dq, dk, dg, dbeta (one
// copy, added to block after block in a fixed order) touches global memory. The plan
// (gdr_fused_plan.h) picks the V tile and, where the chunk does not fit, sub-chunks from the
// device's shared memory, multiprocessor count and the kernels' registers; sizes it cannot cover
// run the chunked kernels instead (gdr_dispatch.cu).
#include <cuda_runtime.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/cuda/gdr_common.cuh"
#include "kernels/cuda/gdr_fused_launch.cuh"

namespace gdn::gdr::cuda_detail {

namespace {

// Registers per thread of the library's fused kernel for one direction and input type.
template <typename T>
int kernel_regs(bool backward) {
  cudaFuncAttributes attr{};
  if (backward) {
    GDN_KCUDA_CHECK(cudaFuncGetAttributes(&attr, fused::backward_kernel<fused::LibraryBlock, T>));
  } else {
    GDN_KCUDA_CHECK(cudaFuncGetAttributes(&attr, fused::forward_kernel<fused::LibraryBlock, T>));
  }
  return attr.numRegs;
}

// The current device's opt-in shared memory per block, multiprocessor count and the fused
// kernels' registers per thread, [backward][bf16, fp32, fp64] (cached).
struct DeviceLimits {
  int64_t smem_optin = 0, sms = 0;
  int regs[2][3] = {};
  int regs_of(bool backward, int64_t in_bytes) const {
    return regs[backward][in_bytes == 2 ? 0 : (in_bytes == 4 ? 1 : 2)];
  }
};
DeviceLimits device_limits() {
  static std::mutex mu;
  static std::vector<DeviceLimits> cache;
  int dev = 0;
  GDN_KCUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (int(cache.size()) <= dev) cache.resize(dev + 1);
  if (cache[dev].sms == 0) {
    int smem = 0, sms = 0;
    GDN_KCUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    GDN_KCUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    DeviceLimits& lim = cache[dev];
    for (int backward = 0; backward < 2; ++backward) {
      lim.regs[backward][0] = kernel_regs<bf16>(backward);
      lim.regs[backward][1] = kernel_regs<float>(backward);
      lim.regs[backward][2] = kernel_regs<double>(backward);
    }
    lim.smem_optin = smem;
    lim.sms = sms;  // last: marks the entry filled
  }
  return cache[dev];
}

// What a plan depends on: the device, the pass, the input width and the Problem's shape, packing
// and forced variants.
using PlanKey = std::tuple<int, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int, int64_t, int64_t, std::vector<int64_t>>;

}  // namespace

// Planned once per key on each host thread (a call asks for its plan a few times: workspace,
// fallback, launch); a process that runs very many shapes drops them all past 256.
fused::Plan fused_plan(const Problem& p, bool backward, int64_t in_bytes) {
  int device = 0;
  GDN_KCUDA_CHECK(cudaGetDevice(&device));
  thread_local std::map<PlanKey, fused::Plan> plans;
  PlanKey key{device, backward, in_bytes, p.B,        p.T,         p.H,         p.HV,
              p.K,    p.V,      p.chunk,  p.fused_vt, p.fused_sub, p.cu_seqlens};
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  if (plans.size() >= 256) plans.clear();
  const DeviceLimits lim = device_limits();
  return plans
      .emplace(std::move(key),
               fused::plan(p, backward, in_bytes, lim.smem_optin, lim.sms, p.fused_vt,
                           lim.regs_of(backward, in_bytes), p.fused_sub))
      .first->second;
}

template <typename T>
void fused_forward(const Problem& p, const Inputs<T>& in, const ForwardOutputs<T>& out,
                   cudaStream_t stream) {
  using A = acc_t<T>;
  const fused::Plan pl = fused_plan(p, false, sizeof(T));
  if (!pl.ok) throw std::invalid_argument("gdr fused (CUDA) forward: " + pl.why);
  // the forward's workspace is a packed Problem's sequence table alone
  const fused::Dims d =
      fused::dims_of(p, pl.vt, pl.sub, upload_seq_table(p, out.workspace, stream));
  const fused::ForwardArgs<T> args{in.q,  in.k,  in.v,   in.g,        in.beta,
                                   in.h0, out.o, out.ht, out.residual};
  fused::launch_forward<fused::LibraryBlock, T>(pl, d, args, stream);
}

template <typename T>
void fused_backward(const Problem& p, const Inputs<T>& in, const BackwardArgs<T>& a,
                    cudaStream_t stream) {
  using A = acc_t<T>;
  const fused::Plan pl = fused_plan(p, true, sizeof(T));
  if (!pl.ok) throw std::invalid_argument("gdr fused (CUDA) backward: " + pl.why);
  // the workspace: the running sums and flags, then a packed Problem's sequence table
  const int64_t table_at =
      cuda_seqs::seq_table_offset(fused::backward_workspace(p, sizeof(T), pl.sub));
  const fused::Dims d =
      fused::dims_of(p, pl.vt, pl.sub, upload_seq_table(p, a.workspace + table_at, stream));
  const fused::BackwardArgs<T> args{in.q,  in.k,  in.v,       in.g,        in.beta,
                                    a.d_o, a.dht, a.residual, a.workspace, a.dq,
                                    a.dk,  a.dv,  a.dg,       a.dbeta,     a.dh0};
  fused::launch_backward<fused::LibraryBlock, T>(pl, d, args, stream);
}

GDN_GDR_CUDA_INSTANTIATE_FWD(fused_forward, cudaStream_t)
GDN_GDR_CUDA_INSTANTIATE_BWD(fused_backward)

}  // namespace gdn::gdr::cuda_detail
