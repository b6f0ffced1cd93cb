// YAML configs bound to C++ structs: each field is bound by its dotted path
// ("model.hidden_size"); unknown keys and wrong types are errors naming the key, the file and
// the line (with a suggestion for a near miss). `--set a.b=value` overrides edit the document
// before binding.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>
#include <optional>

#include "kernels/enum_table.h"

namespace gdn::io {

class ConfigBinder {
 public:
  void bind(const std::string& path, int64_t* p);
  void bind(const std::string& path, int* p);
  void bind(const std::string& path, double* p);
  void bind(const std::string& path, bool* p);
  void bind(const std::string& path, std::string* p);
  void bind(const std::string& path, std::vector<double>* p);
  void bind(const std::string& path, std::vector<int64_t>* p);
  void bind(const std::string& path, std::vector<std::string>* p);
  // An integer that may be null (`null` / `~`), stored as 0 (fla's "None": derive it).
  void bind_nullable(const std::string& path, int64_t* p);
  // A number that may be null, stored as nullopt (fla's None).
  void bind_nullable(const std::string& path, std::optional<double>* p);
  // An enum by the names of its table (kernels/enum_table.h); a wrong name is an error that
  // lists the choices.
  template <typename E>
  void bind_enum(const std::string& path, E* p, EnumTable<E> table = enum_table(E{})) {
    bind_choice(
        path, table.choices(),
        [p, table](const std::string& s) {
          const auto v = table.parse(s);
          if (v) *p = *v;
          return v.has_value();
        },
        [p, table] { return std::string(table.name(*p)); });
  }

  // A value of any shape (a mapping, a list), handed as its node to `set` with where it is
  // ("file:line", or the --set); `get` gives the resolved value for dump().
  void bind_node(const std::string& path,
                 std::function<void(const YAML::Node&, const std::string& where)> set,
                 std::function<YAML::Node()> get);

  // Paths whose value came from `--set`, with the assignment ("train.steps" -> "train.steps=abc"):
  // errors in them name the --set instead of the file.
  using Origins = std::map<std::string, std::string>;
  // Binds every key of `root`; `source` names the file in errors.
  void apply(const YAML::Node& root, const std::string& source, const Origins& from_set = {}) const;
  // Throws naming the --set when "a.b=value" is malformed or names no bound key (with the
  // nearest key as a "did you mean").
  void check_set_key(const std::string& assignment) const;
  // The bound path nearest to `path` (a near miss of the whole path, or of its last part in any
  // section); empty when none is close.
  std::string suggest(const std::string& path) const;
  // The document of all bound fields with their current values (the resolved config).
  YAML::Node dump() const;
  bool has(const std::string& path) const { return fields_.count(path) > 0; }

 private:
  struct Field {
    std::function<void(const YAML::Node&, const std::string& where)> set;
    std::function<YAML::Node()> get;
  };
  void bind_choice(const std::string& path, const std::string& choices,
                   std::function<bool(const std::string&)> set, std::function<std::string()> get);
  void check_mapping(const YAML::Node& node, const std::string& prefix, const std::string& source,
                     const Origins& from_set) const;
  // The keys and sections directly under `prefix` ("" = the top level), as full paths.
  std::set<std::string> children_of(const std::string& prefix) const;
  std::map<std::string, Field> fields_;
};

// Loads a YAML file (parse errors name the file and line; a directory or unreadable path is
// refused naming it).
YAML::Node load_yaml_file(const std::string& path);
// Parses YAML text from `source` (a file name, for messages): syntax errors and a key given twice
// in one mapping (YAML keeps both, and the last would win unseen) are refused naming both lines.
YAML::Node parse_yaml(const std::string& text, const std::string& source);
// Whether the document gives any value at all (false for an empty or comment-only file, or one
// with only empty sections).
bool sets_any_value(const YAML::Node& root);
// A YAML value as JSON: plain scalars resolve as YAML's core schema (null, true/false, integers,
// floats, .inf and .nan) with yaml-cpp's spellings; quoted scalars stay strings.
nlohmann::json yaml_to_json(const YAML::Node& node);
// A JSON value as YAML (null becomes `~`).
YAML::Node json_to_yaml(const nlohmann::json& value);
// Applies "a.b.c=value" to the document (value parsed as YAML: numbers, booleans, lists).
void apply_override(YAML::Node& root, const std::string& assignment);

}  // namespace gdn::io
