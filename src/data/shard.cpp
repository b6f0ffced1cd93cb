// Token shard writer (buffered stdio, temporary file + rename) and reader (mmap + validation).
// Header fields and tokens are encoded byte by byte as little-endian, so shards move between
// hosts of either endianness.
#include "src/data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "src/core/error.h"
#include "src/io/atomic_file.h"

namespace gdn::data {

namespace {

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// The magic as a C-escaped string for error messages.
std::string escaped(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '"' && p[i] != '\\') {
      s.push_back(char(p[i]));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, p[i] == 0 ? "\\0" : "\\x%02x", p[i]);
      s += buf;
    }
  }
  return "\"" + s + "\"";
}

constexpr size_t kWriteBufferBytes = 1 << 20;

// The header's magic and version for a kind of file.
const char* magic_of(ShardKind kind) {
  return kind == ShardKind::tokens ? kShardMagic : kLossMaskMagic;
}
uint32_t version_of(ShardKind kind) {
  return kind == ShardKind::tokens ? kShardVersion : kLossMaskVersion;
}

}  // namespace

std::string loss_mask_path(const std::string& shard_path) {
  const std::string ext = ".bin";
  const bool bin = shard_path.size() >= ext.size() &&
                   shard_path.compare(shard_path.size() - ext.size(), ext.size(), ext) == 0;
  return (bin ? shard_path.substr(0, shard_path.size() - ext.size()) : shard_path) + ".mask.bin";
}

uint32_t token_bytes_for_vocab(int64_t vocab_size) {
  GDN_CHECK(vocab_size > 0 && vocab_size <= (int64_t(1) << 31),
            "token shard: vocab size must be in [1, 2^31], got ", vocab_size);
  return vocab_size <= 65536 ? 2 : 4;
}

// ---- writer ----------------------------------------------------------------------------------

ShardWriter::ShardWriter(const std::string& path, int64_t vocab_size, uint32_t token_bytes,
                         ShardKind kind)
    : path_(path), vocab_size_(vocab_size), kind_(kind) {
  const bool mask = kind == ShardKind::loss_mask;
  GDN_CHECK(!mask || (vocab_size == 2 && token_bytes <= 1), "loss mask '", path,
            "': flags are 0 or 1 (vocab size 2) in one byte, got vocab size ", vocab_size,
            " and width ", token_bytes);
  const uint32_t needed = mask ? 1 : token_bytes_for_vocab(vocab_size);
  token_bytes_ = token_bytes == 0 ? needed : token_bytes;
  GDN_CHECK(mask || token_bytes_ == 2 || token_bytes_ == 4, "shard '", path,
            "': token width must be 2 or 4 bytes, got ", token_bytes_);
  GDN_CHECK(token_bytes_ >= needed, "shard '", path, "': vocab size ", vocab_size,
            " does not fit in ", token_bytes_, "-byte tokens");
  tmp_path_ = io::temp_path_for(path);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  GDN_CHECK(file_, "cannot create '", tmp_path_, "': ", std::strerror(errno));
  // Header placeholder; finish() writes the real one once the count is known.
  uint8_t zeros[kShardHeaderBytes] = {};
  GDN_CHECK(std::fwrite(zeros, 1, sizeof zeros, file_) == sizeof zeros, "error writing '",
            tmp_path_, "': ", std::strerror(errno));
  buffer_.reserve(kWriteBufferBytes);
}

ShardWriter::~ShardWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void ShardWriter::append(const int32_t* ids, size_t n) {
  GDN_CHECK(file_, "shard '", path_, "': append after finish()");
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    GDN_CHECK(id >= 0 && id < vocab_size_, "shard '", path_, "': token ", id, " at index ",
              count_ + int64_t(i), " is outside the vocabulary [0, ", vocab_size_, ")");
    uint8_t bytes[4];
    put_le(bytes, uint32_t(id), int(token_bytes_));
    buffer_.insert(buffer_.end(), bytes, bytes + token_bytes_);
    if (buffer_.size() >= kWriteBufferBytes) flush_buffer();
  }
  count_ += int64_t(n);
}

void ShardWriter::flush_buffer() {
  if (buffer_.empty()) return;
  GDN_CHECK(std::fwrite(buffer_.data(), 1, buffer_.size(), file_) == buffer_.size(),
            "error writing '", tmp_path_, "': ", std::strerror(errno));
  buffer_.clear();
}

void ShardWriter::finish() {
  GDN_CHECK(file_, "shard '", path_, "': finish() called twice");
  flush_buffer();
  uint8_t header[kShardHeaderBytes] = {};
  std::memcpy(header, magic_of(kind_), sizeof kShardMagic);
  put_le(header + 8, version_of(kind_), 4);
  put_le(header + 12, token_bytes_, 4);
  put_le(header + 16, uint64_t(count_), 8);
  put_le(header + 24, uint64_t(vocab_size_), 8);
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(header, 1, sizeof header, file_) == sizeof header &&
                  std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) {
    std::remove(tmp_path_.c_str());
    GDN_FAIL("error writing '", tmp_path_, "': ", std::strerror(ok ? errno : err));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int rename_err = errno;
    std::remove(tmp_path_.c_str());
    GDN_FAIL("cannot rename '", tmp_path_, "' to '", path_, "': ", std::strerror(rename_err));
  }
}

void write_shard(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size,
                 uint32_t token_bytes) {
  ShardWriter w(path, vocab_size, token_bytes);
  w.append(tokens);
  w.finish();
}

// ---- reader ----------------------------------------------------------------------------------

std::shared_ptr<const Shard> Shard::open(const std::string& path, bool check_tokens,
                                         ShardKind kind) {
  std::shared_ptr<Shard> shard = map(path, kind);
  if (check_tokens) shard->check_tokens();
  return shard;
}

std::shared_ptr<const Shard> Shard::open_masked(const std::string& path,
                                                const std::string& mask_path) {
  std::shared_ptr<Shard> shard = map(path, ShardKind::tokens);
  auto mask = open(mask_path, /*check_tokens=*/true, ShardKind::loss_mask);
  GDN_CHECK(mask->size() == shard->size(), "loss mask '", mask_path, "' holds ", mask->size(),
            " flags (byte offset 16), but its token shard '", path, "' holds ", shard->size(),
            " tokens: the two come from different preparations; prepare the data again");
  shard->loss_mask_ = std::move(mask);
  return shard;
}

std::shared_ptr<Shard> Shard::map(const std::string& path, ShardKind kind) {
  std::shared_ptr<Shard> shard(new Shard());
  shard->path_ = path;
  shard->kind_ = kind;
  const char* what = shard->what();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  GDN_CHECK(fd >= 0, "cannot open ", what, " '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    GDN_FAIL("cannot stat ", what, " '", path, "': ", std::strerror(err));
  }
  const int64_t file_bytes = int64_t(st.st_size);
  if (file_bytes < kShardHeaderBytes) {
    ::close(fd);
    GDN_FAIL(what, " '", path, "': truncated header: the file is ", file_bytes,
             " bytes, the header alone needs ", kShardHeaderBytes);
  }
  void* map = ::mmap(nullptr, size_t(file_bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file
  GDN_CHECK(map != MAP_FAILED, "cannot mmap ", what, " '", path, "': ", std::strerror(map_err));
  shard->map_ = static_cast<const uint8_t*>(map);
  shard->map_bytes_ = size_t(file_bytes);

  const uint8_t* h = shard->map_;
  const char* magic = magic_of(kind);
  const bool mask = kind == ShardKind::loss_mask;
  GDN_CHECK(std::memcmp(h, magic, sizeof kShardMagic) == 0, what, " '", path,
            "': bad magic at byte offset 0: expected ",
            escaped(reinterpret_cast<const uint8_t*>(magic), 8), ", got ", escaped(h, 8),
            " (not a gdn ", what, ")");
  const uint64_t version = get_le(h + 8, 4);
  GDN_CHECK(version == version_of(kind), what, " '", path,
            "': unsupported version at byte offset 8: expected ", version_of(kind), ", got ",
            version);
  const uint64_t width = get_le(h + 12, 4);
  GDN_CHECK(mask ? width == 1 : width == 2 || width == 4, what, " '", path,
            "': bad token width at byte offset 12: expected ", mask ? "1" : "2 or 4", ", got ",
            width);
  const uint64_t count = get_le(h + 16, 8);
  const uint64_t vocab = get_le(h + 24, 8);
  GDN_CHECK(!mask || vocab == 2, what, " '", path,
            "': bad vocab size at byte offset 24: a loss mask holds 0/1 flags (2), got ", vocab);
  GDN_CHECK(vocab >= 1 && vocab <= (uint64_t(1) << (8 * width)) && vocab <= (uint64_t(1) << 31),
            what, " '", path, "': bad vocab size at byte offset 24: expected 1 to ",
            std::min(uint64_t(1) << (8 * width), uint64_t(1) << 31), " for ", width,
            "-byte tokens, got ", vocab);
  // count * width must not overflow before the comparison.
  const uint64_t max_count = (uint64_t(INT64_MAX) - kShardHeaderBytes) / width;
  GDN_CHECK(count <= max_count, what, " '", path, "': bad token count at byte offset 16: ", count,
            " is impossibly large");
  const int64_t expected_bytes = kShardHeaderBytes + int64_t(count * width);
  GDN_CHECK(file_bytes == expected_bytes, what, " '", path,
            "': file size mismatch: the header (token count ", count, " at byte offset 16, width ",
            width, ") implies ", expected_bytes, " bytes, the file has ", file_bytes,
            file_bytes < expected_bytes ? " (truncated)" : " (trailing bytes)");
  shard->count_ = int64_t(count);
  shard->vocab_size_ = int64_t(vocab);
  shard->token_bytes_ = uint32_t(width);
  return shard;
}

Shard::~Shard() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
}

int32_t Shard::at(int64_t i) const {
  GDN_CHECK(i >= 0 && i < count_, what(), " '", path_, "': index ", i, " out of range [0, ", count_,
            ")");
  return int32_t(get_le(map_ + kShardHeaderBytes + i * token_bytes_, int(token_bytes_)));
}

void Shard::read(int64_t start, int64_t n, int32_t* out) const {
  GDN_CHECK(start >= 0 && n >= 0 && start <= count_ - n, what(), " '", path_, "': range [", start,
            ", ", start + n, ") out of range [0, ", count_, ")");
  const uint8_t* p = map_ + kShardHeaderBytes + start * token_bytes_;
  if (token_bytes_ == 2) {
    for (int64_t i = 0; i < n; ++i) out[i] = int32_t(p[2 * i] | (uint32_t(p[2 * i + 1]) << 8));
  } else {
    const int w = int(token_bytes_);  // 4, or 1 for a loss mask
    for (int64_t i = 0; i < n; ++i) out[i] = int32_t(get_le(p + w * i, w));
  }
}

std::vector<int32_t> Shard::read(int64_t start, int64_t n) const {
  std::vector<int32_t> out(size_t(std::max<int64_t>(n, 0)));
  read(start, n, out.data());
  return out;
}

void Shard::check_tokens() const {
  constexpr int64_t kBlock = 1 << 16;
  std::vector<int32_t> block(kBlock);
  for (int64_t start = 0; start < count_; start += kBlock) {
    const int64_t n = std::min(kBlock, count_ - start);
    read(start, n, block.data());
    for (int64_t i = 0; i < n; ++i) {
      // A 4-byte token >= 2^31 reads as negative: out of range as well.
      if (block[i] < 0 || block[i] >= vocab_size_) {
        const int64_t index = start + i;
        GDN_FAIL(what(), " '", path_, "': ", kind_ == ShardKind::tokens ? "token " : "flag ",
                 get_le(map_ + kShardHeaderBytes + index * token_bytes_, int(token_bytes_)),
                 " at index ", index, " (byte offset ", kShardHeaderBytes + index * token_bytes_,
                 ") is >= the vocab size ", vocab_size_);
      }
    }
  }
}

}  // namespace gdn::data
