// Token shards: a 64-byte header, then the tokens, little-endian, 2 or 4 bytes each.
//
//   offset  size  field
//        0     8  magic "GDNTOK\0\0"
//        8     4  version (u32, = 1)
//       12     4  token width in bytes (u32, 2 or 4)
//       16     8  token count (u64)
//       24     8  vocab size (u64; every token is < vocab size)
//       32    32  reserved, zero
//       64        tokens
//
// A loss mask (prompt/completion data, prepare.h) has the same layout with magic "GDNMASK\0",
// version 1, width 1 and vocab size 2: one byte per token of the shard it sits beside, 1 where the
// token is a scored target (a completion token or its eos), 0 where it is not (a prompt token).
//
// Written through a temporary name and renamed, so a crash never leaves a half shard; read
// through mmap and validated on open (magic, version, width, file size == 64 + count * width),
// each error naming the file, the field, its byte offset, and the expected and actual values.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace gdn::data {

inline constexpr char kShardMagic[8] = {'G', 'D', 'N', 'T', 'O', 'K', '\0', '\0'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 64;
inline constexpr char kLossMaskMagic[8] = {'G', 'D', 'N', 'M', 'A', 'S', 'K', '\0'};
inline constexpr uint32_t kLossMaskVersion = 1;

// What a file of this layout holds: token ids, or a loss mask's 0/1 flags.
enum class ShardKind { tokens, loss_mask };

// The loss mask beside a token shard: DIR/NAME.bin -> DIR/NAME.mask.bin.
std::string loss_mask_path(const std::string& shard_path);

// 2 when every id of the vocabulary fits in a u16, else 4.
uint32_t token_bytes_for_vocab(int64_t vocab_size);

// Streams tokens into a shard. Nothing appears at `path` until finish().
class ShardWriter {
 public:
  // token_bytes 0 picks token_bytes_for_vocab(vocab_size). A loss mask: vocab_size 2, width 1.
  ShardWriter(const std::string& path, int64_t vocab_size, uint32_t token_bytes = 0,
              ShardKind kind = ShardKind::tokens);
  ~ShardWriter();  // removes the temporary file when finish() did not run
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Throws on a token outside [0, vocab_size).
  void append(const int32_t* ids, size_t n);
  void append(const std::vector<int32_t>& ids) { append(ids.data(), ids.size()); }
  int64_t count() const { return count_; }
  // Writes the header, syncs and renames the temporary file to `path`.
  void finish();

 private:
  std::string path_, tmp_path_;
  int64_t vocab_size_;
  uint32_t token_bytes_;
  ShardKind kind_;
  int64_t count_ = 0;
  std::FILE* file_ = nullptr;
  std::vector<uint8_t> buffer_;
  void flush_buffer();
};

void write_shard(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size,
                 uint32_t token_bytes = 0);

// A read-only, memory-mapped shard. Shared between loaders (and their threads) by shared_ptr.
class Shard {
 public:
  // Validates the header and the file size; with check_tokens also scans every token.
  static std::shared_ptr<const Shard> open(const std::string& path, bool check_tokens = false,
                                           ShardKind kind = ShardKind::tokens);
  // A token shard with its loss mask: every flag checked to be 0 or 1, the counts equal.
  static std::shared_ptr<const Shard> open_masked(const std::string& path,
                                                  const std::string& mask_path);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }  // tokens
  int64_t vocab_size() const { return vocab_size_; }
  uint32_t token_bytes() const { return token_bytes_; }

  // Token i (range-checked).
  int32_t at(int64_t i) const;
  // Tokens [start, start + n) into out (range-checked).
  void read(int64_t start, int64_t n, int32_t* out) const;
  std::vector<int32_t> read(int64_t start, int64_t n) const;
  // Throws at the first token >= vocab size, naming its index and byte offset.
  void check_tokens() const;
  // The loss mask opened with it (open_masked), else null: every target is scored.
  const Shard* loss_mask() const { return loss_mask_.get(); }

 private:
  Shard() = default;
  static std::shared_ptr<Shard> map(const std::string& path, ShardKind kind);
  const char* what() const { return kind_ == ShardKind::tokens ? "token shard" : "loss mask"; }
  std::string path_;
  ShardKind kind_ = ShardKind::tokens;
  std::shared_ptr<const Shard> loss_mask_;
  int64_t count_ = 0, vocab_size_ = 0;
  uint32_t token_bytes_ = 0;
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
};

}  // namespace gdn::data
