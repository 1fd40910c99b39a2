// What --check derives from a valid config: stage partition, capacities and the flow
// optimum over the emulated network. Pure (no CAF, no LibTorch), so it is tested directly.
#pragma once

#include <string>

#include "app/config/cluster_config.hpp"

namespace gwtf::app {

/// Derived facts as YAML comment lines ("# ..."), so that --check output stays loadable.
std::string derived_report(const cluster_config& cfg);

} // namespace gwtf::app
