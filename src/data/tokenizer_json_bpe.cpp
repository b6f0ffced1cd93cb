// BPE model of tokenizer.json: merges applied lowest rank first (ties: leftmost), as the library.
#include "src/data/tokenizer_json_bpe.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "src/data/tokenizer_json_fields.h"

namespace gdn::data::tokjson {

namespace {

inline uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = mix(h ^ w) + i;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  return mix(h ^ w ^ (uint64_t{0xA5} << 56));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// StringIdMap

void StringIdMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (cap <= slots_.size()) return;
  std::vector<Slot> old(cap);
  old.swap(slots_);
  size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t k = s.hash & mask;
    while (slots_[k].id >= 0) k = (k + 1) & mask;
    slots_[k] = s;
  }
}

void StringIdMap::grow() {
  reserve(slots_.empty() ? 8 : slots_.size());
}

bool StringIdMap::insert(std::string_view key, int32_t id) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  uint64_t h = hash_bytes(key);
  size_t mask = slots_.size() - 1;
  size_t k = h & mask;
  while (slots_[k].id >= 0) {
    Slot& s = slots_[k];
    if (s.hash == h && std::string_view(keys_).substr(s.off, s.len) == key) {
      s.id = id;
      return false;
    }
    k = (k + 1) & mask;
  }
  slots_[k] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()), id};
  keys_.append(key.data(), key.size());
  ++size_;
  return true;
}

std::optional<int32_t> StringIdMap::find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  uint64_t h = hash_bytes(key);
  size_t mask = slots_.size() - 1;
  for (size_t k = h & mask;; k = (k + 1) & mask) {
    const Slot& s = slots_[k];
    if (s.id < 0) return std::nullopt;
    if (s.hash == h && s.len == key.size() &&
        std::memcmp(keys_.data() + s.off, key.data(), key.size()) == 0) {
      return s.id;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MergeCache

struct MergeCache::Shard {
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0, ids_off = 0, ids_len = 0;
    bool used = false;
  };
  std::mutex mu;
  std::vector<Slot> slots = std::vector<Slot>(2 * kEntriesPerShard);
  std::string keys;
  std::vector<int32_t> ids;
  size_t size = 0;
};

MergeCache::MergeCache() : shards_(new Shard[kShards]) {}
MergeCache::~MergeCache() = default;

bool MergeCache::lookup(std::string_view key, uint64_t hash, std::vector<int32_t>& out) const {
  Shard& sh = shards_[(hash >> 58) % kShards];
  std::lock_guard<std::mutex> lock(sh.mu);
  size_t mask = sh.slots.size() - 1;
  for (size_t k = hash & mask;; k = (k + 1) & mask) {
    const Shard::Slot& s = sh.slots[k];
    if (!s.used) return false;
    if (s.hash == hash && s.key_len == key.size() &&
        std::memcmp(sh.keys.data() + s.key_off, key.data(), key.size()) == 0) {
      out.insert(out.end(), sh.ids.begin() + s.ids_off, sh.ids.begin() + s.ids_off + s.ids_len);
      return true;
    }
  }
}

void MergeCache::insert(std::string_view key, uint64_t hash, const int32_t* ids, size_t n) const {
  Shard& sh = shards_[(hash >> 58) % kShards];
  std::lock_guard<std::mutex> lock(sh.mu);
  if (sh.size >= kEntriesPerShard) {
    std::fill(sh.slots.begin(), sh.slots.end(), Shard::Slot{});
    sh.keys.clear();
    sh.ids.clear();
    sh.size = 0;
  }
  size_t mask = sh.slots.size() - 1;
  size_t k = hash & mask;
  for (; sh.slots[k].used; k = (k + 1) & mask) {
    const Shard::Slot& s = sh.slots[k];
    if (s.hash == hash && s.key_len == key.size() &&
        std::memcmp(sh.keys.data() + s.key_off, key.data(), key.size()) == 0) {
      return;  // another thread got there first
    }
  }
  sh.slots[k] = {hash,
                 static_cast<uint32_t>(sh.keys.size()),
                 static_cast<uint32_t>(key.size()),
                 static_cast<uint32_t>(sh.ids.size()),
                 static_cast<uint32_t>(n),
                 true};
  sh.keys.append(key.data(), key.size());
  sh.ids.insert(sh.ids.end(), ids, ids + n);
  ++sh.size;
}

// ---------------------------------------------------------------------------------------------
// Bpe

namespace {

std::optional<std::string> optional_string(const Json& j, const char* key,
                                           const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  GDN_CHECK(it->is_string(), where, ": field \"", key, "\" must be a string or null");
  return it->get<std::string>();
}

}  // namespace

Bpe::Bpe(const Json& model, const std::string& path) {
  std::string where = path + ": model BPE";
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null()) {
    GDN_CHECK(dropout->is_number() && dropout->get<double>() == 0.0, where, ": dropout ",
              dropout->dump(), " is not supported (it makes encoding random); only null");
  }
  if (auto unk = optional_string(model, "unk_token", where)) {
    has_unk_ = true;
    unk_token_ = *unk;
  }
  prefix_ = optional_string(model, "continuing_subword_prefix", where).value_or("");
  suffix_ = optional_string(model, "end_of_word_suffix", where).value_or("");
  fuse_unk_ = bool_field(model, "fuse_unk", where, false);
  byte_fallback_ = bool_field(model, "byte_fallback", where, false);
  ignore_merges_ = bool_field(model, "ignore_merges", where, false);

  const Json& vocab = required_field(model, "vocab", where);
  GDN_CHECK(vocab.is_object(), where, ": \"vocab\" must be an object of token -> id");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    GDN_CHECK(it.value().is_number_integer() && it.value().get<int64_t>() >= 0 &&
                  it.value().get<int64_t>() < (int64_t{1} << 31),
              where, ": vocab id of \"", it.key(), "\" must be a non-negative 32-bit integer");
    int32_t id = static_cast<int32_t>(it.value().get<int64_t>());
    vocab_.insert(it.key(), id);
    max_id = std::max<int64_t>(max_id, id);
  }
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
  present_.assign(static_cast<size_t>(max_id + 1), false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto id = static_cast<size_t>(it.value().get<int64_t>());
    tokens_[id] = it.key();
    present_[id] = true;
  }
  if (has_unk_) unk_id_ = vocab_.find(unk_token_);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto id = vocab_.find(name);
    byte_ids_[b] = id ? *id : -1;
  }

  // Merges: "a b" strings or ["a", "b"] pairs; a later duplicate pair takes the later rank.
  const Json& merges = required_field(model, "merges", where);
  GDN_CHECK(merges.is_array(), where, ": \"merges\" must be an array");
  size_t cap = 16;
  while (cap < 2 * merges.size() + 2) cap *= 2;
  merges_.assign(cap, MergeSlot{});
  uint32_t rank = 0;
  std::string merged;
  for (const Json& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string& line = m.get_ref<const std::string&>();
      if (line.rfind("#version", 0) == 0) continue;
      size_t sp = line.find(' ');
      GDN_CHECK(sp != std::string::npos && line.find(' ', sp + 1) == std::string::npos, where,
                ": merge ", rank + 1, " is not two tokens separated by one space: \"", line, "\"");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else {
      GDN_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where,
                ": merge ", rank + 1, " must be \"a b\" or [\"a\", \"b\"], got ", m.dump());
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    }
    auto a_id = vocab_.find(a), b_id = vocab_.find(b);
    GDN_CHECK(a_id, where, ": merge token \"", a, "\" is not in the vocabulary");
    GDN_CHECK(b_id, where, ": merge token \"", b, "\" is not in the vocabulary");
    GDN_CHECK(b.size() >= prefix_.size(), where, ": merge token \"", b,
              "\" is shorter than continuing_subword_prefix");
    merged = a;
    merged.append(b, prefix_.size(), std::string::npos);
    auto new_id = vocab_.find(merged);
    GDN_CHECK(new_id, where, ": merged token \"", merged, "\" is not in the vocabulary");
    uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(*a_id)) << 32) | static_cast<uint32_t>(*b_id);
    size_t mask = merges_.size() - 1;
    size_t k = mix(key) & mask;
    while (merges_[k].key != ~0ull && merges_[k].key != key) k = (k + 1) & mask;
    merges_[k] = {key, rank, *new_id};
    ++rank;
  }
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[id]) return nullptr;
  return &tokens_[id];
}

bool Bpe::find_merge(int32_t a, int32_t b, uint32_t* rank, int32_t* new_id) const {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  size_t mask = merges_.size() - 1;
  for (size_t k = mix(key) & mask;; k = (k + 1) & mask) {
    const MergeSlot& s = merges_[k];
    if (s.key == ~0ull) return false;
    if (s.key == key) {
      *rank = s.rank;
      *new_id = s.new_id;
      return true;
    }
  }
}

void Bpe::initial_symbols(std::string_view w, std::vector<Symbol>& symbols) const {
  symbols.clear();
  auto add = [&](int32_t id, uint32_t len) {
    int32_t n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };
  // A pending unknown: (id, byte length); fused with the next one when fuse_unk.
  int32_t unk_id = -1;
  uint32_t unk_len = 0;
  bool affixes = !prefix_.empty() || !suffix_.empty();
  std::string s;
  for (size_t i = 0; i < w.size();) {
    int len = utf8_len(static_cast<unsigned char>(w[i]));
    std::string_view c = w.substr(i, len);
    bool is_first = i == 0, is_last = i + len >= w.size();
    i += len;
    std::string_view key = c;
    if (affixes) {
      s.clear();
      if (!is_first) s += prefix_;
      s.append(c.data(), c.size());
      if (is_last) s += suffix_;
      key = s;
    }
    if (auto id = vocab_.find(key)) {
      if (unk_id >= 0) {
        add(unk_id, unk_len);
        unk_id = -1;
      }
      add(*id, static_cast<uint32_t>(len));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char ch : key) all = all && byte_ids_[static_cast<unsigned char>(ch)] >= 0;
      if (all) {
        // Note: like the library, a pending unknown is not flushed here.
        for (char ch : key) add(byte_ids_[static_cast<unsigned char>(ch)], 1);
        continue;
      }
    }
    if (!has_unk_) continue;  // no unk token: the character is dropped, as in the library
    GDN_CHECK(unk_id_, "tokenizer.json BPE: unk_token \"", unk_token_,
              "\" is not in the vocabulary (needed for an unknown character)");
    if (unk_id >= 0 && fuse_unk_) {
      unk_len += static_cast<uint32_t>(len);
    } else {
      if (unk_id >= 0) add(unk_id, unk_len);
      unk_id = *unk_id_;
      unk_len = static_cast<uint32_t>(len);
    }
  }
  if (unk_id >= 0) add(unk_id, unk_len);
}

void Bpe::merge_word(std::string_view piece, std::vector<int32_t>& out) const {
  struct Merge {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  // Min-heap on (rank, pos).
  auto later = [](const Merge& x, const Merge& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Merge> heap;
  initial_symbols(piece, sym);
  heap.clear();
  uint32_t rank;
  int32_t new_id;
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (find_merge(sym[i].c, sym[i + 1].c, &rank, &new_id))
      heap.push_back({rank, static_cast<int32_t>(i), new_id});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  const int32_t n = static_cast<int32_t>(sym.size());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Merge top = heap.back();
    heap.pop_back();
    Symbol& cur = sym[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    int32_t next_pos = cur.next;
    Symbol right = sym[next_pos];
    if (!find_merge(cur.c, right.c, &rank, &new_id) || new_id != top.new_id) continue;
    cur.c = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    sym[next_pos].len = 0;
    if (right.next > -1 && right.next < n) sym[right.next].prev = top.pos;
    if (cur.prev >= 0 && find_merge(sym[cur.prev].c, cur.c, &rank, &new_id)) {
      heap.push_back({rank, cur.prev, new_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
    if (cur.next > -1 && cur.next < n && find_merge(cur.c, sym[cur.next].c, &rank, &new_id)) {
      heap.push_back({rank, top.pos, new_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  for (const Symbol& s : sym)
    if (s.len != 0) out.push_back(s.c);
}

void Bpe::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto id = vocab_.find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  if (piece.size() >= MergeCache::kMaxKeyBytes) {
    merge_word(piece, out);
    return;
  }
  uint64_t h = hash_bytes(piece);
  if (cache_.lookup(piece, h, out)) return;
  size_t before = out.size();
  merge_word(piece, out);
  cache_.insert(piece, h, out.data() + before, out.size() - before);
}

}  // namespace gdn::data::tokjson
