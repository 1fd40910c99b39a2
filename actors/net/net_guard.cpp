// The public face of a node's TCP link: accepts every connection on node.listen, relays it to
// the middleman's private loopback port, and checks each inbound BASP frame header with
// frame_guard before the middleman allocates for it. A connection that announces an
// oversized frame, or is not BASP at all and trips the check, is logged with its address
// and closed; the host goes on.
// With node.tls the guard also ends TLS: a connection reaches the middleman only once its
// peer completed the mutual handshake with a certificate of the cluster CA; plain TCP, no
// certificate, another CA's, or no handshake within the timeout is logged and closed.
// Dials go through the guard too (a peer this host dials could answer with the same
// header): a blocking helper connects, the guard takes the socket, checks what the peer
// sends (and runs the TLS client), and opens a one-time loopback port that the middleman
// connects to; the two are relayed like an inbound pair.
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/net/net_guard.hpp"
#include "actors/net/frame_guard.hpp"
#include "actors/net/broker_listener.hpp"
#include "actors/interfaces.hpp"

namespace gwtf::actors {

namespace {

struct relay_pair {
  caf::io::connection_handle other; // invalid while a TLS peer is still in its handshake
  bool outer = false; // the peer's side (checked), else the middleman's side
  bool paired = false;
  bool dialled = false; // outer side of a connection this host dialled
};

struct dial_request {
  std::string address; // host:port, for the answer and the logs
  caf::response_promise promise;
};

struct guard_state {
  net_guard_options opts;
  broker_listener listener;
  std::map<caf::io::connection_handle, relay_pair> pairs;
  std::map<caf::io::connection_handle, frame_guard> guards;
  std::map<caf::io::connection_handle, std::string> addresses;
  std::map<caf::io::connection_handle, std::unique_ptr<tls_session>> sessions; // outer side, with TLS
  // Handles are socket numbers, reused after a close: a handshake timeout names its
  // connection by handle and serial.
  std::map<caf::io::connection_handle, std::uint64_t> serials;
  std::uint64_t next_serial = 0;
  std::map<std::uint64_t, dial_request> dials;                     // helper connecting, by serial
  // Dials whose peer socket is connected and whose loopback port the middleman has not taken yet.
  std::map<caf::io::accept_handle, caf::io::connection_handle> proxies;  // loopback port -> peer socket
  std::map<caf::io::connection_handle, caf::io::accept_handle> proxy_of; // peer socket -> its port
  std::map<caf::io::connection_handle, std::vector<std::uint8_t>> early; // peer bytes before the middleman came
};

using guard_ptr = caf::stateful_actor<guard_state, caf::io::broker>*;

void close_proxy(guard_ptr self, caf::io::connection_handle outer) {
  auto& st = self->state;
  st.early.erase(outer);
  auto p = st.proxy_of.find(outer);
  if (p == st.proxy_of.end())
    return;
  st.proxies.erase(p->second);
  self->close(p->second);
  st.proxy_of.erase(p);
}

void close_pair(guard_ptr self, caf::io::connection_handle hdl) {
  auto& st = self->state;
  auto it = st.pairs.find(hdl);
  if (it == st.pairs.end())
    return;
  auto other = it->second.other;
  bool paired = it->second.paired;
  st.pairs.erase(it);
  st.guards.erase(hdl);
  st.addresses.erase(hdl);
  st.sessions.erase(hdl);
  st.serials.erase(hdl);
  close_proxy(self, hdl);
  self->close(hdl);
  if (paired && st.pairs.erase(other) > 0) {
    st.guards.erase(other);
    st.addresses.erase(other);
    st.sessions.erase(other);
    self->close(other);
  }
}

void refuse(guard_ptr self, caf::io::connection_handle hdl, const std::string& why) {
  auto& st = self->state;
  auto it = st.pairs.find(hdl);
  bool dialled = it != st.pairs.end() && it->second.dialled;
  self->send(st.opts.reporter, failure_atom::value, st.opts.host_name,
             std::string{"closed the connection "} + (dialled ? "to " : "from ") + st.addresses[hdl] + ": " + why);
  close_pair(self, hdl);
}

// Runs in its own thread (a blocking connect must not stall the guard's multiplexer):
// connects to host:port within `timeout_ms` and tells the guard the socket, or why not.
void dial_socket(caf::blocking_actor* self, caf::actor guard, std::uint64_t serial, std::string host,
                 std::uint16_t port, int timeout_ms) {
  auto answer = [&](int fd, std::string why) {
    self->send(guard, done_atom::value, serial, static_cast<std::int32_t>(fd), std::move(why));
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
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::freeaddrinfo(found);
    answer(fd, {});
    return;
  }
  ::freeaddrinfo(found);
  answer(-1, why);
}

// Writes what a dialled peer sent to the middleman's side, or keeps it until the middleman
// has connected to the loopback port (milliseconds, on loopback); a peer that sends more
// than one largest frame meanwhile is not answering a handshake: refused.
void to_inner(guard_ptr self, caf::io::connection_handle outer, const std::uint8_t* data, std::size_t size) {
  auto& st = self->state;
  auto& pair = st.pairs[outer];
  if (!pair.paired) {
    auto& held = st.early[outer];
    if (held.size() + size > st.opts.max_payload + 64 * 1024) {
      refuse(self, outer, "sent " + std::to_string(held.size() + size) + " bytes before its handshake was taken");
      return;
    }
    held.insert(held.end(), data, data + size);
    return;
  }
  self->write(pair.other, size, data);
  self->flush(pair.other);
}

void send_bytes(guard_ptr self, caf::io::connection_handle hdl, const std::vector<std::uint8_t>& bytes) {
  if (bytes.empty())
    return;
  self->write(hdl, bytes.size(), bytes.data());
  self->flush(hdl);
}

// Opens the middleman's side of an accepted connection; false (and the peer closed) on failure.
bool open_inner(guard_ptr self, caf::io::connection_handle outer) {
  auto& st = self->state;
  auto inner = self->add_tcp_scribe("127.0.0.1", st.opts.inner_port);
  if (!inner) {
    close_pair(self, outer);
    return false;
  }
  st.pairs[outer] = relay_pair{*inner, true, true};
  st.pairs[*inner] = relay_pair{outer, false, true};
  self->configure_read(*inner, caf::io::receive_policy::at_most(64 * 1024));
  return true;
}

caf::behavior net_guard(guard_ptr self, net_guard_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.listener.open(self, st.opts.host, st.opts.port);
  constexpr size_t chunk = 64 * 1024;
  return {
    [self](caf::get_atom) { return self->state.listener.answer(); },
    [self](caf::connect_atom, const std::string& host, std::uint16_t port) -> caf::result<std::uint16_t> {
      auto& st = self->state;
      auto serial = ++st.next_serial;
      auto address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
      st.dials[serial] = dial_request{address, self->make_response_promise()};
      self->spawn(dial_socket, caf::actor_cast<caf::actor>(self), serial, host, port, st.opts.dial_timeout_ms);
      return st.dials[serial].promise;
    },
    [self](done_atom, std::uint64_t serial, std::int32_t fd, const std::string& why) {
      auto& st = self->state;
      auto d = st.dials.find(serial);
      if (d == st.dials.end()) { // cannot happen: every serial is answered once
        if (fd >= 0)
          ::close(fd);
        return;
      }
      auto request = std::move(d->second);
      st.dials.erase(d);
      if (fd < 0) {
        request.promise.deliver(caf::make_error(caf::sec::cannot_connect_to_node, request.address + ": " + why));
        return;
      }
      auto outer = self->add_scribe(fd);
      auto door = self->add_tcp_doorman(0, "127.0.0.1", false);
      if (!door) {
        self->close(outer);
        request.promise.deliver(caf::make_error(caf::sec::cannot_connect_to_node,
                                                request.address + ": no loopback port for the middleman: "
                                                  + self->system().render(door.error())));
        return;
      }
      st.pairs[outer] = relay_pair{{}, true, false, true};
      st.guards.emplace(outer, frame_guard{st.opts.max_payload});
      st.addresses[outer] = request.address;
      st.serials[outer] = serial;
      st.proxies[door->first] = outer;
      st.proxy_of[outer] = door->first;
      self->configure_read(outer, caf::io::receive_policy::at_most(chunk));
      if (st.opts.tls_client) {
        auto session = std::make_unique<tls_session>(st.opts.tls_client);
        std::vector<std::uint8_t> hello;
        bool ok = session->start(hello);
        st.sessions.emplace(outer, std::move(session));
        send_bytes(self, outer, hello);
        if (!ok) {
          auto error = st.sessions.at(outer)->error();
          refuse(self, outer, error);
          request.promise.deliver(caf::make_error(caf::sec::cannot_connect_to_node, request.address + ": " + error));
          return;
        }
      }
      // A peer that never finishes its TLS handshake, or a middleman that never comes (its
      // request timed out), must not hold the socket.
      self->delayed_send(self, std::chrono::milliseconds(st.opts.handshake_timeout_ms), timeout_atom::value,
                         outer.id(), serial);
      request.promise.deliver(door->second);
    },
    [self](const caf::io::new_connection_msg& msg) {
      auto& st = self->state;
      if (auto p = st.proxies.find(msg.source); p != st.proxies.end()) {
        // The middleman came for a dialled peer: relay the pair from now on.
        auto outer = p->second;
        st.proxies.erase(p);
        st.proxy_of.erase(outer);
        self->close(msg.source);
        st.pairs[msg.handle] = relay_pair{outer, false, true};
        auto& pair = st.pairs[outer];
        pair.other = msg.handle;
        pair.paired = true;
        self->configure_read(msg.handle, caf::io::receive_policy::at_most(chunk));
        if (auto e = st.early.find(outer); e != st.early.end()) {
          send_bytes(self, msg.handle, e->second);
          st.early.erase(e);
        }
        return;
      }
      st.pairs[msg.handle] = relay_pair{{}, true, false};
      st.guards.emplace(msg.handle, frame_guard{st.opts.max_payload});
      st.addresses[msg.handle] = self->remote_addr(msg.handle) + ":" + std::to_string(self->remote_port(msg.handle));
      self->configure_read(msg.handle, caf::io::receive_policy::at_most(chunk));
      if (!st.opts.tls) {
        open_inner(self, msg.handle);
        return;
      }
      st.sessions.emplace(msg.handle, std::make_unique<tls_session>(st.opts.tls));
      st.serials[msg.handle] = ++st.next_serial;
      self->delayed_send(self, std::chrono::milliseconds(st.opts.handshake_timeout_ms), timeout_atom::value,
                         msg.handle.id(), st.next_serial);
    },
    [self](timeout_atom, std::int64_t id, std::uint64_t serial) {
      auto& st = self->state;
      auto hdl = caf::io::connection_handle::from_int(id);
      auto s = st.serials.find(hdl);
      if (s == st.serials.end() || s->second != serial)
        return; // closed meanwhile (the handle may serve another connection now)
      auto it = st.sessions.find(hdl);
      if (it != st.sessions.end() && !it->second->established())
        refuse(self, hdl, "no TLS handshake within " + std::to_string(st.opts.handshake_timeout_ms) + " ms");
      else if (st.proxy_of.count(hdl) > 0)
        refuse(self, hdl, "the middleman did not take the dialled connection");
    },
    [self](caf::io::new_data_msg& msg) {
      auto& st = self->state;
      auto it = st.pairs.find(msg.handle);
      if (it == st.pairs.end())
        return;
      auto* data = reinterpret_cast<const std::uint8_t*>(msg.buf.data());
      std::size_t size = msg.buf.size();
      if (!it->second.outer) {
        // From the middleman to the peer: encrypted first when the peer speaks TLS.
        auto outer = it->second.other;
        auto sit = st.sessions.find(outer);
        if (sit == st.sessions.end()) {
          self->write(outer, size, data);
          self->flush(outer);
          return;
        }
        std::vector<std::uint8_t> records;
        bool ok = sit->second->to_peer(data, size, records);
        send_bytes(self, outer, records);
        if (!ok)
          refuse(self, outer, sit->second->error());
        return;
      }
      std::vector<std::uint8_t> plain;
      auto sit = st.sessions.find(msg.handle);
      if (sit != st.sessions.end()) {
        auto& session = *sit->second;
        std::vector<std::uint8_t> back;
        bool ok = session.from_network(data, size, plain, back);
        send_bytes(self, msg.handle, back);
        if (!ok) {
          refuse(self, msg.handle, session.error());
          return;
        }
        // The middleman sees the peer only once it proved its cluster membership; its BASP
        // server handshake then goes out through the session.
        if (session.established() && !st.pairs[msg.handle].dialled && !st.pairs[msg.handle].paired
            && !open_inner(self, msg.handle))
          return;
        data = plain.data();
        size = plain.size();
        if (size == 0)
          return;
      }
      auto why = st.guards.at(msg.handle).feed(data, size);
      if (!why.empty()) {
        refuse(self, msg.handle, why);
        return;
      }
      to_inner(self, msg.handle, data, size);
    },
    [self](const caf::io::connection_closed_msg& msg) { close_pair(self, msg.handle); },
    [](const caf::io::acceptor_closed_msg&) {},
  };
}

} // namespace

caf::actor spawn_net_guard(caf::actor_system& sys, net_guard_options opts) {
  return sys.middleman().spawn_broker(net_guard, std::move(opts));
}

} // namespace gwtf::actors
