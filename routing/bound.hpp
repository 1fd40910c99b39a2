// A proven upper bound on training throughput (issue 19): the least time any router could
// take for one iteration with a given set of hosts, under the simulator's physics
// (docs/simulator.md): per-host FIFO compute, per directed link FIFO transfers, a microbatch
// visits every relay stage forward (1/3 of the stage's compute) and backward (2/3), returns
// to its own data holder for the head (the holder's compute), and an iteration ends with
// each stage's all-reduce. Pure; no clocks. The proof of each term is in docs/routing.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "routing/cost_model.hpp"

namespace gwtf::routing {

/// A host that can work at some moment of the iteration (a host seen at two stages is
/// listed once per stage: that only loosens the bound).
struct bound_host {
  int stage = 0;        ///< 0 = data holder, 1..S-1 relay
  int capacity = 1;     ///< activation stashes it can hold at once
  double compute_s = 0; ///< forward + backward of one microbatch, seconds
  /// Hosts with the same group >= 0 have the same links to every other host (one region):
  /// the bound then looks at one of them per stage. -1: its own.
  std::int64_t group = -1;
};

/// Best-case link between hosts a and b (index into the host list), a -> b.
using bound_link_fn = std::function<link_estimate(std::size_t a, std::size_t b)>;

/// The terms of one iteration's lower bound on time, seconds.
struct iteration_bound {
  double ring_s = 0;         ///< the cheapest possible round trip of one microbatch
  double holder_s = 0;       ///< the busiest data holder's head compute
  double stage_s = 0;        ///< the slowest relay stage's compute and stash limit
  int limiting_stage = -1;   ///< the stage of stage_s (-1: none)
  double allreduce_s = 0;    ///< the aggregation, as given by the caller
  double seconds = 0;        ///< max(ring, holder, stage) + allreduce
};

/// Lower bound on one iteration's time. `microbatches_per_holder` per stage-0 host.
/// A relay stage without hosts, or a missing link on every pair of two stages, gives
/// an infinite bound (no router can finish such an iteration).
iteration_bound bound_iteration(const std::vector<bound_host>& hosts, int stages, int microbatches_per_holder,
                                double activation_bytes, const bound_link_fn& link, double allreduce_s);

/// Lower bound on one stage's all-reduce among `replicas` (indices into a host list):
/// every replica sends 2 x bytes / R to each other replica, in parallel, on idle links.
/// `count` (R; 0: replicas.size()) lets `replicas` list representatives only, e.g. two per
/// region where links depend on the regions alone: the worst pair is the same.
double allreduce_lower_bound(const std::vector<std::size_t>& replicas, double gradient_bytes,
                             const bound_link_fn& link, std::size_t count = 0);

/// Microbatches per second one relay stage can finish per second at most (the stage term's
/// rate): stash-holding microbatches occupy a slot for compute + `downstream_s`, the others
/// must rematerialise their forward (1/3 of the fastest host's compute) somewhere in the
/// stage. Exposed for tests.
double stage_rate_bound(const std::vector<bound_host>& stage_hosts, double downstream_s);

} // namespace gwtf::routing
