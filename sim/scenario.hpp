// What the simulator runs for a scenario: the sizes of its model (model/sizing.hpp, the counts
// of the modules the runtime trains), its hosts drawn from the seed, its relays placed by the
// placement policy, its script resolved to hosts and regions. Reference: docs/simulator.md.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "routing/dtfm.hpp"
#include "routing/network.hpp"
#include "sim/scenario_config.hpp"
#include "sim/simulator.hpp"

namespace gwtf::sim {

/// The simulation's inputs derived from a scenario.
struct derived_scenario {
  sim_scenario sim;
  /// The initial relays' placement by DT-FM's cost model (whatever the policy placed them
  /// by), when every relay stage has a relay and nothing was reported: to compare placements.
  std::optional<routing::dtfm_placement> dtfm;
};

/// Derives the simulation's inputs from a validated `cfg` over the network `net` (the file
/// `cfg.network` names). Every problem goes to `report(key path, message)`, in file order;
/// the result is meaningful only when nothing was reported.
derived_scenario derive_scenario(const sim_scenario_config& cfg, network_matrix net,
                                 const std::function<void(const std::string&, const std::string&)>& report);

} // namespace gwtf::sim
