// Test helper: runs a config struct's validate() and collects what it reports.
#pragma once

#include <map>
#include <string>

namespace gwtf::test {

/// key -> expectation for every issue `c.validate(args..., sink)` reports.
template <class T, class... Args>
std::map<std::string, std::string> issues_of(const T& c, Args... args) {
  std::map<std::string, std::string> out;
  c.validate(args..., [&](const std::string& k, const std::string& e) { out[k] = e; });
  return out;
}

} // namespace gwtf::test
