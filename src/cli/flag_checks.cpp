#include "src/cli/flag_checks.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "src/core/error.h"

namespace gdn::cli {

namespace {

// The text as a finite real, or an error message.
std::string parse_real(const std::string& s, double* v) {
  if (s.empty()) return "needs a number, got ''";
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return "'" + s + "' is not a number";
  if (!std::isfinite(*v)) return "must be a finite number, got " + s;
  return "";
}

}  // namespace

CLI::Validator whole_number(int64_t min, int64_t max) {
  const std::string range = max == std::numeric_limits<int64_t>::max()
                                ? str_cat("at least ", min)
                                : str_cat("from ", min, " to ", max);
  return CLI::Validator(
      [min, max, range](std::string& s) -> std::string {
        int64_t v = 0;
        const char* first = s.c_str() + (!s.empty() && s[0] == '+');
        const auto [end, ec] = std::from_chars(first, s.c_str() + s.size(), v);
        if (ec == std::errc::result_out_of_range)
          return str_cat("must be a whole number ", range, ", got ", s);
        if (ec != std::errc() || end != s.c_str() + s.size() || s.empty())
          return str_cat("must be a whole number ", range, ", got '", s, "'");
        if (v < min || v > max) return str_cat("must be ", range, ", got ", s);
        return "";
      },
      "INT " + range);
}

CLI::Validator real_number(double min, double max, bool above_min, bool below_max) {
  const bool open_max = max == std::numeric_limits<double>::max();
  const std::string range =
      open_max ? str_cat(above_min ? "above " : "at least ", min)
               : str_cat("in ", above_min ? "(" : "[", min, ", ", max, below_max ? ")" : "]");
  return CLI::Validator(
      [min, max, above_min, below_max, range](std::string& s) -> std::string {
        double v = 0;
        const std::string bad = parse_real(s, &v);
        if (!bad.empty()) return bad;
        if (v < min || v > max || (above_min && v == min) || (below_max && v == max))
          return str_cat("must be ", range, ", got ", s);
        return "";
      },
      "NUMBER " + range);
}

CLI::Validator nonzero_real() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        const std::string bad = parse_real(s, &v);
        if (!bad.empty()) return bad;
        return v == 0 ? "must be nonzero (leave the flag out for the default)" : "";
      },
      "NUMBER != 0");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s.empty() ? "needs a value, got '' (leave the flag out for the default)" : "";
      },
      "");
}

}  // namespace gdn::cli
