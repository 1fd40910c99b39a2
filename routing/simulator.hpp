// Discrete-event simulation of pipeline training under churn (issue 6, first slice): virtual
// time, one thread, deterministic for a seed. The routers are the routing/ cores unchanged:
// GWTF = one flow_balancer per host wired through simulated links, SWARM = one swarm_router
// per data holder, optimal = the oracle (max_flow_min_max) recomputed with global knowledge
// after every change. Everything else is common to all routers, so they compare fairly:
// hosts, compute times, capacities, links with per-link send queues, the churn trace (drawn
// from the seed before routing starts), failure detection delay and stage aggregation.
// Model and decisions: docs/simulator.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "routing/network.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::routing {

/// One simulated host.
struct sim_host {
  std::string name;
  std::size_t region = 0; ///< index into the network's regions
  int stage = 0;          ///< 0 = data holder, 1..S-1 = relay
  int capacity = 1;       ///< microbatches it can hold (stash) at once
  double compute_s = 0;   ///< forward + backward of one microbatch at its stage, seconds
};

/// A simulation run's inputs (derived figures; deploy/ builds them from a scenario file).
struct sim_scenario {
  network_matrix net;
  int stages = 2;                    ///< S: stage 0 = data holders, 1..S-1 relays
  std::vector<sim_host> hosts;
  int microbatches_per_holder = 8;   ///< each data holder's share of the global batch
  double activation_bytes = 0;       ///< one activation (= one activation gradient)
  double stage_gradient_bytes = 0;   ///< one replica's gradient share at aggregation
  double tokens_per_microbatch = 0;
  int iterations = 10;
  double crash_rate = 0;             ///< per relay and iteration; a stage keeps one live relay
  double detect_s = 2.0;             ///< failure detection delay (heartbeat timeout), all routers
  std::uint64_t seed = 1;
  gwtf_config gwtf;
  swarm_config swarm;
};

enum class sim_router { gwtf, swarm, optimal };
const char* to_string(sim_router r);

/// One crash of the trace.
struct sim_crash {
  std::size_t host = 0;
  int iteration = 0;
  double at_fraction = 0; ///< when inside the iteration: a fraction of the previous one's length
};

/// What a run measured.
struct sim_result {
  sim_router router = sim_router::gwtf;
  bool completed = false;              ///< every iteration finished (false: no route left)
  std::string why;                     ///< when not completed
  double total_s = 0;                  ///< virtual time until the last iteration's aggregation
  double setup_s = 0;                  ///< time before the first iteration could start (flow building)
  std::vector<double> iteration_s;     ///< per iteration, start to end of aggregation
  std::vector<double> iteration_end_s; ///< virtual time at which each iteration ended
  std::vector<int> flows;              ///< concurrent routes per iteration (flows; SWARM: none = 0)
  std::int64_t microbatches = 0;       ///< completed, over all iterations
  double compute_s = 0;                ///< compute seconds spent, wasted included
  double wasted_s = 0;                 ///< compute seconds thrown away
  std::vector<double> crash_times_s;   ///< for plots
  int crashes = 0;
};

/// The crash trace of a scenario: the same for every router.
std::vector<sim_crash> crash_trace(const sim_scenario& s);

/// Runs the scenario with `router`.
sim_result simulate(const sim_scenario& s, sim_router router);

} // namespace gwtf::routing
