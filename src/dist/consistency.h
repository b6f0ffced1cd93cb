// Checks that the ranks of a run agree, so a mismatch is a clear error on every rank at start
// instead of a hang or a silent divergence later: each rank contributes named values (config
// hash, parameter count, parameter checksum), all are gathered, and every rank compares them
// with rank 0's, naming the first rank that differs and both values.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/dist/communicator.h"

namespace gdn::dist {

// 64-bit FNV-1a of a byte string (the config hash: of the resolved YAML).
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 14695981039346656037ull);
inline uint64_t hash_string(const std::string& s) {
  return hash_bytes(s.data(), s.size());
}
// A checksum of the tensors' bytes, in order (copied to the host for CUDA; meta: shapes only).
uint64_t tensors_checksum(const std::vector<Tensor>& tensors);

// Collective. Throws on every rank when some rank's values differ from rank 0's; `hint` ends
// the message (what to do about it).
void check_ranks_agree(Communicator& comm,
                       const std::vector<std::pair<std::string, int64_t>>& values,
                       const std::string& hint);

}  // namespace gdn::dist
