// Measured inter-region network: one-way latency and bandwidth per directed link.
// Any region list works; the matrices of configs/networks/ are instances.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "routing/routing_config.hpp"

namespace gwtf::routing {

/// One directed link as stored in a matrix.
struct link_params {
  double latency_ms = 0;     ///< one-way latency in milliseconds
  double bandwidth_mbps = 0; ///< bandwidth in Mbit/s

  /// Reports out-of-range values.
  void validate(const issue_sink& report) const;
};

/// Directed latency/bandwidth matrices between regions (row = sender, column = receiver).
struct network_matrix {
  std::string name;                              ///< scenario name
  std::vector<std::string> regions;              ///< region names, the matrices' index order
  link_params intra_region{2.5, 2000};           ///< any two hosts inside one region
  /// Per region, the links inside it where they differ from `intra_region` (a simulated
  /// degrade of one region's own links); empty: `intra_region` in every region.
  std::vector<link_params> intra_by_region;
  std::vector<std::vector<double>> latency_ms;     ///< one-way latency, ms
  std::vector<std::vector<double>> bandwidth_mbps; ///< bandwidth, Mbit/s

  /// Reports shape errors (n x n), duplicate regions, negative or non-finite values.
  void validate(const issue_sink& report) const;

  /// Index of a region, if it exists.
  std::optional<std::size_t> region_index(const std::string& region) const;

  /// The link between two regions (by index); the intra-region link when they are equal.
  link_params link(std::size_t from, std::size_t to) const;
};

template <class F>
void visit_fields(F& f, link_params& x) {
  f("latency_ms", x.latency_ms);
  f("bandwidth_mbps", x.bandwidth_mbps);
}

template <class F>
void visit_fields(F& f, network_matrix& x) {
  f("name", x.name);
  f("regions", x.regions);
  f("intra_region", x.intra_region);
  f("latency_ms", x.latency_ms);
  f("bandwidth_mbps", x.bandwidth_mbps);
}

} // namespace gwtf::routing
