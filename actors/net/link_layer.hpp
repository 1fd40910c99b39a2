// The embedded cluster's link layer: every host of the process, the emulated network between them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/node_config.hpp"
#include "actors/protocols.hpp"
#include "routing/network.hpp"

namespace gwtf::actors {

/// The link layer of every host of the process (link_actor, actors/protocols.hpp): delivers
/// (deliver_atom, from, frame) to the registered actor of (to, service).
link_actor spawn_link_layer(caf::actor_system& sys, routing::network_matrix net,
                            std::vector<host_config> hosts, double time_scale);

} // namespace gwtf::actors
