// CPU and meta allocators and the shared accounting.
#include "src/core/allocator.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <map>
#include <memory>

#include "kernels/trace_events.h"
#include "src/core/error.h"

#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_allocator.h"
#endif

namespace gdn {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::param:
      return "param";
    case MemCategory::grad:
      return "grad";
    case MemCategory::optim:
      return "optim";
    case MemCategory::activation:
      return "activation";
    case MemCategory::temp:
      return "temp";
    case MemCategory::workspace:
      return "workspace";
  }
  return "?";
}

namespace {
std::atomic<MemoryObserver> g_memory_observer{nullptr};
}  // namespace

void set_memory_observer(MemoryObserver observer) {
  g_memory_observer.store(observer);
}

void Allocator::notify() const {
  if (const MemoryObserver observer = g_memory_observer.load(std::memory_order_relaxed))
    observer(device_, stats_);
}

void Allocator::add(MemCategory cat, int64_t bytes) {
  int c = int(cat);
  stats_.current[c] += bytes;
  stats_.total += bytes;
  if (stats_.current[c] > stats_.max[c]) stats_.max[c] = stats_.current[c];
  if (stats_.total > stats_.peak) {
    stats_.peak = stats_.total;
    stats_.at_peak = stats_.current;
  }
}

namespace {
// Allocator calls on every device, for the trace's spans (kernels/trace_events.h).
std::atomic<int64_t> g_alloc_calls{0};
int64_t alloc_calls() {
  return g_alloc_calls.load(std::memory_order_relaxed);
}
[[maybe_unused]] const bool kTraceCountsAllocs = (trace::set_alloc_counter(&alloc_calls), true);
}  // namespace

void* Allocator::allocate(size_t bytes, MemCategory cat) {
  g_alloc_calls.fetch_add(1, std::memory_order_relaxed);
  void* p = bytes ? raw_allocate(bytes) : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  add(cat, int64_t(bytes));
  stats_.num_allocs++;
  notify();
  return p;
}

void Allocator::deallocate(void* ptr, size_t bytes, MemCategory cat) {
  if (bytes) raw_deallocate(ptr, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  add(cat, -int64_t(bytes));
  notify();
}

void Allocator::retag(size_t bytes, MemCategory from, MemCategory to) {
  if (from == to) return;
  std::lock_guard<std::mutex> lock(mu_);
  // Remove first so that moving bytes between categories never raises the total peak.
  add(from, -int64_t(bytes));
  add(to, int64_t(bytes));
  notify();
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats s = stats_;
  int64_t r = reserved_bytes();
  s.reserved = r < 0 ? s.total : r;
  return s;
}

void Allocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.total;
  stats_.max = stats_.current;
  stats_.at_peak = stats_.current;
}

namespace {

// 64-byte aligned host memory (cache lines; AVX-512 loads).
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : Allocator(Device::cpu()) {
#if defined(__GLIBC__)
    // A training step frees and re-allocates the same activation sizes every step. By default
    // glibc serves blocks of up to 32 MiB from fresh mmaps or trims them back to the system, so
    // each step page-faults its activations in again (about half of a default run's page faults).
    // Keep such blocks in the heap and freed heap memory mapped.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  }

 protected:
  void* raw_allocate(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    GDN_CHECK(p, "out of host memory allocating ", format_bytes(int64_t(bytes)),
              " (profile with `gdn profile-memory`)");
    return p;
  }
  void raw_deallocate(void* ptr, size_t) override {
    std::free(ptr);
  }
};

// Accounting only: meta tensors have no data.
class MetaAllocator final : public Allocator {
 public:
  MetaAllocator() : Allocator(Device::meta()) {}

 protected:
  void* raw_allocate(size_t) override { return nullptr; }
  void raw_deallocate(void*, size_t) override {}
};

thread_local MemCategory t_category = MemCategory::temp;

}  // namespace

Allocator& allocator_for(Device device) {
  static CpuAllocator cpu;
  static MetaAllocator meta;
  switch (device.type) {
    case DeviceType::cpu:
      return cpu;
    case DeviceType::meta:
      return meta;
    case DeviceType::cuda:
#if defined(GDN_WITH_CUDA)
      return cuda::caching_allocator(device.index);
#else
      GDN_FAIL("device ", device.str(), " requested but gdn was built without CUDA");
#endif
  }
  GDN_FAIL("unknown device");
}

MemoryStats memory_stats(Device device) {
  return allocator_for(device).stats();
}
void reset_peak_memory(Device device) {
  allocator_for(device).reset_peak();
}

MemCategory current_mem_category() {
  return t_category;
}

MemoryCategoryScope::MemoryCategoryScope(MemCategory cat) : previous_(t_category) {
  t_category = cat;
}
MemoryCategoryScope::~MemoryCategoryScope() {
  t_category = previous_;
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  double b = double(bytes);
  const char* sign = b < 0 ? "-" : "";
  b = b < 0 ? -b : b;
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%s%.2f GiB", sign, b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%s%.1f MiB", sign, b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(buf, sizeof buf, "%s%.1f KiB", sign, b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%s%.0f B", sign, b);
  return buf;
}

}  // namespace gdn
