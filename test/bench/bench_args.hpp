// Command-line numbers shared by the benchmark commands: one home for how they are refused.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace gwtf::bench {

/// `text` as an integer in [1, 10^6]; anything else prints "PROGRAM: WHAT: expected a positive
/// integer, got 'TEXT'" to stderr and exits 2.
inline int positive_arg(const char* program, const char* what, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 1000000) {
    std::fprintf(stderr, "%s: %s: expected a positive integer, got '%s'\n", program, what, text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

} // namespace gwtf::bench
