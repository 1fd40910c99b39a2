// Latency and bandwidth of one link from the link probe's round trips, as a pure calculation.
// A probe that waited behind other traffic (an activation in the same send queue) only takes
// longer, never shorter, so the estimate uses the least of the recent round trips of each
// kind: latency = least small round trip / 2, bandwidth = bulk bytes / (least bulk round
// trip - least small round trip). One unlucky probe no longer swings a link's cost by 1000x.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "routing/cost_model.hpp"

namespace gwtf::actors {

class link_estimator {
public:
  /// Keeps the last `window` round trips of each kind.
  explicit link_estimator(std::size_t window = 8) : window_(window == 0 ? 1 : window) {}

  /// A small probe came back after `rtt_s` seconds.
  void small(double rtt_s);

  /// A bulk probe of `bytes` came back after `rtt_s` seconds; the estimate once a small one
  /// came back too (nullopt before, or for a round trip that is not a positive number).
  std::optional<routing::link_estimate> bulk(double rtt_s, std::size_t bytes);

  /// The least recent small round trip (nullopt before the first).
  std::optional<double> least_small() const;

private:
  static void push(std::deque<double>& q, double v, std::size_t window);
  static double least(const std::deque<double>& q);

  std::size_t window_;
  std::deque<double> small_, bulk_;
};

} // namespace gwtf::actors
