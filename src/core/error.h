// Errors: GDN_CHECK(cond, parts...) throws gdn::Error with file:line and a message built from
// the parts (streamed), so each failure names the values involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace gdn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

template <typename... Args>
std::string str_cat(const Args&... args) {
  return detail::str_cat(args...);
}

// "a, b, c" from {a, b, c} and ", ", for messages.
inline std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

}  // namespace gdn

#define GDN_CHECK(cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond)) ::gdn::detail::throw_error(__FILE__, __LINE__, ::gdn::str_cat(__VA_ARGS__)); \
  } while (0)

#define GDN_FAIL(...) ::gdn::detail::throw_error(__FILE__, __LINE__, ::gdn::str_cat(__VA_ARGS__))
