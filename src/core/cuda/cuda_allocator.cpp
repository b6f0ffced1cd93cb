// The CUDA caching allocator. Freed blocks go to a free list (per stream, best fit by size)
// instead of back to the driver, so steady-state training does no cudaMalloc. Requests are
// rounded to 512 B; a cached block serves a request of at least half its size. On out of
// memory the cache is released and the allocation retried once; then a clear error.
#include "src/core/cuda/cuda_allocator.h"

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "src/core/cuda/cuda_check.h"
#include "src/core/cuda/cuda_context.h"

namespace gdn::cuda {

namespace {

struct Block {
  size_t size = 0;
  void* stream = nullptr;
};

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int index) : Allocator(Device::cuda(index)), index_(index) {}
  ~CachingAllocator() override = default;  // the driver reclaims memory at exit

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached();
  }

 protected:
  void* raw_allocate(size_t bytes) override {
    const size_t size = (bytes + 511) / 512 * 512;
    void* stream = current_stream(index_);
    std::lock_guard<std::mutex> lock(mu_);
    auto& free_list = free_[stream];
    auto it = free_list.lower_bound(size);
    if (it != free_list.end() && it->first <= 2 * size) {
      void* p = it->second;
      live_[p] = Block{it->first, stream};
      free_list.erase(it);
      return p;
    }
    set_device(index_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached();
      err = cudaMalloc(&p, size);
    }
    // Any other error is sticky, left by an earlier kernel that faulted: not a memory problem.
    if (err != cudaSuccess && err != cudaErrorMemoryAllocation)
      GDN_FAIL("CUDA error on cuda:", index_, " allocating ", format_bytes(int64_t(size)), ": ",
               cudaGetErrorString(err),
               " (an earlier kernel probably failed; CUDA_LAUNCH_BLOCKING=1 reports it where it "
               "happens)");
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      GDN_FAIL("CUDA out of memory on cuda:", index_, " allocating ", format_bytes(int64_t(size)),
               " (", format_bytes(int64_t(reserved_)), " reserved by gdn, ",
               format_bytes(int64_t(free_b)), " free of ", format_bytes(int64_t(total_b)),
               "); see where the memory goes with `gdn profile-memory`");
    }
    reserved_ += size;
    live_[p] = Block{size, stream};
    return p;
  }

  void raw_deallocate(void* ptr, size_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    GDN_CHECK(it != live_.end(), "CUDA free of an unknown pointer");
    free_[it->second.stream].emplace(it->second.size, ptr);
    live_.erase(it);
  }

  int64_t reserved_bytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(reserved_);
  }

 private:
  void release_cached() {
    set_device(index_);
    for (auto& [stream, list] : free_) {
      // Blocks may still be in use by queued kernels on their stream.
      cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
      for (auto& [size, p] : list)
        if (cudaFree(p) == cudaSuccess) reserved_ -= size;
      list.clear();
    }
  }

  int index_;
  mutable std::mutex mu_;
  size_t reserved_ = 0;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<void*, std::multimap<size_t, void*>> free_;
};

}  // namespace

Allocator& caching_allocator(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CachingAllocator>> allocators;
  std::lock_guard<std::mutex> lock(mu);
  auto& a = allocators[device];
  if (!a) {
    GDN_CHECK(device >= 0 && device < device_count(), "CUDA device cuda:", device,
              " does not exist (", device_count(), " present)");
    a = std::make_unique<CachingAllocator>(device);
  }
  return *a;
}

}  // namespace gdn::cuda
