// The run's spec: what every host of a run shares, built once from the config.
#pragma once

#include <memory>
#include <string>

#include "actors/cluster_spec.hpp"
#include "app/config/cluster_config.hpp"

namespace gwtf::app {

/// Everything every host of the run shares, from the config: model, roster, timings.
std::shared_ptr<actors::cluster_spec> make_spec(const cluster_config& cfg);

/// Why the runtime (embedded cluster, launch, node mode) cannot train `cfg` although it is a
/// valid config (what only the reference trainer or the simulator runs), naming the key;
/// empty when it can.
std::string runtime_refusal(const cluster_config& cfg);

} // namespace gwtf::app
