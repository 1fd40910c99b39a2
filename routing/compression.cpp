#include "routing/compression.hpp"

#include <algorithm>
#include <cmath>

namespace gwtf::routing {

wire_plan plan_wire(const compression_policy& policy, std::int64_t elements,
                    std::optional<double> bandwidth_bytes_s, double receiver_compute_s) {
  const double value = static_cast<double>(policy.value_bytes);
  const double per_kept = value + static_cast<double>(sparse_index_bytes);
  wire_plan dense{false, elements, static_cast<double>(elements) * value};
  if (elements <= 0)
    return dense;
  double density = std::clamp(policy.min_density, 0.0, 1.0);
  auto floor_keep = static_cast<std::int64_t>(std::ceil(density * static_cast<double>(elements)));
  std::int64_t keep = floor_keep;
  if (!policy.every_link) {
    if (!bandwidth_bytes_s || !(*bandwidth_bytes_s > 0) || !(receiver_compute_s > 0))
      return dense; // nothing measured yet: a link is fast until shown slow
    if (dense.bytes / *bandwidth_bytes_s <= receiver_compute_s)
      return dense; // the link keeps up with the receiver's compute
    // As many values as cross the link in the receiver's compute time.
    double budget = receiver_compute_s * *bandwidth_bytes_s;
    keep = std::max(floor_keep, static_cast<std::int64_t>(std::floor(budget / per_kept)));
  }
  keep = std::clamp<std::int64_t>(keep, 1, elements);
  double bytes = static_cast<double>(keep) * per_kept;
  if (bytes >= dense.bytes)
    return dense;
  return {true, keep, bytes};
}

} // namespace gwtf::routing
