// Document packing: the scan for document ends, the split into pieces, best-fit decreasing, the
// per-epoch permutation and the rows of a batch (src/data/packing.h).
#include "src/data/packing.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "kernels/philox.h"
#include "src/core/error.h"

namespace gdn::data {

namespace {

// [start, end) of every document: each ends after an eos, the last at the shard's end.
std::vector<std::pair<int64_t, int64_t>> documents(const Shard& shard, int32_t eos_id) {
  std::vector<std::pair<int64_t, int64_t>> docs;
  constexpr int64_t kBlock = int64_t(1) << 20;
  std::vector<int32_t> buf(static_cast<size_t>(kBlock));
  int64_t begin = 0;
  for (int64_t at = 0; at < shard.size(); at += kBlock) {
    const int64_t n = std::min(kBlock, shard.size() - at);
    shard.read(at, n, buf.data());
    for (int64_t i = 0; i < n; ++i)
      if (buf[size_t(i)] == eos_id) {
        docs.emplace_back(begin, at + i + 1);
        begin = at + i + 1;
      }
  }
  if (begin < shard.size()) docs.emplace_back(begin, shard.size());
  return docs;
}

struct Piece {
  int64_t start, len;
};

// Pieces of row_tokens overlapping by one token (piece i of a document starts at i * (row - 1)).
void split(int64_t begin, int64_t end, int64_t row, std::vector<Piece>& full,
           std::vector<Piece>& partial) {
  for (int64_t s = begin; end - s >= 2; s += row - 1) {
    const int64_t len = std::min(row, end - s);
    (len == row ? full : partial).push_back({s, len});
    if (s + len == end) break;
  }
}

}  // namespace

int64_t PackedRows::used_tokens() const {
  return std::accumulate(piece_len.begin(), piece_len.end(), int64_t(0));
}

PackedRows pack_documents(const Shard& shard, int32_t eos_id, int64_t seq_len) {
  GDN_CHECK(seq_len >= 1, "pack_documents: seq_len must be >= 1, got ", seq_len);
  PackedRows out;
  out.row_tokens = seq_len + 1;
  out.pad_id = eos_id;
  const auto docs = documents(shard, eos_id);
  out.num_documents = int64_t(docs.size());
  std::vector<Piece> full, partial;
  for (const auto& [b, e] : docs) split(b, e, out.row_tokens, full, partial);
  std::vector<std::vector<Piece>> rows;
  for (const Piece& p : full) rows.push_back({p});
  // Best-fit decreasing: longest first (stable: ties keep shard order), each into the row with
  // the least room that holds it.
  std::stable_sort(partial.begin(), partial.end(),
                   [](const Piece& a, const Piece& b) { return a.len > b.len; });
  std::multimap<int64_t, size_t> room;  // room left -> row
  for (const Piece& p : partial) {
    auto it = room.lower_bound(p.len);
    size_t r;
    int64_t left;
    if (it == room.end()) {
      r = rows.size();
      rows.push_back({});
      left = out.row_tokens;
    } else {
      r = it->second;
      left = it->first;
      room.erase(it);
    }
    rows[r].push_back(p);
    if (left - p.len >= 2) room.emplace(left - p.len, r);  // a piece has at least 2 tokens
  }
  GDN_CHECK(!rows.empty(), "token shard '", shard.path(), "': no document of 2 or more tokens ",
            "to pack (data.pack: documents)");
  // Rows in shard order of their first piece: validation, which takes the first rows in layout
  // order, then reads from the start of the shard as stream windows do, document ends included.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const std::vector<Piece>& a, const std::vector<Piece>& b) {
                     return a.front().start < b.front().start;
                   });
  out.row_begin.push_back(0);
  for (const auto& row : rows) {
    for (const Piece& p : row) {
      out.piece_start.push_back(p.start);
      out.piece_len.push_back(p.len);
    }
    out.row_begin.push_back(int64_t(out.piece_start.size()));
  }
  return out;
}

int64_t permuted_row(int64_t index, int64_t num_rows, uint64_t seed) {
  GDN_CHECK(index >= 0 && num_rows >= 1, "permuted_row: bad arguments (index ", index, ", rows ",
            num_rows, ")");
  const uint64_t n = uint64_t(num_rows), epoch = uint64_t(index) / n;
  int half = 1;  // a Feistel network on [0, 4^half) >= n, walked until it lands below n
  while ((uint64_t(1) << (2 * half)) < n) ++half;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  uint64_t x = uint64_t(index) % n;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = kern::philox4x32(((epoch * 4 + round) << 32) | right, seed).x[0];
      const uint64_t next = left ^ (f & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return int64_t(x);
}

template <typename T>
void fill_packed_row(const Shard& shard, const PackedRows& rows, int64_t row, T* tokens, T* targets,
                     int64_t base, std::vector<int64_t>& cu, int64_t ignore) {
  const int64_t width = rows.row_tokens, seq_len = width - 1;
  std::vector<int32_t> ids(static_cast<size_t>(width), rows.pad_id);
  std::vector<bool> last(static_cast<size_t>(width), false);   // a piece's last token
  std::vector<int32_t> scored(static_cast<size_t>(width), 1);  // the loss mask's flags
  const Shard* mask = shard.loss_mask();
  int64_t used = 0;
  for (int64_t p = rows.row_begin[size_t(row)]; p < rows.row_begin[size_t(row) + 1]; ++p) {
    const int64_t len = rows.piece_len[size_t(p)];
    shard.read(rows.piece_start[size_t(p)], len, ids.data() + used);
    if (mask) mask->read(rows.piece_start[size_t(p)], len, scored.data() + used);
    cu.push_back(base + used);
    used += len;
    last[size_t(used - 1)] = true;
  }
  if (used < seq_len) cu.push_back(base + used);  // the padding: a sequence of its own
  for (int64_t t = 0; t < width; ++t) {
    const int32_t id = ids[size_t(t)];
    GDN_CHECK(id >= 0 && id < shard.vocab_size(), "token shard '", shard.path(), "': token ", id,
              " is >= the vocab size ", shard.vocab_size());
    tokens[t] = T(id);
  }
  for (int64_t t = 0; t < seq_len; ++t)
    targets[t] = last[size_t(t)] || t >= used || !scored[size_t(t + 1)] ? T(ignore) : tokens[t + 1];
}

template void fill_packed_row<int32_t>(const Shard&, const PackedRows&, int64_t, int32_t*, int32_t*,
                                       int64_t, std::vector<int64_t>&, int64_t);
template void fill_packed_row<int64_t>(const Shard&, const PackedRows&, int64_t, int64_t*, int64_t*,
                                       int64_t, std::vector<int64_t>&, int64_t);

}  // namespace gdn::data
