// Storage lifetime and category bookkeeping.
#include "src/core/storage.h"

namespace gdn {

Storage::Storage(size_t bytes, Device device, MemCategory category)
    : bytes_(bytes), device_(device), category_(category), base_category_(category) {
  data_ = allocator_for(device).allocate(bytes, category);
}

Storage::~Storage() {
  allocator_for(device_).deallocate(data_, bytes_, category_);
}

void Storage::set_category(MemCategory c) {
  allocator_for(device_).retag(bytes_, category_, c);
  category_ = base_category_ = c;
}

void Storage::mark_saved() {
  if (saved_count_++ == 0 && base_category_ == MemCategory::temp) {
    allocator_for(device_).retag(bytes_, category_, MemCategory::activation);
    category_ = MemCategory::activation;
  }
}

void Storage::unmark_saved() {
  if (--saved_count_ == 0 && category_ != base_category_) {
    allocator_for(device_).retag(bytes_, category_, base_category_);
    category_ = base_category_;
  }
}

}  // namespace gdn
