// TraceRange: NVTX push/pop (header-only NVTX v3 from the CUDA toolkit).
#include "src/core/trace.h"

#if defined(GDN_WITH_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace gdn {

#if defined(GDN_WITH_CUDA)
TraceRange::TraceRange(const std::string& name) {
  nvtxRangePushA(name.c_str());
}
TraceRange::~TraceRange() {
  nvtxRangePop();
}
#else
TraceRange::TraceRange(const std::string&) {}
TraceRange::~TraceRange() {}
#endif

}  // namespace gdn
