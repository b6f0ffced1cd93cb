// Allocators, one per device, with allocation accounting by category.
//
// Every allocation is tagged with the category current on the allocating thread
// (MemoryCategoryScope); a temp buffer that autograd saves for backward is re-tagged
// `activation` while it is saved. Stats count requested bytes, so meta, cpu and cuda report the
// same numbers for the same program; the CUDA caching allocator reports its reserve separately.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "src/core/device.h"

namespace gdn {

enum class MemCategory : uint8_t { param, grad, optim, activation, temp, workspace };
constexpr int kNumMemCategories = 6;
const char* mem_category_name(MemCategory c);

struct MemoryStats {
  std::array<int64_t, kNumMemCategories> current{};  // bytes live now, per category
  std::array<int64_t, kNumMemCategories> max{};      // each category's own high-water mark
  std::array<int64_t, kNumMemCategories> at_peak{};  // per category at the total peak
  int64_t total = 0;                                 // bytes live now
  int64_t peak = 0;                                  // high-water mark of total
  int64_t num_allocs = 0;                            // allocations since start
  int64_t reserved = 0;  // bytes held from the system (CUDA caching allocator; else = total)
  int64_t cur(MemCategory c) const { return current[int(c)]; }
};

class Allocator {
 public:
  explicit Allocator(Device device) : device_(device) {}
  virtual ~Allocator() = default;
  // Tagged allocation; null data for meta. Throws gdn::Error on out of memory.
  void* allocate(size_t bytes, MemCategory cat);
  void deallocate(void* ptr, size_t bytes, MemCategory cat);
  // Moves `bytes` from one category to another (e.g. temp -> activation when saved).
  void retag(size_t bytes, MemCategory from, MemCategory to);
  MemoryStats stats() const;
  void reset_peak();  // peak and per-category maxima restart from the current values
  Device device() const { return device_; }
  // Releases cached blocks back to the system (CUDA); no-op elsewhere.
  virtual void empty_cache() {}

 protected:
  virtual void* raw_allocate(size_t bytes) = 0;
  virtual void raw_deallocate(void* ptr, size_t bytes) = 0;
  virtual int64_t reserved_bytes() const { return -1; }

 private:
  void add(MemCategory cat, int64_t bytes);
  void notify() const;  // the memory observer, if set (the lock held)
  Device device_;
  mutable std::mutex mu_;
  MemoryStats stats_;
};

Allocator& allocator_for(Device device);
MemoryStats memory_stats(Device device);
void reset_peak_memory(Device device);

MemCategory current_mem_category();

// Called after every change of a device's live bytes (allocation, deallocation, retag) with its
// stats, under the allocator's lock (so it must not allocate tensors). Off (null) by default, when
// it costs one relaxed atomic load; `gdn profile-memory` sets it to record a timeline of the step
// (src/train/memory_timeline.h).
using MemoryObserver = void (*)(Device device, const MemoryStats& stats);
void set_memory_observer(MemoryObserver observer);

// Tags allocations made by this thread while it lives.
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemCategory cat);
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  MemCategory previous_;
};

std::string format_bytes(int64_t bytes);  // "12.3 MiB"

}  // namespace gdn
