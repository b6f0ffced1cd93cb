// Range checks of numeric flags. They read the flag's text before CLI11 converts it, so "1e23"
// for a whole number or "nan" for a real is refused by name instead of rounded or saturated; CLI11
// puts the flag's name in front of the message ("--seq: must be at least 1, got -5").
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

namespace gdn::cli {

// A whole number in [min, max], written as one (digits with an optional sign).
CLI::Validator whole_number(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());

// A finite real number in [min, max]; `above_min` and `below_max` leave out the ends.
CLI::Validator real_number(double min, double max = std::numeric_limits<double>::max(),
                           bool above_min = false, bool below_max = false);

// A finite real number other than zero.
CLI::Validator nonzero_real();

// Anything but the empty string (a flag given as '' would otherwise mean "not given").
CLI::Validator non_empty();

}  // namespace gdn::cli
