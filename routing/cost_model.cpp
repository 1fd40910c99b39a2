#include "routing/cost_model.hpp"

#include <limits>

namespace gwtf::routing {

link_estimate to_estimate(const link_params& link) {
  return link_estimate{link.latency_ms / 1000.0, link.bandwidth_mbps * 1e6 / 8.0};
}

double edge_cost(double compute_i_s, double compute_j_s, const link_estimate& ij,
                 const link_estimate& ji, double activation_bytes) {
  double bw = ij.bandwidth_bytes_s + ji.bandwidth_bytes_s;
  if (!(bw > 0))
    return std::numeric_limits<double>::infinity(); // no usable link in either direction
  return (compute_i_s + compute_j_s) / 2 + (ij.latency_s + ji.latency_s) / 2
         + 2 * activation_bytes / bw;
}

double link_occupancy_s(const link_estimate& ij, const link_estimate& ji, double activation_bytes) {
  double bw = ij.bandwidth_bytes_s + ji.bandwidth_bytes_s;
  return bw > 0 ? 2 * activation_bytes / bw : std::numeric_limits<double>::infinity();
}

} // namespace gwtf::routing
