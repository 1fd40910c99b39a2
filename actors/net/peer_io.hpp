// The socket loop under node mode's transport (actors/net/peer_transport.hpp), with no CAF:
// one thread owns the listening socket and every peer connection of a host, and moves bytes
// between the sockets and the codec (actors/net/peer_framing.hpp) with no copy on the plain
// path: a fragment's payload is read from the socket straight into its frame, and frames
// leave from their own memory in one writev per turn. With TLS (actors/net/tls_session.hpp)
// the records are decrypted into a reused buffer and encrypted from one.
//
// Other threads talk to it through `dial`/`adopt`/`send` (a locked queue and an eventfd);
// it answers through the `peer_io_events` callbacks, called on its own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/net/port_guard.hpp"
#include "actors/net/tls_session.hpp"

namespace gwtf::actors {

struct peer_io_options {
  std::string host;       ///< address to bind
  std::uint16_t port = 0; ///< 0 = any
  std::shared_ptr<const tls_context> tls;        ///< accepted connections; null: plain TCP
  std::shared_ptr<const tls_context> tls_client; ///< dialled connections
  int handshake_timeout_ms = 10000;              ///< TLS handshake and hello by then, or dropped
  std::uint64_t max_frame = 64u << 20;           ///< largest frame accepted
  /// Accepted connections: caps per port and per source address, idle timeout (the handshake
  /// timeout is `handshake_timeout_ms`, for dialled connections too). actors/net/port_guard.hpp
  port_limits limits;
  /// Bytes of unfinished frames across all connections: above it, the connection holding the
  /// most is closed (honest peers' frames are chunks far below it).
  std::uint64_t max_partial_bytes = 256u << 20;
  std::string port_name = "peer port"; ///< names the port in refusal lines
  /// Unsent bytes a connection may have in its socket (TCP_NOTSENT_LOWAT) and encrypted
  /// ahead: more waits in the frame writer, where control frames overtake bulk ones.
  std::size_t send_window = 256 * 1024;
};

struct peer_io_events {
  /// A whole frame from connection `conn`.
  std::function<void(std::uint64_t conn, std::int32_t service, bool introduction, std::vector<std::uint8_t>&& bytes)>
    frame;
  /// With TLS: the host names the peer's verified certificate carries (tls_identity::hosts, at
  /// least one: a certificate that names no host is refused), told once its handshake
  /// completed and before any of its frames. The link binds the connection only to one of them.
  std::function<void(std::uint64_t conn, std::vector<std::string> names)> certified;
  /// A greeted connection (one that `dialled` answered, or an accepted one whose hello came) ended.
  std::function<void(std::uint64_t conn, const std::string& why)> closed;
  /// A connection broke the framing, TLS, the handshake deadline, a cap or the idle timeout,
  /// and was closed (or, above a cap, never taken): one line, at most one per source address
  /// and 10 s (the next says how many were held back).
  std::function<void(const std::string& what)> refused;
  /// The answer to `adopt(serial, ...)`: the connection id once the peer's hello came, or 0
  /// and why not.
  std::function<void(std::uint64_t serial, std::uint64_t conn, const std::string& why)> dialled;
};

class peer_io {
public:
  /// Binds `opts.host:opts.port` and starts the loop; nullptr and `why` when it cannot bind.
  static std::unique_ptr<peer_io> start(peer_io_options opts, peer_io_events events, std::string& why);
  ~peer_io(); ///< stops the loop and closes every socket
  peer_io(const peer_io&) = delete;
  peer_io& operator=(const peer_io&) = delete;

  std::uint16_t port() const { return port_; }

  /// Takes a connected socket (dialled to `address`): TLS client and hello, then `dialled`.
  void adopt(std::uint64_t serial, int fd, std::string address);
  /// Queues a frame for connection `conn` on its service's lane (`behind_bulk`: on the bulk
  /// lane); dropped if the connection is gone.
  void send(std::uint64_t conn, std::int32_t service, bool introduction, std::vector<std::uint8_t> bytes,
            bool behind_bulk);

  struct loop; // internal

private:
  explicit peer_io(std::uint16_t port);
  std::uint16_t port_;
  std::unique_ptr<loop> loop_;
};

} // namespace gwtf::actors
