// The transport of node mode (actors/net/peer_transport.hpp): one broker owns every peer
// connection. Inbound bytes go through TLS (actors/net/tls_session) and the frame reader
// (actors/net/peer_framing), which checks each header against the frame limit before it
// allocates; whole frames go to the link. Outbound frames wait in a per-connection frame
// writer and enter CAF's send buffer one fragment at a time, at most `send_window` bytes
// ahead of the socket: a control frame queued behind a gradient share leaves after at most
// one bulk fragment.
// A dial runs its blocking connect in a helper actor (the multiplexer must not block), then
// the broker takes the socket. Both ends send a hello first; a dial is answered when the
// peer's hello arrives, so a peer that is not caf-gwtf, speaks no TLS or another CA's fails
// the dial with its reason.
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
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

#include "actors/net/peer_transport.hpp"
#include "actors/net/broker_listener.hpp"
#include "actors/net/peer_framing.hpp"
#include "actors/interfaces.hpp"

namespace gwtf::actors {

static_assert(static_cast<std::int32_t>(service::stage) == 3, "peer_framing::lane_of names the stage service 3");

namespace {

constexpr std::size_t read_chunk = 256 * 1024;

struct connection {
  std::uint64_t id = 0;
  std::string address;  // the peer's, for reports
  bool dialled = false;
  frame_reader reader;
  frame_writer writer;
  std::unique_ptr<tls_session> tls;
  bool hello_sent = false;
  std::uint64_t in_buffer = 0; // bytes in CAF's send buffer, as it last reported
  std::optional<caf::response_promise> dial; // answered with `id` on the peer's hello
  explicit connection(std::uint64_t max_frame) : reader(max_frame) {}
};

struct dial_request {
  std::string address;
  caf::response_promise promise;
};

struct transport_state {
  peer_transport_options opts;
  broker_listener listener;
  std::map<caf::io::connection_handle, connection> conns;
  std::map<std::uint64_t, caf::io::connection_handle> by_id;
  std::map<std::uint64_t, dial_request> dials; // helper connecting, by serial
  std::uint64_t next_id = 0;
  std::vector<std::uint8_t> scratch; // fragments to encrypt (plaintext)
  std::vector<std::uint8_t> records; // the same, encrypted
  std::vector<std::uint8_t> plain;   // decrypted bytes of one read (capacity reused)
};

using self_ptr = caf::stateful_actor<transport_state, caf::io::broker>*;

void write_raw(self_ptr self, caf::io::connection_handle hdl, connection& c, const std::vector<std::uint8_t>& bytes) {
  if (bytes.empty())
    return;
  self->write(hdl, bytes.size(), bytes.data());
  c.in_buffer += bytes.size();
}

void close_connection(self_ptr self, caf::io::connection_handle hdl, const std::string& why) {
  auto& st = self->state;
  auto it = st.conns.find(hdl);
  if (it == st.conns.end())
    return;
  auto& c = it->second;
  if (c.dial)
    c.dial->deliver(caf::make_error(caf::sec::cannot_connect_to_node, c.address + ": " + why));
  if (c.reader.greeted() && !c.dial)
    self->send(st.opts.link, closed_atom::value, c.id, why);
  st.by_id.erase(c.id);
  st.conns.erase(it);
  self->close(hdl);
}

void refuse(self_ptr self, caf::io::connection_handle hdl, const std::string& why) {
  auto& st = self->state;
  auto it = st.conns.find(hdl);
  if (it == st.conns.end())
    return;
  self->send(st.opts.reporter, failure_atom::value, st.opts.host_name,
             std::string{"closed the connection "} + (it->second.dialled ? "to " : "from ") + it->second.address + ": "
               + why);
  close_connection(self, hdl, why);
}

// Moves fragments from the frame writer into CAF's send buffer while it holds less than the
// window; false if the connection failed (TLS).
bool pump(self_ptr self, caf::io::connection_handle hdl, connection& c) {
  auto& st = self->state;
  bool wrote = false;
  while (c.in_buffer < st.opts.send_window) {
    if (!c.tls) {
      // Straight from the frame into CAF's send buffer.
      bool cut = c.writer.next_with([&](const std::uint8_t* h, std::size_t hn, const std::uint8_t* p, std::size_t pn) {
        self->write(hdl, hn, h);
        if (pn > 0)
          self->write(hdl, pn, p);
        c.in_buffer += hn + pn;
      });
      if (!cut)
        break;
      wrote = true;
      continue;
    }
    // With TLS: the fragments that fit the window, encrypted in one go.
    st.scratch.clear();
    while (c.in_buffer + st.scratch.size() < st.opts.send_window && c.writer.next(st.scratch)) {
    }
    if (st.scratch.empty())
      break;
    wrote = true;
    st.records.clear();
    bool ok = c.tls->to_peer(st.scratch.data(), st.scratch.size(), st.records);
    write_raw(self, hdl, c, st.records);
    if (!ok) {
      self->flush(hdl);
      refuse(self, hdl, c.tls->error());
      return false;
    }
  }
  if (wrote)
    self->flush(hdl);
  return true;
}

// Sends this end's hello (through TLS when the connection has it: held by the session until
// its handshake completes).
bool greet(self_ptr self, caf::io::connection_handle hdl, connection& c) {
  if (c.hello_sent)
    return true;
  c.hello_sent = true;
  auto hello = peer_framing::hello_bytes();
  if (!c.tls) {
    write_raw(self, hdl, c, hello);
    self->flush(hdl);
    return true;
  }
  std::vector<std::uint8_t> records;
  bool ok = c.tls->to_peer(hello.data(), hello.size(), records);
  write_raw(self, hdl, c, records);
  self->flush(hdl);
  if (!ok)
    refuse(self, hdl, c.tls->error());
  return ok;
}

connection& add_connection(self_ptr self, caf::io::connection_handle hdl, std::string address, bool dialled) {
  auto& st = self->state;
  auto [it, fresh] = st.conns.try_emplace(hdl, st.opts.max_frame);
  auto& c = it->second;
  c.id = ++st.next_id;
  c.address = std::move(address);
  c.dialled = dialled;
  st.by_id[c.id] = hdl;
  self->configure_read(hdl, caf::io::receive_policy::at_most(read_chunk));
  self->ack_writes(hdl, true);
  // A peer that never finishes its TLS handshake or never says hello must not hold the socket.
  self->delayed_send(self, std::chrono::milliseconds(st.opts.handshake_timeout_ms), timeout_atom::value, c.id);
  return c;
}

// Runs in its own thread (a blocking connect must not stall the multiplexer): connects to
// host:port within `timeout_ms` and tells the broker the socket, or why not.
void dial_socket(caf::blocking_actor* self, caf::actor broker, std::uint64_t serial, std::string host,
                 std::uint16_t port, int timeout_ms) {
  auto answer = [&](int fd, std::string why) {
    self->send(broker, done_atom::value, serial, static_cast<std::int32_t>(fd), std::move(why));
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

void set_nodelay(caf::io::connection_handle hdl) {
  int one = 1;
  ::setsockopt(static_cast<int>(hdl.id()), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Bytes from a peer: TLS, then frames to the link.
void on_bytes(self_ptr self, caf::io::connection_handle hdl, const std::uint8_t* data, std::size_t size) {
  auto& st = self->state;
  auto it = st.conns.find(hdl);
  if (it == st.conns.end())
    return;
  auto& c = it->second;
  auto& plain = st.plain;
  plain.clear();
  if (c.tls) {
    std::vector<std::uint8_t> back;
    bool was = c.tls->established();
    bool ok = c.tls->from_network(data, size, plain, back);
    write_raw(self, hdl, c, back);
    if (!back.empty())
      self->flush(hdl);
    if (!ok) {
      refuse(self, hdl, c.tls->error());
      return;
    }
    if (!was && c.tls->established() && !greet(self, hdl, c))
      return;
    data = plain.data();
    size = plain.size();
    if (size == 0)
      return;
  }
  bool greeted = c.reader.greeted();
  std::vector<inbound_frame> frames;
  auto why = c.reader.feed(data, size, frames);
  if (!greeted && c.reader.greeted() && c.dial) {
    c.dial->deliver(c.id);
    c.dial.reset();
  }
  for (auto& f : frames)
    self->send(st.opts.link, net_atom::value, c.id, f.service, f.introduction, wire_frame{std::move(f.bytes)});
  if (!why.empty())
    refuse(self, hdl, why);
}

void queue_frame(self_ptr self, std::uint64_t id, std::int32_t svc, bool introduction, wire_frame&& frame,
                 bool behind_bulk) {
  auto& st = self->state;
  auto h = st.by_id.find(id);
  if (h == st.by_id.end())
    return; // closed meanwhile: lost, as on a real network
  auto& c = st.conns.at(h->second);
  c.writer.push(svc, introduction, std::move(frame.bytes), behind_bulk);
  pump(self, h->second, c);
}

caf::behavior peer_transport(self_ptr self, peer_transport_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.listener.open(self, st.opts.host, st.opts.port);
  return {
    [self](caf::get_atom) { return self->state.listener.answer(); },
    [self](caf::connect_atom, const std::string& host, std::uint16_t port) -> caf::result<std::uint64_t> {
      auto& st = self->state;
      auto serial = ++st.next_id;
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
      auto hdl = self->add_scribe(fd);
      set_nodelay(hdl);
      auto& c = add_connection(self, hdl, request.address, true);
      c.dial = std::move(request.promise);
      if (st.opts.tls_client) {
        c.tls = std::make_unique<tls_session>(st.opts.tls_client);
        std::vector<std::uint8_t> hello;
        bool ok = c.tls->start(hello);
        write_raw(self, hdl, c, hello);
        self->flush(hdl);
        if (!ok) {
          refuse(self, hdl, c.tls->error());
          return;
        }
      }
      greet(self, hdl, c);
    },
    [self](send_atom, std::uint64_t id, std::int32_t svc, bool introduction, wire_frame& frame) {
      queue_frame(self, id, svc, introduction, std::move(frame), false);
    },
    // The same, behind every bulk frame already queued to that peer (a LEAVE after the share).
    [self](send_atom, std::uint64_t id, std::int32_t svc, wire_frame& frame, bulk_atom) {
      queue_frame(self, id, svc, false, std::move(frame), true);
    },
    [self](const caf::io::data_transferred_msg& msg) {
      auto& st = self->state;
      auto it = st.conns.find(msg.handle);
      if (it == st.conns.end())
        return;
      it->second.in_buffer = msg.remaining;
      pump(self, msg.handle, it->second);
    },
    [self](const caf::io::new_connection_msg& msg) {
      auto& st = self->state;
      set_nodelay(msg.handle);
      auto& c = add_connection(self, msg.handle,
                               self->remote_addr(msg.handle) + ":" + std::to_string(self->remote_port(msg.handle)),
                               false);
      if (st.opts.tls)
        c.tls = std::make_unique<tls_session>(st.opts.tls); // greets once the handshake completes
      else
        greet(self, msg.handle, c);
    },
    [self](timeout_atom, std::uint64_t id) {
      auto& st = self->state;
      auto h = st.by_id.find(id);
      if (h == st.by_id.end())
        return; // closed meanwhile
      auto& c = st.conns.at(h->second);
      if (c.tls && !c.tls->established())
        refuse(self, h->second, "no TLS handshake within " + std::to_string(st.opts.handshake_timeout_ms) + " ms");
      else if (!c.reader.greeted())
        refuse(self, h->second, "no hello within " + std::to_string(st.opts.handshake_timeout_ms) + " ms");
    },
    [self](caf::io::new_data_msg& msg) {
      on_bytes(self, msg.handle, reinterpret_cast<const std::uint8_t*>(msg.buf.data()), msg.buf.size());
    },
    [self](const caf::io::connection_closed_msg& msg) {
      close_connection(self, msg.handle, "closed by the peer");
    },
    [](const caf::io::acceptor_closed_msg&) {},
  };
}

} // namespace

caf::actor spawn_peer_transport(caf::actor_system& sys, peer_transport_options opts) {
  return sys.middleman().spawn_broker(peer_transport, std::move(opts));
}

} // namespace gwtf::actors
