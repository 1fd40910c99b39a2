// The GWTF edge cost d_ij (docs/design.md, "Cost model").
#pragma once

#include "routing/network.hpp"

namespace gwtf::routing {

/// Measured (or emulated) state of one directed link, in SI units.
struct link_estimate {
  double latency_s = 0;          ///< one-way latency, seconds
  double bandwidth_bytes_s = 0;  ///< bandwidth, bytes per second
};

/// Converts a matrix entry (ms, Mbit/s) to SI units.
link_estimate to_estimate(const link_params& link);

/// Cost in seconds of routing one microbatch over i -> j (i at stage s, j at stage s+1),
/// forward and backward averaged:
///   d_ij = (c_i + c_j)/2 + (lat_ij + lat_ji)/2 + 2*size/(bw_ij + bw_ji).
/// `compute_*_s` is forward+backward time of one microbatch at that node.
double edge_cost(double compute_i_s, double compute_j_s, const link_estimate& ij,
                 const link_estimate& ji, double activation_bytes);

/// Seconds one microbatch occupies the link i <-> j: its activation one way and its gradient
/// back, averaged over the two directions (2*size/(bw_ij + bw_ji), the transfer part of d_ij).
/// A further microbatch on the same link waits that long behind it.
double link_occupancy_s(const link_estimate& ij, const link_estimate& ji, double activation_bytes);

} // namespace gwtf::routing
