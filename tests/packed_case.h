// The sizes of a packed-sequences test case (tests/test_gdr_packed.cpp,
// test_fused_emulation.cpp): each test's case adds its own fields to these.
#pragma once
#include <cstdint>
#include <vector>

namespace gdn::gdr::test_data {

struct PackedSizes {
  const char* name;
  std::vector<int64_t> lens;  // the sequences' lengths
  int64_t H, HV, K, V;
  int chunk;
};

}  // namespace gdn::gdr::test_data
