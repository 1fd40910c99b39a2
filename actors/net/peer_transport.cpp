// The transport of node mode (actors/net/peer_transport.hpp): a thin actor over the socket
// loop (actors/net/peer_io.hpp), which owns every peer connection on a thread of its own:
// TLS (actors/net/tls_session), the frame reader (actors/net/peer_framing), which checks each
// header before it allocates, and the frame writer, control lane first. Whole frames go from
// the loop to the link as messages.
// A dial runs its blocking resolve and connect in a helper actor, then the loop takes the
// socket. Both ends send a hello first; a dial is answered when the peer's hello arrives, so
// a peer that is not caf-gwtf, speaks no TLS or another CA's fails the dial with its reason.
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/net/peer_transport.hpp"
#include "actors/net/peer_io.hpp"
#include "actors/net/peer_framing.hpp"
#include "actors/interfaces.hpp"

namespace gwtf::actors {

static_assert(static_cast<std::int32_t>(service::stage) == 3, "peer_framing::lane_of names the stage service 3");

namespace {

struct transport_state {
  std::unique_ptr<peer_io> io; // destroyed with the actor: its thread stops, its sockets close
  caf::error failed;           // why it does not listen
  std::map<std::uint64_t, std::pair<std::string, caf::response_promise>> dials; // by serial
  std::uint64_t next_serial = 0;
};

using self_ptr = caf::stateful_actor<transport_state>*;

// Runs in its own thread (a blocking resolve or connect must not stall the actor): connects to
// host:port within `timeout_ms` and tells the transport the socket, or why not.
void dial_socket(caf::blocking_actor* self, caf::actor transport, std::uint64_t serial, std::string host,
                 std::uint16_t port, int timeout_ms) {
  auto answer = [&](int fd, std::string why) {
    self->send(transport, done_atom::value, serial, static_cast<std::int32_t>(fd), std::move(why));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    answer(-1, std::string{"cannot resolve '"} + host + "': " + ::gai_strerror(rc));
    return;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string why = "no address";
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::string{"socket: "} + std::strerror(errno);
      continue;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
      if (rc == 0) {
        why = "no answer within " + std::to_string(timeout_ms) + " ms";
        ::close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      why = std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::freeaddrinfo(found);
    answer(fd, {});
    return;
  }
  ::freeaddrinfo(found);
  answer(-1, why);
}

caf::behavior peer_transport(self_ptr self, peer_transport_options opts) {
  auto& st = self->state;
  peer_io_options io = opts; // the socket loop's part
  // Called on the loop's thread: messages only, sent as this actor (the link checks that
  // peer frames come from its transport). The weak handle breaks the cycle state -> loop ->
  // callbacks -> this actor.
  peer_io_events ev;
  caf::weak_actor_ptr me{self->ctrl()};
  auto as_me = [me](const caf::actor& to, auto&&... xs) {
    if (auto strong = me.lock())
      caf::send_as(caf::actor_cast<caf::actor>(strong), to, std::forward<decltype(xs)>(xs)...);
  };
  auto link = opts.link;
  ev.frame = [as_me, link](std::uint64_t conn, std::int32_t svc, bool introduction, std::vector<std::uint8_t>&& bytes) {
    as_me(link, net_atom::value, conn, svc, introduction, wire_frame{std::move(bytes)});
  };
  ev.certified = [as_me, link](std::uint64_t conn, std::vector<std::string> names) {
    as_me(link, certified_atom::value, conn, std::move(names));
  };
  ev.closed = [as_me, link](std::uint64_t conn, const std::string& why) { as_me(link, closed_atom::value, conn, why); };
  ev.refused = [reporter = opts.reporter, host = opts.host_name](const std::string& what) {
    if (reporter)
      caf::anon_send(reporter, failure_atom::value, host, what);
  };
  ev.dialled = [me](std::uint64_t serial, std::uint64_t conn, const std::string& why) {
    if (auto strong = me.lock())
      caf::anon_send(caf::actor_cast<caf::actor>(strong), done_atom::value, serial, conn, why);
  };
  std::string why;
  st.io = peer_io::start(std::move(io), std::move(ev), why);
  if (!st.io)
    st.failed = caf::make_error(caf::sec::cannot_open_port, why);
  auto dial_timeout_ms = opts.dial_timeout_ms;
  return {
    [self](caf::get_atom) -> caf::result<std::uint16_t> {
      if (self->state.io)
        return self->state.io->port();
      return self->state.failed;
    },
    [self, dial_timeout_ms](caf::connect_atom, const std::string& host,
                            std::uint16_t port) -> caf::result<std::uint64_t> {
      auto& st = self->state;
      if (!st.io)
        return st.failed;
      auto serial = ++st.next_serial;
      auto address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
      auto promise = self->make_response_promise();
      st.dials.emplace(serial, std::make_pair(address, promise));
      self->spawn(dial_socket, caf::actor_cast<caf::actor>(self), serial, host, port, dial_timeout_ms);
      return promise;
    },
    // The helper's answer: the connected socket, or why not.
    [self](done_atom, std::uint64_t serial, std::int32_t fd, const std::string& why) {
      auto& st = self->state;
      auto d = st.dials.find(serial);
      if (d == st.dials.end()) { // cannot happen: every serial is answered once
        if (fd >= 0)
          ::close(fd);
        return;
      }
      if (fd < 0) {
        d->second.second.deliver(caf::make_error(caf::sec::cannot_connect_to_node, d->second.first + ": " + why));
        st.dials.erase(d);
        return;
      }
      st.io->adopt(serial, fd, d->second.first);
    },
    // The loop's answer: the peer said hello (conn), or the connection failed before.
    [self](done_atom, std::uint64_t serial, std::uint64_t conn, const std::string& why) {
      auto& st = self->state;
      auto d = st.dials.find(serial);
      if (d == st.dials.end())
        return;
      if (conn != 0)
        d->second.second.deliver(conn);
      else
        d->second.second.deliver(caf::make_error(caf::sec::cannot_connect_to_node, why));
      st.dials.erase(d);
    },
    [self](send_atom, std::uint64_t id, std::int32_t svc, bool introduction, wire_frame& frame) {
      if (self->state.io)
        self->state.io->send(id, svc, introduction, std::move(frame.bytes), false);
    },
    // The same, behind every bulk frame already queued to that peer (a LEAVE after the share).
    [self](send_atom, std::uint64_t id, std::int32_t svc, wire_frame& frame, bulk_atom) {
      if (self->state.io)
        self->state.io->send(id, svc, false, std::move(frame.bytes), true);
    },
  };
}

} // namespace

caf::actor spawn_peer_transport(caf::actor_system& sys, peer_transport_options opts) {
  return sys.spawn(peer_transport, std::move(opts));
}

} // namespace gwtf::actors
