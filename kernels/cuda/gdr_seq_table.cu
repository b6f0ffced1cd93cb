// The sequence table of a packed Problem, copied into the kernel's workspace (gdr_seqs.h), and the
// staging copy behind it (gdn::cuda::upload_async, device_util.cuh; attention.cu's tile table too).
//
// Why a pinned staging ring: cudaMemcpyAsync from pageable memory may synchronise the host with
// the stream (the driver stages it), which would stall the host once per launch set, and a copy
// from pinned memory reads the source while the stream runs, so the source must outlive the call.
// The ring holds kSlots pinned buffers per device; a slot is written again only after the event
// recorded behind its last copy has completed (in practice long done: kSlots launch sets ago).
// The table is a few bytes per sequence; passing it by value as a kernel parameter would cap the
// number of sequences, and a second path beyond the cap would double what needs testing.
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cuda/gdr_common.cuh"

namespace gdn::gdr::cuda_detail {

namespace {

class StagingRing {
 public:
  // Copies `bytes` from src to the device pointer dst on `stream` through the next slot.
  void copy(const void* src, size_t bytes, void* dst, cudaStream_t stream) {
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % kSlots;
    if (slot.done) GDN_KCUDA_CHECK(cudaEventSynchronize(slot.done));  // its last copy has read it
    if (slot.bytes < bytes) {
      if (slot.host) GDN_KCUDA_CHECK(cudaFreeHost(slot.host));
      slot.host = nullptr;
      slot.bytes = 0;
      GDN_KCUDA_CHECK(cudaHostAlloc(&slot.host, bytes, cudaHostAllocDefault));
      slot.bytes = bytes;
    }
    std::memcpy(slot.host, src, bytes);
    GDN_KCUDA_CHECK(cudaMemcpyAsync(dst, slot.host, bytes, cudaMemcpyHostToDevice, stream));
    if (!slot.done) GDN_KCUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
    GDN_KCUDA_CHECK(cudaEventRecord(slot.done, stream));
  }

 private:
  static constexpr int kSlots = 16;
  struct Slot {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  Slot slots_[kSlots];
  int next_ = 0;
};

}  // namespace

const cuda_seqs::SeqSpan* upload_seq_table(const Problem& p, void* dst, cudaStream_t stream) {
  if (!p.packed()) return nullptr;
  const std::vector<cuda_seqs::SeqSpan> spans = cuda_seqs::seq_spans(p);
  gdn::cuda::upload_async(spans.data(), spans.size() * sizeof(cuda_seqs::SeqSpan), dst, stream);
  return static_cast<const cuda_seqs::SeqSpan*>(dst);
}

}  // namespace gdn::gdr::cuda_detail

namespace gdn::cuda {

void upload_async(const void* src, size_t bytes, void* dst, cudaStream_t stream) {
  // One ring per device (events belong to a device); never freed: the CUDA runtime may be gone
  // during static destruction.
  static std::mutex mu;
  static auto* rings = new std::map<int, gdr::cuda_detail::StagingRing>();
  int device = 0;
  GDN_KCUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  (*rings)[device].copy(src, bytes, dst, stream);
}

}  // namespace gdn::cuda
