// Shared by every layer's config structs: how a validate() reports a bad field, and the
// range checks they all use. Header-only; no CAF, no LibTorch, no yaml-cpp.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

namespace gwtf {

/// Reports one invalid field: key relative to the section, and what was expected.
using issue_sink = std::function<void(const std::string& key, const std::string& expected)>;

/// Shortest readable form of a number in messages: 0.1, 1e-05, 64.
inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Reports `key` unless lo <= value <= hi; `what` names the expected quantity.
inline void check_int(const issue_sink& report, const std::string& key, long long value,
                      long long lo, long long hi, const char* what) {
  if (value < lo || value > hi)
    report(key, std::string{what} + " in [" + std::to_string(lo) + ", " + std::to_string(hi)
                  + "], got " + std::to_string(value));
}

/// Bounds of a real interval: open excludes the end point.
enum class bound { closed, open };

/// Reports `key` unless value is finite and inside the interval (lo, hi) / [lo, hi].
inline void check_real(const issue_sink& report, const std::string& key, double value, double lo,
                       bound lo_kind, double hi, bound hi_kind, const char* what) {
  bool lo_ok = lo_kind == bound::open ? value > lo : value >= lo;
  bool hi_ok = hi_kind == bound::open ? value < hi : value <= hi;
  if (!std::isfinite(value) || !lo_ok || !hi_ok)
    report(key, std::string{what} + " in " + (lo_kind == bound::open ? "(" : "[")
                  + format_number(lo) + ", " + format_number(hi)
                  + (hi_kind == bound::open ? ")" : "]") + ", got " + format_number(value));
}

/// A host name: 1-64 characters from [A-Za-z0-9._-] (the wire checks the same charset).
inline bool is_host_name(const std::string& s) {
  if (s.empty() || s.size() > 64)
    return false;
  for (char ch : s) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '.' || ch == '_' || ch == '-';
    if (!ok)
      return false;
  }
  return true;
}

/// An issue_sink that prefixes every key with `prefix.` before passing it on.
inline issue_sink nested_sink(const issue_sink& report, std::string prefix) {
  return [&report, prefix = std::move(prefix)](const std::string& key, const std::string& e) {
    report(prefix + "." + key, e);
  };
}

} // namespace gwtf
