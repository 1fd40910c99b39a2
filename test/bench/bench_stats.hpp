// Statistics shared by the benchmark commands: one home for how a run's samples are summed up.
#pragma once

#include <algorithm>
#include <vector>

namespace gwtf::bench {

/// The median of `v` (the upper one of an even count, as every figure in docs/benchmarks.md
/// was computed); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace gwtf::bench
