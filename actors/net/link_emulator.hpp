// The emulated geo network of the embedded local cluster as a pure calculation: every
// directed link between two virtual hosts has a latency, a bandwidth and a send queue, so
// concurrent transfers on one link wait for each other. No clock, no CAF: the link-layer
// actor asks it when a message of n bytes sent now arrives.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "routing/network.hpp"

namespace gwtf::actors {

/// Delivery times over an emulated network, in emulated seconds.
class link_emulator {
public:
  /// `matrix` gives latency and bandwidth between regions.
  explicit link_emulator(routing::network_matrix matrix);
  /// Places a host in a region; false if the region is not in the matrix.
  bool place(const std::string& host, const std::string& region);
  /// Multiplies latency and transfer time of from -> to (and to -> from) by `factor` >= 1.
  void slow_down(const std::string& a, const std::string& b, double factor);
  /// When `bytes` sent from -> to at emulated time `now` arrive: the transfer starts when the
  /// link's queue is free, takes bytes/bandwidth, then the latency. Unknown hosts: nullopt.
  std::optional<double> deliver_at(const std::string& from, const std::string& to,
                                   std::size_t bytes, double now);
  /// One-way latency and bandwidth of from -> to as emulated (slowdowns applied).
  std::optional<routing::link_params> link(const std::string& from, const std::string& to) const;

private:
  routing::network_matrix matrix_;
  std::map<std::string, std::size_t> region_of_;
  std::map<std::pair<std::string, std::string>, double> busy_until_;
  std::map<std::pair<std::string, std::string>, double> slowdown_;
};

} // namespace gwtf::actors
