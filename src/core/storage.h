// A block of device memory owned by one or more tensors, freed with its last owner.
#pragma once
#include <cstddef>
#include <memory>

#include "src/core/allocator.h"

namespace gdn {

class Storage {
 public:
  Storage(size_t bytes, Device device, MemCategory category);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemCategory category() const { return category_; }
  // Re-tag the whole block (e.g. a temp buffer adopted as a gradient).
  void set_category(MemCategory c);
  // Autograd marks a buffer saved for backward: a temp buffer counts as `activation` while any
  // graph node holds it, and returns to its own category when the last one lets it go.
  void mark_saved();
  void unmark_saved();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  MemCategory category_;
  MemCategory base_category_;
  int saved_count_ = 0;
};

}  // namespace gdn
