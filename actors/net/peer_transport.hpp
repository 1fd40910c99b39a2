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

#include "actors/net/peer_io.hpp"
#include "actors/protocols.hpp"

namespace gwtf::actors {

// Listens on node.listen and dials peers; answers
//   (caf::get_atom) -> uint16 port it listens on, or the error;
//   (caf::connect_atom, host, uint16 port) -> uint64 connection id once the peer's hello came
//     (after TLS), within `dial_timeout_ms` for the TCP connect and `handshake_timeout_ms`
//     for the rest; or the error, naming the peer;
//   (send_atom, uint64 connection, int32 service, bool introduction, frame): queued on the
//     service's lane (control before bulk); dropped if the connection is gone;
//   (send_atom, uint64 connection, int32 service, frame, bulk_atom): the same behind every bulk
//     frame already queued to that peer (a LEAVE after the last share).
// It tells `link` (net_atom, connection, service, introduction, frame) per inbound frame, and
// (closed_atom, connection, why) when a greeted connection ends. A connection that breaks the
// framing (a header announcing more than `max_frame`, bytes that are not ours, no hello in
// time, a failed TLS handshake) is reported to `reporter` with its address and closed.
// Stop it with an exit message: its socket loop's thread ends with it.
struct peer_transport_options : peer_io_options {
  int dial_timeout_ms = 2000;   ///< a peer that does not accept the connection by then: failed
  std::string host_name;        ///< this host, for reports
  failure_sink_actor reporter;  ///< (failure_atom, host, what) per refused connection
  caf::actor link;              ///< takes the inbound frames and the closes
};
caf::actor spawn_peer_transport(caf::actor_system& sys, peer_transport_options opts);

} // namespace gwtf::actors
