// Node mode's guard in front of the middleman: frame limits and TLS on every peer connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/net/tls_session.hpp"
#include "actors/protocols.hpp"

namespace gwtf::actors {

// Listens on node.listen and relays every connection to the middleman's private loopback
// port, closing one whose BASP frame header announces more than `max_payload` bytes
// (actors/net/frame_guard.hpp). (caf::get_atom) -> uint16 port it listens on, or the error.
// Dials the same way: (caf::connect_atom, host, uint16 port) connects to the peer (within
// `dial_timeout_ms`) and answers a one-time loopback port for the middleman to connect to;
// the peer's bytes are checked like an inbound connection's. Or the error, naming the peer.
struct net_guard_options {
  std::string host;               ///< address to bind
  /// node.tls: every inbound connection must complete mutual TLS with a certificate of the
  /// cluster CA before any byte reaches the middleman; null: plain TCP.
  std::shared_ptr<const tls_context> tls;
  /// node.tls, the client side: every dialled peer must present a certificate of the cluster
  /// CA, and is shown this host's. Null: dials are plain TCP.
  std::shared_ptr<const tls_context> tls_client;
  int dial_timeout_ms = 2000;     ///< a peer that does not accept the connection by then: failed
  int handshake_timeout_ms = 10000; ///< a TLS peer that has not finished its handshake by then is dropped
  std::uint16_t port = 0;         ///< 0 = any
  std::uint16_t inner_port = 0;   ///< the middleman's port on 127.0.0.1
  std::uint64_t max_payload = 0;  ///< largest frame payload accepted
  std::string host_name;          ///< this host, for reports
  failure_sink_actor reporter;          ///< (failure_atom, host, what) per closed connection
};
caf::actor spawn_net_guard(caf::actor_system& sys, net_guard_options opts);

} // namespace gwtf::actors
