// The process's resident set as Linux counts it, for the layer-swapping test and benchmark:
// one home for reading /proc/self/status and for starting a new peak.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace gwtf::test {

/// One line of /proc/self/status in bytes ("VmRSS": resident now, "VmHWM": its peak); -1
/// when the line is missing.
inline std::int64_t status_bytes(const std::string& field) {
  std::ifstream f{"/proc/self/status"};
  for (std::string line; std::getline(f, line);)
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream in{line.substr(field.size() + 1)};
      std::int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
  return -1;
}

/// Starts a new peak: VmHWM is the resident set now, then its high-water mark.
inline void reset_peak() {
  std::ofstream{"/proc/self/clear_refs"} << "5";
}

} // namespace gwtf::test
