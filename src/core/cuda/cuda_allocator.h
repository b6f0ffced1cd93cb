// The CUDA caching allocator (compiled only with GDN_WITH_CUDA).
#pragma once
#include "src/core/allocator.h"

namespace gdn::cuda {

Allocator& caching_allocator(int device);

}  // namespace gdn::cuda
