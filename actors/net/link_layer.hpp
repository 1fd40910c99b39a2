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
#include "routing/network.hpp"

namespace gwtf::actors {

// --- link layer (one per process) ------------------------------------------------------
// (register_atom, host, int32 service, actor)   a host's actor for a service; monitored
// (send_atom, from, to, int32 service, frame)   carry a frame from -> to, delayed by the
//                                               emulated link; dropped if `to` is gone
// (slow_atom, host a, host b, double factor)    the link a <-> b turns `factor` x slower
// delivers: (deliver_atom, from, frame) to the registered actor of (to, service)
caf::actor spawn_link_layer(caf::actor_system& sys, routing::network_matrix net,
                            std::vector<host_config> hosts, double time_scale);

} // namespace gwtf::actors
