// The BPE model of tokenizer.json: vocabulary, ranked merges, unk / byte fallback / subword
// affixes / ignore_merges as the `tokenizers` library applies them, and a thread-safe cache of
// pre-token -> ids.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gdn::data::tokjson {

// Strings -> ids with lookups by string_view (no allocation), open addressing.
class StringIdMap {
 public:
  void reserve(size_t n);
  // Inserts or overwrites; returns false when `key` was already there.
  bool insert(std::string_view key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t off = 0, len = 0;
    int32_t id = -1;  // -1: empty
  };
  void grow();
  std::string keys_;
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// Bounded pre-token -> ids cache, sharded by hash, one mutex per shard. A full shard is emptied.
class MergeCache {
 public:
  static constexpr size_t kShards = 64;
  static constexpr size_t kEntriesPerShard = 8192;
  static constexpr size_t kMaxKeyBytes = 256;  // longer pre-tokens are not cached (as the library)

  MergeCache();
  ~MergeCache();
  bool lookup(std::string_view key, uint64_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view key, uint64_t hash, const int32_t* ids, size_t n) const;

 private:
  struct Shard;
  std::unique_ptr<Shard[]> shards_;
};

class Bpe {
 public:
  // `model` is the "model" object of tokenizer.json; `path` names the file in errors.
  Bpe(const nlohmann::json& model, const std::string& path);

  // Appends the ids of one pre-token.
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const { return vocab_.find(token); }
  // nullptr for an id with no token.
  const std::string* id_to_token(int32_t id) const;
  size_t vocab_entries() const { return vocab_.size(); }  // the library's get_vocab_size()
  int32_t max_id() const { return static_cast<int32_t>(tokens_.size()) - 1; }

 private:
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;
  // Ids of `piece`'s characters (with unk and byte fallback) into the symbol buffer.
  struct Symbol {
    int32_t c;
    int32_t prev, next;
    uint32_t len;
  };
  void initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  // (rank, new id) of merging ids a and b, or false.
  bool find_merge(int32_t a, int32_t b, uint32_t* rank, int32_t* new_id) const;

  StringIdMap vocab_;
  std::vector<std::string> tokens_;  // by id ("" and absent_ for holes)
  std::vector<bool> present_;
  struct MergeSlot {
    uint64_t key = ~0ull;
    uint32_t rank = 0;
    int32_t new_id = -1;
  };
  std::vector<MergeSlot> merges_;  // open addressing on (a << 32 | b)
  std::optional<int32_t> unk_id_;
  std::string unk_token_;
  bool has_unk_ = false;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // id of <0xNN> by byte, -1 when absent
  MergeCache cache_;
};

}  // namespace gdn::data::tokjson
