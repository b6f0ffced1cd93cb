// Agreement checks across ranks: hashing, checksums, gather and compare.
#include "src/dist/consistency.h"

#include <cstdio>
#include <cstring>

#include "src/ops/ops.h"

namespace gdn::dist {

namespace {
constexpr uint64_t kPrime = 1099511628211ull;

std::string show(const std::string& name, int64_t v) {
  if (name.find("hash") != std::string::npos || name.find("checksum") != std::string::npos) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)uint64_t(v));
    return buf;
  }
  return std::to_string(v);
}
}  // namespace

uint64_t hash_bytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  // Eight bytes per round (FNV-1a on words): checksumming a model's weights stays cheap.
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kPrime;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * kPrime;
  return h;
}

uint64_t tensors_checksum(const std::vector<Tensor>& tensors) {
  uint64_t h = 14695981039346656037ull;
  for (const Tensor& t0 : tensors) {
    for (int64_t d : t0.shape()) h = (h ^ uint64_t(d)) * kPrime;
    if (t0.device().is_meta()) continue;
    Tensor t = ops::contiguous(t0.device().is_cpu() ? t0 : ops::to_device(t0, Device::cpu()));
    h = hash_bytes(t.data_ptr(), t.nbytes(), h);
  }
  return h;
}

void check_ranks_agree(Communicator& comm,
                       const std::vector<std::pair<std::string, int64_t>>& values,
                       const std::string& hint) {
  if (comm.size() == 1 || values.empty()) return;
  std::vector<int64_t> mine;
  for (const auto& [name, v] : values) mine.push_back(v);
  const std::vector<int64_t> all = comm.all_gather_host(mine);
  const size_t n = values.size();
  for (int r = 1; r < comm.size(); ++r) {
    std::string diff;
    for (size_t k = 0; k < n; ++k) {
      const int64_t v0 = all[k], vr = all[size_t(r) * n + k];
      if (v0 == vr) continue;
      diff += str_cat(diff.empty() ? "" : "; ", values[k].first, " ", show(values[k].first, vr),
                      " on rank ", r, " but ", show(values[k].first, v0), " on rank 0");
    }
    if (!diff.empty())
      GDN_FAIL("ranks disagree (", comm.size(), " ranks, seen on rank ", comm.rank(), "): ", diff,
               ". ", hint);
  }
}

}  // namespace gdn::dist
