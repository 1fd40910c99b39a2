// Node mode's transport: every peer connection of this host in one hop, owned by a socket
// loop (actors/net/peer_io.hpp) that frames, checks and (with node.tls) encrypts in place. No
// relay, no CAF broker: the bytes of a peer go from the socket through TLS and the frame
// reader (actors/net/peer_framing.hpp) to the link. docs/runtime.md, "The transport".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/net/tls_session.hpp"
#include "actors/protocols.hpp"

namespace gwtf::actors {

// Listens on node.listen and dials peers; answers
//   (caf::get_atom) -> uint16 port it listens on, or the error;
//   (caf::connect_atom, host, uint16 port) -> uint64 connection id once the peer's hello came
//     (after TLS), within `dial_timeout_ms` for the TCP connect and `handshake_timeout_ms`
//     for the rest; or the error, naming the peer;
//   (send_atom, uint64 connection, int32 service, bool introduction, frame): queued on the
//     service's lane (control before bulk); dropped if the connection is gone.
// It tells `link` (net_atom, connection, service, introduction, frame) per inbound frame, and
// (closed_atom, connection, why) when a greeted connection ends. A connection that breaks the
// framing (a header announcing more than `max_frame`, bytes that are not ours, no hello in
// time, a failed TLS handshake) is reported to `reporter` with its address and closed.
struct peer_transport_options {
  std::string host;               ///< address to bind
  std::uint16_t port = 0;         ///< 0 = any
  /// node.tls: every connection completes mutual TLS with a certificate of the cluster CA
  /// before a frame is read from it; null: plain TCP.
  std::shared_ptr<const tls_context> tls;
  std::shared_ptr<const tls_context> tls_client; ///< the same for dialled peers
  int dial_timeout_ms = 2000;       ///< a peer that does not accept the connection by then: failed
  int handshake_timeout_ms = 10000; ///< no TLS handshake and hello by then: dropped
  std::uint64_t max_frame = 64u << 20; ///< largest frame accepted (node.max_message_bytes)
  /// Unsent bytes a connection may have in its socket (TCP_NOTSENT_LOWAT) and encrypted
  /// ahead; more waits in the frame writer, where control frames overtake bulk ones.
  std::size_t send_window = 256 * 1024;
  std::string host_name;          ///< this host, for reports
  failure_sink_actor reporter;    ///< (failure_atom, host, what) per refused connection
  caf::actor link;                ///< takes the inbound frames and the closes
};
caf::actor spawn_peer_transport(caf::actor_system& sys, peer_transport_options opts);

} // namespace gwtf::actors
