// What --check derives from a valid config: stage partition, capacities and the flow
// optimum over the emulated network. Pure (no CAF, no LibTorch), so it is tested directly.
#pragma once

#include <cstdint>

#include <string>

#include "app/config/cluster_config.hpp"

namespace gwtf::app {

/// Derived facts as YAML comment lines ("# ..."), so that --check output stays loadable.
/// `machine_bytes`: this machine's memory, which the hosts' estimated needs are held against
/// (0: not compared).
std::string derived_report(const cluster_config& cfg, std::uint64_t machine_bytes);
/// The same against this machine's physical memory.
std::string derived_report(const cluster_config& cfg);

} // namespace gwtf::app
