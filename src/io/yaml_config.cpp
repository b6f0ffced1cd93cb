// ConfigBinder and YAML helpers.
#include "src/io/yaml_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <type_traits>

#include "src/core/error.h"
#include "src/io/file_check.h"

namespace gdn::io {

namespace {

std::string where_of(const YAML::Node& n, const std::string& source) {
  const YAML::Mark m = n.Mark();
  if (m.line < 0) return source + " (from --set)";
  return source + ":" + std::to_string(m.line + 1);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// An integer written as a float ("1e9", "2.0e3") when it is exactly one and in range.
template <typename T>
bool integral_float(const YAML::Node& n, T* out) {
  double d = 0;
  try {
    d = n.as<double>();
  } catch (const YAML::Exception&) {
    return false;
  }
  // 2^63 itself is out of int64's range, hence < rather than <=.
  if (!std::isfinite(d) || d != std::floor(d) || d < double(std::numeric_limits<T>::min()) ||
      d >= -double(std::numeric_limits<T>::min()))
    return false;
  *out = T(d);
  return true;
}

template <typename T>
T scalar_as(const YAML::Node& n, const std::string& path, const std::string& where,
            const char* type) {
  GDN_CHECK(n.IsScalar(), where, ": ", path, " must be ", type, ", got a ",
            n.IsSequence() ? "list" : (n.IsMap() ? "mapping" : "null"));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      T v{};
      if (integral_float(n, &v)) return v;
    }
    GDN_FAIL(where, ": ", path, " must be ", type, ", got '", n.Scalar(), "'");
  }
}

template <typename T>
std::vector<T> list_as(const YAML::Node& n, const std::string& path, const std::string& where,
                       const char* type) {
  std::vector<T> out;
  if (n.IsScalar() && n.Scalar().find(',') != std::string::npos) {  // "a,b" from --set
    std::string s = n.Scalar();
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t end = s.find(',', pos);
      if (end == std::string::npos) end = s.size();
      out.push_back(scalar_as<T>(YAML::Node(s.substr(pos, end - pos)), path, where, type));
      pos = end + 1;
    }
    return out;
  }
  GDN_CHECK(n.IsSequence(), where, ": ", path, " must be a list of ", type);
  for (const auto& e : n) out.push_back(scalar_as<T>(e, path, where, type));
  return out;
}

// The mapping that holds the last key of dotted `path` ("a.b.c": root[a][b]), created (or, where
// a scalar stands in the way, replaced) as needed.
YAML::Node mapping_at(YAML::Node root, const std::string& path) {
  YAML::Node node = root;
  size_t pos = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', pos)) {
    const std::string key = path.substr(pos, dot - pos);
    if (!node[key] || !node[key].IsMap()) node[key] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[key]);  // rebind (operator= would assign into the node)
    pos = dot + 1;
  }
  return node;
}

std::string leaf_of(const std::string& path) {
  return path.substr(path.rfind('.') + 1);
}

}  // namespace

#define GDN_BIND_SCALAR(T, TYPE_NAME)                                           \
  void ConfigBinder::bind(const std::string& path, T* p) {                      \
    fields_[path] = {[p, path](const YAML::Node& n, const std::string& where) { \
                       *p = scalar_as<T>(n, path, where, TYPE_NAME);            \
                     },                                                         \
                     [p] { return YAML::Node(*p); }};                           \
  }
GDN_BIND_SCALAR(int64_t, "an integer")
GDN_BIND_SCALAR(int, "an integer")
GDN_BIND_SCALAR(double, "a number")
GDN_BIND_SCALAR(bool, "true or false")
GDN_BIND_SCALAR(std::string, "a string")

#define GDN_BIND_LIST(T, TYPE_NAME)                                             \
  void ConfigBinder::bind(const std::string& path, std::vector<T>* p) {         \
    fields_[path] = {[p, path](const YAML::Node& n, const std::string& where) { \
                       *p = list_as<T>(n, path, where, TYPE_NAME);              \
                     },                                                         \
                     [p] {                                                      \
                       YAML::Node l(YAML::NodeType::Sequence);                  \
                       for (const auto& v : *p) l.push_back(v);                 \
                       return l;                                                \
                     }};                                                        \
  }
GDN_BIND_LIST(double, "numbers")
GDN_BIND_LIST(int64_t, "integers")
GDN_BIND_LIST(std::string, "strings")

void ConfigBinder::bind_nullable(const std::string& path, int64_t* p) {
  fields_[path] = {[p, path](const YAML::Node& n, const std::string& where) {
                     const bool null = n.IsNull() || (n.IsScalar() &&
                                                      (n.Scalar() == "null" || n.Scalar() == "~"));
                     *p = null ? 0 : scalar_as<int64_t>(n, path, where, "an integer or null");
                   },
                   [p] { return *p ? YAML::Node(*p) : YAML::Node(YAML::NodeType::Null); }};
}

void ConfigBinder::bind_nullable(const std::string& path, std::optional<double>* p) {
  fields_[path] = {[p, path](const YAML::Node& n, const std::string& where) {
                     const bool null = n.IsNull() || (n.IsScalar() &&
                                                      (n.Scalar() == "null" || n.Scalar() == "~"));
                     if (null) {
                       p->reset();
                     } else {
                       *p = scalar_as<double>(n, path, where, "a number or null");
                     }
                   },
                   [p] { return *p ? YAML::Node(**p) : YAML::Node(YAML::NodeType::Null); }};
}

void ConfigBinder::bind_node(const std::string& path,
                             std::function<void(const YAML::Node&, const std::string&)> set,
                             std::function<YAML::Node()> get) {
  fields_[path] = {std::move(set), std::move(get)};
}

void ConfigBinder::bind_choice(const std::string& path, const std::string& choices,
                               std::function<bool(const std::string&)> set,
                               std::function<std::string()> get) {
  fields_[path] = {[path, choices, set](const YAML::Node& n, const std::string& where) {
                     const std::string s = scalar_as<std::string>(n, path, where, "a name");
                     const std::string leaf = leaf_of(path);
                     GDN_CHECK(set(s), where, ": ", path, ": unknown ", leaf, " '", s,
                               "' (expected ", choices, ")");
                   },
                   [get] { return YAML::Node(get()); }};
}

void ConfigBinder::check_mapping(const YAML::Node& node, const std::string& prefix,
                                 const std::string& source, const Origins& from_set) const {
  for (auto it = node.begin(); it != node.end(); ++it) {
    GDN_CHECK(it->first.IsScalar(), where_of(it->first, source), ": a key under '",
              prefix.empty() ? "the top level" : prefix, "' is not a name");
    const std::string key = it->first.as<std::string>();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    auto f = fields_.find(path);
    if (f != fields_.end()) {
      // A value from --set is blamed on the --set, never on the line of the key it replaced.
      auto o = from_set.find(path);
      f->second.set(it->second, o != from_set.end() ? "'" + o->second + "' (from --set)"
                                                    : where_of(it->first, source));
      continue;
    }
    // A section: some bound path lies under it.
    auto lo = fields_.lower_bound(path + ".");
    if (lo != fields_.end() && lo->first.rfind(path + ".", 0) == 0) {
      GDN_CHECK(it->second.IsMap() || it->second.IsNull(), where_of(it->first, source), ": ", path,
                " must be a mapping (a section)");
      if (it->second.IsMap()) check_mapping(it->second, path, source, from_set);
      continue;
    }
    // Unknown: suggest the closest sibling (a key or a section).
    std::string best;
    size_t best_d = 4;
    for (const std::string& child : children_of(prefix)) {
      const std::string leaf = child.substr(prefix.empty() ? 0 : prefix.size() + 1);
      size_t d = edit_distance(key, leaf);
      if (d < best_d) best_d = d, best = child;
    }
    GDN_FAIL(where_of(it->first, source), ": unknown key '", path, "'",
             best.empty() ? std::string() : " (did you mean '" + best + "'?)");
  }
}

std::set<std::string> ConfigBinder::children_of(const std::string& prefix) const {
  std::set<std::string> out;
  const std::string lead = prefix.empty() ? "" : prefix + ".";
  for (const auto& [p, fld] : fields_) {
    if (p.rfind(lead, 0) != 0) continue;
    const size_t dot = p.find('.', lead.size());
    out.insert(dot == std::string::npos ? p : p.substr(0, dot));
  }
  return out;
}

std::string ConfigBinder::suggest(const std::string& path) const {
  // The nearest full path ("trian.steps" -> "train.steps") ...
  std::string best;
  size_t best_d = 4;
  for (const auto& [p, fld] : fields_) {
    const size_t d = edit_distance(path, p);
    if (d < best_d) best_d = d, best = p;
  }
  if (!best.empty()) return best;
  // ... else the nearest leaf in any section ("steps" or "train.stpes" -> "train.steps").
  best_d = 3;
  const std::string leaf = leaf_of(path);
  for (const auto& [p, fld] : fields_) {
    const size_t d = edit_distance(leaf, leaf_of(p));
    if (d < best_d) best_d = d, best = p;
  }
  return best;
}

void ConfigBinder::check_set_key(const std::string& assignment) const {
  const size_t eq = assignment.find('=');
  GDN_CHECK(eq != std::string::npos && eq > 0, "--set '", assignment,
            "': expected section.key=value (e.g. --set train.steps=100)");
  const std::string path = assignment.substr(0, eq);
  if (has(path)) return;
  // A key inside a value bound whole (model.attn.num_heads): the value is set as one.
  for (size_t dot = path.rfind('.'); dot != std::string::npos && dot > 0;
       dot = path.rfind('.', dot - 1)) {
    const std::string whole = path.substr(0, dot);
    GDN_CHECK(!has(whole), "--set ", assignment, ": '", whole, "' takes its whole value, not ",
              "key by key (--set '", whole, "=...', in YAML's flow style for a mapping or list)");
  }
  const std::string best = suggest(path);
  GDN_FAIL("--set ", assignment, ": unknown key '", path, "'",
           best.empty() ? std::string() : " (did you mean '" + best + "'?)");
}

void ConfigBinder::apply(const YAML::Node& root, const std::string& source,
                         const Origins& from_set) const {
  if (!root || root.IsNull()) return;
  GDN_CHECK(root.IsMap(), source, ": the config must be a mapping of sections (model:, data:, ",
            "train:, dist:), not a ", root.IsSequence() ? "list" : "single value");
  check_mapping(root, "", source, from_set);
}

bool sets_any_value(const YAML::Node& node) {
  if (!node || node.IsNull()) return false;
  if (node.IsScalar() || node.IsSequence()) return true;
  for (auto it = node.begin(); it != node.end(); ++it)
    if (sets_any_value(it->second)) return true;
  return false;
}

YAML::Node ConfigBinder::dump() const {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& [path, f] : fields_) {
    mapping_at(root, path)[leaf_of(path)] = f.get();
  }
  return root;
}

namespace {

void check_no_duplicate_keys(const YAML::Node& n, const std::string& source) {
  if (n.IsSequence())
    for (const YAML::Node& item : n) check_no_duplicate_keys(item, source);
  if (!n.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (it->first.IsScalar()) {
      const std::string key = it->first.Scalar();
      const auto [first, fresh] = seen.emplace(key, it->first.Mark());
      GDN_CHECK(fresh, source, ":", it->first.Mark().line + 1, ": key '", key,
                "' is given twice in one mapping (first at line ", first->second.line + 1,
                "): keep one");
    }
    check_no_duplicate_keys(it->second, source);
  }
}

}  // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    GDN_FAIL(source, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg);
  }
  check_no_duplicate_keys(root, source);
  return root;
}

YAML::Node load_yaml_file(const std::string& path) {
  // A directory or an unreadable file is named here, not as a stream error while parsing.
  return parse_yaml(read_file(path, "config"), path);
}

namespace {

bool is_yaml_null(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

nlohmann::json scalar_to_json(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: a string whatever it spells
  if (is_yaml_null(s)) return nullptr;
  int64_t i = 0;
  if (YAML::convert<int64_t>::decode(n, i)) return i;
  double d = 0;
  if (YAML::convert<double>::decode(n, d)) return d;
  bool b = false;
  if (YAML::convert<bool>::decode(n, b)) return b;
  return s;
}

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& node) {
  if (!node || node.IsNull()) return nullptr;
  if (node.IsScalar()) return scalar_to_json(node);
  if (node.IsSequence()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : node) list.push_back(yaml_to_json(e));
    return list;
  }
  nlohmann::json map = nlohmann::json::object();
  for (auto it = node.begin(); it != node.end(); ++it)
    map[it->first.IsScalar() ? it->first.Scalar() : YAML::Dump(it->first)] =
        yaml_to_json(it->second);
  return map;
}

YAML::Node json_to_yaml(const nlohmann::json& value) {
  if (value.is_null()) return YAML::Node(YAML::NodeType::Null);
  if (value.is_boolean()) return YAML::Node(value.get<bool>());
  if (value.is_number_integer()) return YAML::Node(value.get<int64_t>());
  if (value.is_number()) return YAML::Node(value.get<double>());
  if (value.is_string()) return YAML::Node(value.get<std::string>());
  if (value.is_array()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& e : value) list.push_back(json_to_yaml(e));
    return list;
  }
  YAML::Node map(YAML::NodeType::Map);
  for (const auto& [key, v] : value.items()) map[key] = json_to_yaml(v);
  return map;
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  GDN_CHECK(eq != std::string::npos && eq > 0, "--set '", assignment,
            "': expected section.key=value (e.g. --set train.steps=100)");
  const std::string path = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  if (!root || !root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node node = mapping_at(root, path);
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception&) {
    parsed = YAML::Node(value);
  }
  // Rebuild without source marks, so errors say "(from --set)" rather than a line (also when
  // the binder is not told which keys came from --set).
  std::function<YAML::Node(const YAML::Node&)> fresh = [&](const YAML::Node& n) -> YAML::Node {
    if (n.IsSequence()) {
      YAML::Node seq(YAML::NodeType::Sequence);
      for (const auto& e : n) seq.push_back(fresh(e));
      return seq;
    }
    if (n.IsMap()) {
      YAML::Node map(YAML::NodeType::Map);
      for (auto it = n.begin(); it != n.end(); ++it) map[fresh(it->first)] = fresh(it->second);
      return map;
    }
    if (n.IsNull()) return YAML::Node(YAML::NodeType::Null);
    if (n.IsScalar()) {
      YAML::Node scalar(n.Scalar());
      scalar.SetTag(n.Tag());  // a quoted value stays a string (yaml_to_json)
      return scalar;
    }
    return n;
  };
  node[leaf_of(path)] = fresh(parsed);
}

}  // namespace gdn::io
