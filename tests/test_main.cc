// GoogleTest main for every test binary. A file that needs CUDA calls GDN_TEST_REQUIRES_CUDA()
// at namespace scope; without a device the binary exits 77, which CTest reports as skipped.
#include <gtest/gtest.h>

#include <cstdio>

#include "src/core/device.h"
#include "tests/test_util.h"

namespace gdn::test {
bool& requires_cuda_flag() {
  static bool flag = false;
  return flag;
}
}  // namespace gdn::test

int main(int argc, char** argv) {
  if (gdn::test::requires_cuda_flag() && gdn::cuda_device_count() == 0) {
    std::printf("no CUDA device: skipping (exit 77)\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
