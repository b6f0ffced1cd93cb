// Error construction, out of line so the check macro stays small at every call site.
#include "src/core/error.h"

#include <cstring>

namespace gdn::detail {

void throw_error(const char* file, int line, const std::string& msg) {
  const char* base = std::strstr(file, "src/");
  if (!base) base = std::strstr(file, "layers/");
  if (!base) base = std::strstr(file, "kernels/");
  if (!base) base = std::strstr(file, "optim/");
  if (!base) base = file;
  throw Error(msg + " [" + base + ":" + std::to_string(line) + "]");
}

}  // namespace gdn::detail
