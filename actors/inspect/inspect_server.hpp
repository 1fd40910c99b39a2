// Node mode's inspection server (the shell's port) and metrics server (HTTP).
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

// --- inspection server (node mode) ---------------------------------------------------------
// Listens on node.inspect for the shell (`caf-gwtf shell`): frames of a 4-byte big-endian
// length and an encoded wire message; an INSPECT_REQUEST is answered with an INSPECT_REPLY
// from the host's supervisor. A frame above `max_frame` bytes, a bad frame or another message
// kind is logged with its address and closes that connection; the host goes on.
// (caf::get_atom) -> uint16 port it listens on, or the error.
struct inspect_server_options {
  std::string host;               ///< address to bind
  std::uint16_t port = 0;         ///< 0 = any
  caf::actor supervisor;          ///< the host's supervisor (supervisor_actor)
  std::string host_name;          ///< this host, for reports
  failure_sink_actor reporter;          ///< (failure_atom, host, what) per refused connection
  int timeout_ms = 2000;          ///< the supervisor's answer must come within this
  bool control = false;           ///< node.inspect_control: obey `drain` and `crash`
  /// node.tls: the shell must complete mutual TLS with a certificate of the cluster CA first
  /// (`caf-gwtf shell --cert --key --ca`); null: plain TCP.
  std::shared_ptr<const tls_context> tls;
  int handshake_timeout_ms = 10000; ///< a TLS client that has not finished its handshake by then is dropped
};
caf::actor spawn_inspect_server(caf::actor_system& sys, inspect_server_options opts);

// --- metrics server (node mode, node.metrics) -------------------------------------------
// HTTP/1.x on node.metrics: GET /metrics (Prometheus text format, the supervisor's "metrics"
// view), /healthz (200 while the host's actors answer), /readyz (200 once the host holds
// valid weights of its stage, else 503). One request per connection; a request head above
// 8 KiB, or anything that is not a request line, gets 400 and the connection is closed.
// Options as for the inspection server. (caf::get_atom) -> uint16 port, or the error.
caf::actor spawn_metrics_server(caf::actor_system& sys, inspect_server_options opts);

} // namespace gwtf::actors
