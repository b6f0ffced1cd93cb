// YAML configs bound to C++ structs: each field is bound by its dotted path
// ("model.hidden_size"); unknown keys and wrong types are errors naming the key, the file and
// the line (with a suggestion for a near miss). `--set a.b=value` overrides edit the document
// before binding.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

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

  // Binds every key of `root`; `source` names the file in errors.
  void apply(const YAML::Node& root, const std::string& source) const;
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
  void check_mapping(const YAML::Node& node, const std::string& prefix,
                     const std::string& source) const;
  std::map<std::string, Field> fields_;
};

// Loads a YAML file (parse errors name the file and line).
YAML::Node load_yaml_file(const std::string& path);
// Applies "a.b.c=value" to the document (value parsed as YAML: numbers, booleans, lists).
void apply_override(YAML::Node& root, const std::string& assignment);

}  // namespace gdn::io
