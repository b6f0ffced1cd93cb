// fla's `attn` (hybrid models: softmax attention in some layers), read and checked as fla 0.6.0's
// parse_attention_config (configuration_utils.py in fla's models) does, for every reader: the YAML
// config and config.json go through read_attention, ModelConfig::validate through
// check_attention, so the rules exist once.
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "layers/config.h"
#include "src/core/error.h"

namespace gdn::nn {

namespace {

using nlohmann::json;

// The keys of an fla attn entry; fla keeps any other, which gdn refuses (it would not compute it).
constexpr const char* kAttentionKeys[] = {"layers",   "num_heads",   "num_kv_heads",
                                          "qkv_bias", "window_size", "rope_theta"};
constexpr double kDefaultRopeTheta = 10000.0;

std::string known_keys() {
  std::string s;
  for (const char* k : kAttentionKeys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

bool is_known_key(const std::string& key) {
  for (const char* k : kAttentionKeys)
    if (key == k) return true;
  return false;
}

// A JSON integer (never a Boolean or a float, as fla's isinstance(v, int) checks); one above
// int64's range is clamped (out of range for layers, and no head count divides it).
bool json_integer(const json& v, int64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    *out = std::numeric_limits<int64_t>::max();
  else
    *out = v.get<int64_t>();
  return true;
}

std::string show_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Reads one entry (a JSON object) by type; values are checked later, with every entry known.
class EntryReader {
 public:
  EntryReader(const json& entry, int64_t index, const std::string& root, bool is_list,
              const AttentionSpotName& name)
      : entry_(entry), index_(index), root_(root), is_list_(is_list), name_(name) {}

  AttentionConfig read() const {
    if (!entry_.is_object())
      fail("", str_cat("must be a mapping of attention settings (", known_keys(), "); got ",
                       entry_.dump()));
    for (const auto& [key, value] : entry_.items())
      if (!is_known_key(key))
        fail(key, str_cat("unknown key (an attn entry knows ", known_keys(),
                          "; fla would keep it, but gdn would not compute it)"));
    for (const char* key : {"layers", "num_heads"})
      if (!entry_.contains(key))
        fail(key, "is required (an attn entry needs layers and num_heads)");
    AttentionConfig a;
    a.layers = layers();
    a.num_heads = integer("num_heads", "a positive integer");
    a.num_kv_heads = optional_positive("num_kv_heads", "a positive integer (or null: num_heads)");
    a.qkv_bias = boolean("qkv_bias");
    a.window_size = optional_positive("window_size", "null or a positive integer");
    a.rope_theta = number("rope_theta", kDefaultRopeTheta);
    return a;
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         int64_t element = -1) const {
    const AttentionSpot spot{index_, key, element};
    GDN_FAIL(name_(attention_path(root_, is_list_, spot), spot), ": ", what);
  }

  std::vector<int64_t> layers() const {
    const json& v = entry_["layers"];
    if (!v.is_array()) fail("layers", "must be a list of integer layer indices; got " + v.dump());
    std::vector<int64_t> out;
    for (size_t k = 0; k < v.size(); ++k) {
      int64_t layer = 0;
      if (!json_integer(v[k], &layer))
        fail("layers", "must contain only integer layer indices; got " + v[k].dump(), int64_t(k));
      out.push_back(layer);
    }
    return out;
  }

  int64_t integer(const char* key, const char* expected) const {
    int64_t out = 0;
    if (!json_integer(entry_[key], &out))
      fail(key, str_cat("must be ", expected, "; got ", entry_[key].dump()));
    return out;
  }

  // null or missing: 0 (fla's None); else a positive integer (0 would read as None).
  int64_t optional_positive(const char* key, const char* expected) const {
    if (!entry_.contains(key) || entry_[key].is_null()) return 0;
    const int64_t v = integer(key, expected);
    if (v <= 0) fail(key, str_cat("must be ", expected, "; got ", v));
    return v;
  }

  // Missing: false; present (null included, as fla's setdefault keeps it) a Boolean.
  bool boolean(const char* key) const {
    if (!entry_.contains(key)) return false;
    if (!entry_[key].is_boolean())
      fail(key, "must be true or false (a Boolean); got " + entry_[key].dump());
    return entry_[key].get<bool>();
  }

  double number(const char* key, double dflt) const {
    if (!entry_.contains(key)) return dflt;
    if (!entry_[key].is_number())
      fail(key, "must be positive and finite; got " + entry_[key].dump());
    return entry_[key].get<double>();
  }

  const json& entry_;
  int64_t index_;
  const std::string& root_;
  bool is_list_;
  const AttentionSpotName& name_;
};

json entry_json(const AttentionConfig& a) {
  return {{"layers", a.layers},
          {"num_heads", a.num_heads},
          {"num_kv_heads", a.kv_heads()},
          {"qkv_bias", a.qkv_bias},
          {"window_size", a.window_size > 0 ? json(a.window_size) : json(nullptr)},
          {"rope_theta", a.rope_theta}};
}

}  // namespace

std::string attention_path(const std::string& root, bool is_list, const AttentionSpot& spot) {
  std::string path = root;
  if (is_list && spot.entry >= 0) path += "[" + std::to_string(spot.entry) + "]";
  if (!spot.key.empty()) path += "." + spot.key;
  return path;
}

void read_attention(const json& attn, ModelConfig& c, const std::string& root,
                    const AttentionSpotName& name) {
  c.attn.clear();
  c.attn_is_list = attn.is_array();
  if (attn.is_null()) return;
  if (!attn.is_object() && !attn.is_array())
    GDN_FAIL(name(root, AttentionSpot{}),
             ": must be null, a mapping or a list of mappings (fla's attn); got ", attn.dump());
  if (attn.is_object()) {
    c.attn.push_back(EntryReader(attn, 0, root, false, name).read());
  } else {
    for (size_t i = 0; i < attn.size(); ++i)
      c.attn.push_back(EntryReader(attn[i], int64_t(i), root, true, name).read());
  }
  check_attention(c, root, name);
}

void check_attention(const ModelConfig& c, const std::string& root, const AttentionSpotName& name) {
  // A dict can hold one entry only: more are a list whatever attn_is_list says.
  const bool is_list = c.attn_is_list || c.attn.size() > 1;
  std::map<int64_t, int64_t> entry_of_layer;
  for (size_t i = 0; i < c.attn.size(); ++i) {
    const AttentionConfig& a = c.attn[i];
    auto check = [&](bool ok, const char* key, const std::string& what, int64_t element = -1) {
      const AttentionSpot spot{int64_t(i), key, element};
      GDN_CHECK(ok, name(attention_path(root, is_list, spot), spot), ": ", what);
    };
    for (size_t k = 0; k < a.layers.size(); ++k) {
      const int64_t layer = a.layers[k], at = int64_t(k);
      check(layer >= 0 && layer < c.num_hidden_layers, "layers",
            str_cat("layer ", layer, " is out of range; expected a value in [0, ",
                    c.num_hidden_layers, ") (num_hidden_layers ", c.num_hidden_layers, ")"),
            at);
      const auto seen = entry_of_layer.find(layer);
      if (seen != entry_of_layer.end()) {
        check(seen->second != int64_t(i), "layers", str_cat("layer ", layer, " appears twice"), at);
        check(false, "layers",
              str_cat("layer ", layer, " is already assigned by ",
                      attention_path(root, true, AttentionSpot{seen->second, "", -1})),
              at);
      }
      entry_of_layer[layer] = int64_t(i);
    }
    check(a.num_heads > 0, "num_heads", str_cat("must be a positive integer; got ", a.num_heads));
    check(a.num_kv_heads >= 0, "num_kv_heads",
          str_cat("must be a positive integer (or null: num_heads); got ", a.num_kv_heads));
    check(a.window_size >= 0, "window_size",
          str_cat("must be null or a positive integer; got ", a.window_size));
    check(std::isfinite(a.rope_theta) && a.rope_theta > 0, "rope_theta",
          "must be positive and finite; got " + show_number(a.rope_theta));
    // fla's Attention splits hidden_size into num_heads heads, and shares each kv head among
    // num_heads / num_kv_heads query heads.
    check(c.hidden_size <= 0 || c.hidden_size % a.num_heads == 0, "num_heads",
          str_cat("hidden_size ", c.hidden_size, " is not divisible by num_heads ", a.num_heads,
                  " (fla's Attention has head_dim = hidden_size / num_heads)"));
    check(c.hidden_size <= 0 || (c.hidden_size / a.num_heads) % 2 == 0, "num_heads",
          str_cat("head_dim = hidden_size / num_heads = ", c.hidden_size, " / ", a.num_heads, " = ",
                  c.hidden_size / a.num_heads,
                  " must be even (rotary embeddings rotate pairs of channels)"));
    check(a.num_heads % a.kv_heads() == 0, "num_kv_heads",
          str_cat("num_heads ", a.num_heads, " is not divisible by num_kv_heads ", a.kv_heads(),
                  " (grouped-query attention shares each kv head among num_heads / "
                  "num_kv_heads query heads)"));
  }
}

json attention_json(const ModelConfig& c) {
  if (c.attn.empty() && !c.attn_is_list) return nullptr;
  if (c.attn.size() == 1 && !c.attn_is_list) return entry_json(c.attn[0]);
  json list = json::array();
  for (const AttentionConfig& a : c.attn) list.push_back(entry_json(a));
  return list;
}

}  // namespace gdn::nn
