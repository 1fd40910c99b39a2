// Internal to app/: the nearest-rank quantile the reports use (the simulator's, `compare`'s).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace gwtf::app {

/// The value at rank ceil(q * n) of `v` (nearest rank, the first for q = 0); 0 for none.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, idx == 0 ? 0 : idx - 1)];
}

} // namespace gwtf::app
