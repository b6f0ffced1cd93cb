// Device names and parsing.
#include "src/core/device.h"

#include "src/core/error.h"

#if defined(GDN_WITH_CUDA)
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn {

std::string Device::str() const {
  switch (type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::meta:
      return "meta";
    case DeviceType::cuda:
      return "cuda:" + std::to_string(index);
  }
  return "?";
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "meta") return Device::meta();
  if (s == "auto") return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
  if (s == "cuda" || s.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (s.size() > 5) {
      try {
        size_t used = 0;
        index = std::stoi(s.substr(5), &used);
        GDN_CHECK(used == s.size() - 5 && index >= 0, "bad device '", s, "'");
      } catch (const std::logic_error&) {
        GDN_FAIL("bad device '", s, "' (expected cuda or cuda:N)");
      }
    }
    GDN_CHECK(cuda_compiled(), "device '", s, "' requested but gdn was built without CUDA");
    int n = cuda_device_count();
    GDN_CHECK(index < n, "device '", s, "' requested but ", n, " CUDA device(s) are present");
    return Device::cuda(index);
  }
  GDN_FAIL("unknown device '", s, "' (expected cpu, cuda, cuda:N, meta or auto)");
}

bool cuda_compiled() {
#if defined(GDN_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#if defined(GDN_WITH_CUDA)
  return cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace gdn
