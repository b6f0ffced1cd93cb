// Names of enum values, one table per enum, so that every option that is an enum (kernel
// implementation, residual policy, checkpointing, ...) is parsed, printed and listed the same
// way: by the kernels, the YAML config binder and the command line. A table is found by ADL:
// next to its enum, declare `EnumTable<E> enum_table(E)` returning a static array of
// {value, name}. Plain C++ with no dependencies, so the lowest layer (kernels/) can use it.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace gdn {

template <typename E>
struct EnumEntry {
  E value;
  const char* name;
};

// A view of a static array of entries.
template <typename E>
class EnumTable {
 public:
  template <size_t N>
  constexpr EnumTable(const EnumEntry<E> (&entries)[N]) : first_(entries), size_(N) {}
  const EnumEntry<E>* begin() const { return first_; }
  const EnumEntry<E>* end() const { return first_ + size_; }

  const char* name(E v) const {
    for (const auto& e : *this)
      if (e.value == v) return e.name;
    return "unknown";
  }
  std::optional<E> parse(const std::string& s) const {
    for (const auto& e : *this)
      if (s == e.name) return e.value;
    return std::nullopt;
  }
  // "a, b or c", for messages.
  std::string choices() const {
    std::string s;
    for (size_t i = 0; i < size_; ++i)
      s += (i == 0 ? "" : i + 1 == size_ ? " or " : ", ") + std::string(first_[i].name);
    return s;
  }

 private:
  const EnumEntry<E>* first_;
  size_t size_;
};

template <typename E>
const char* enum_name(E v) {
  return enum_table(v).name(v);
}

}  // namespace gdn
