// Typed reads of tokenizer.json fields whose errors name the component and the file, shared by
// the normalizer, pre-tokenizer, model and decoder readers.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/core/error.h"
#include "src/data/tokenizer_json_regex.h"
#include "src/data/tokenizer_json_unicode.h"

namespace gdn::data::tokjson {

using Json = nlohmann::json;

inline const Json& required_field(const Json& j, const char* key, const std::string& where) {
  GDN_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.dump());
  auto it = j.find(key);
  GDN_CHECK(it != j.end(), where, ": missing field \"", key, "\"");
  return *it;
}

inline std::string string_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = required_field(j, key, where);
  GDN_CHECK(v.is_string(), where, ": field \"", key, "\" must be a string, got ", v.dump());
  return v.get<std::string>();
}

// A boolean field; `fallback` when absent or null.
inline bool bool_field(const Json& j, const char* key, const std::string& where, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  GDN_CHECK(it->is_boolean(), where, ": field \"", key, "\" must be true or false, got ",
            it->dump());
  return it->get<bool>();
}

inline int64_t int_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = required_field(j, key, where);
  GDN_CHECK(v.is_number_integer(), where, ": field \"", key, "\" must be an integer, got ",
            v.dump());
  return v.get<int64_t>();
}

// A field holding exactly one character (Rust `char`), as its code point.
inline uint32_t char_field(const Json& j, const char* key, const std::string& where) {
  std::string s = string_field(j, key, where);
  int len = 0;
  uint32_t cp = s.empty() ? 0 : decode_utf8(s.data(), &len);
  GDN_CHECK(!s.empty() && static_cast<size_t>(len) == s.size() && valid_utf8(s), where,
            ": field \"", key, "\" must be a single character, got \"", s, "\"");
  return cp;
}

// The "type" of a component; `kind` ("normalizer", ...) for the message.
inline std::string type_field(const Json& j, const char* kind, const std::string& where) {
  GDN_CHECK(j.is_object(), where, ": the ", kind, " must be a JSON object, got ", j.dump());
  auto it = j.find("type");
  GDN_CHECK(it != j.end() && it->is_string(), where, ": the ", kind,
            " has no \"type\" (legacy untyped components are not supported): ", j.dump());
  return it->get<std::string>();
}

// A Split / Replace "pattern": {"String": s} (literal) or {"Regex": r} (Oniguruma syntax).
inline std::unique_ptr<Regex> pattern_field(const Json& j, const std::string& where) {
  const Json& p = required_field(j, "pattern", where);
  GDN_CHECK(p.is_object() && p.size() == 1, where,
            ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}, got ", p.dump());
  auto it = p.begin();
  GDN_CHECK(it.value().is_string(), where, ": pattern value must be a string, got ", p.dump());
  if (it.key() == "String")
    return std::make_unique<Regex>(it.value().get<std::string>(), true, where);
  if (it.key() == "Regex")
    return std::make_unique<Regex>(it.value().get<std::string>(), false, where);
  GDN_FAIL(where, ": unknown pattern kind \"", it.key(), "\" (expected String or Regex)");
}

}  // namespace gdn::data::tokjson
