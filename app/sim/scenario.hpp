// Simulation scenarios (configs/scenarios/*.yaml) for `caf-gwtf sim`: read from YAML into the
// simulator's sections (sim/scenario_config.hpp), validated with file:line:column, then turned
// into a sim::sim_scenario by sim/scenario.hpp; new scenarios and network matrices need no code.
// Reference: docs/simulator.md.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/config/cluster_config.hpp"
#include "routing/dtfm.hpp"
#include "sim/scenario_config.hpp"
#include "sim/simulator.hpp"

namespace gwtf::app {

// The scenario sections are the simulator's (sim/scenario_config.hpp).
using sim::sim_model_config;
using sim::sim_role;
using sim::sim_host_group;
using sim::sim_action;
using sim::sim_script_event;
using sim::sim_churn_config;
using sim::sim_placement_policy;
using sim::sim_placement_config;
using sim::sim_compression_mode;
using sim::sim_compression_config;
using sim::sim_routing_config;
using sim::sim_scenario_config;

/// A loaded scenario: the file's values and the simulation inputs derived from them.
struct loaded_scenario {
  sim_scenario_config config;
  sim::sim_scenario sim;
  /// The initial relays' placement by DT-FM's cost model (whatever the policy placed them
  /// by), when every relay stage has a relay: to compare placements.
  std::optional<routing::dtfm_placement> dtfm;
};

/// The scenario, or every error found (file:line:column: key: message), never both.
struct scenario_result {
  std::optional<loaded_scenario> scenario;
  std::vector<config_error> errors;
};

/// Reads and validates a scenario file and the network matrix it names; `seed` overrides
/// the file's seed.
scenario_result load_scenario(const std::filesystem::path& file, std::optional<std::uint64_t> seed = {});

/// Same, from text; `file` labels errors, `base_dir` resolves the network path.
scenario_result parse_scenario(const std::string& text, const std::string& file,
                               const std::filesystem::path& base_dir,
                               std::optional<std::uint64_t> seed = {});

/// Every key path a scenario accepts, e.g. "churn.crash_rate", "hosts[].tflops".
std::vector<std::string> scenario_key_paths();

} // namespace gwtf::app
