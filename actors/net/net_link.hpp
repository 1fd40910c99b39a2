// Node mode's link: this process's one host and its TCP peers.
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

// --- TCP link (node mode: one host per process) -------------------------------------------
// net_link_actor (actors/protocols.hpp): the link layer's protocol for this process's one host,
// plus its start, and the frames and closes of the transport's connections.
struct net_link_options {
  host_config self;                         ///< this process's host
  std::string advertise;                    ///< "host:port" peers dial
  std::vector<std::string> bootstrap;       ///< dialled while no peer is connected
  std::uint64_t cluster = 0;                ///< hash every peer must share
  std::uint64_t incarnation = 0;            ///< raises on every start of the process
  /// The transport runs TLS: a connection is bound only to a name its certificate carries.
  bool certified = false;
  std::optional<routing::network_matrix> network; ///< emulated delays, if any
  double time_scale = 1.0;                  ///< emulated delays x this
  std::int64_t max_message_bytes = 64 << 20;
  int connect_timeout_ms = 2000;            ///< a dial that takes longer fails
  int gossip_interval_ms = 500;             ///< gossip to a few peers, redial lost ones
  failure_sink_actor reporter;              ///< (failure_atom, host, what) for refused input
};
net_link_actor spawn_net_link(caf::actor_system& sys, net_link_options opts);

} // namespace gwtf::actors
