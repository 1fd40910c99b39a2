// The public face of a node's TCP link: accepts every connection on node.listen, relays it to
// the middleman's private loopback port, and checks each inbound BASP frame header with
// frame_guard before the middleman allocates for it. A connection that announces an
// oversized frame, or is not BASP at all and trips the check, is logged with its address
// and closed; the host goes on.
// With node.tls the guard also ends TLS: a connection reaches the middleman only once its
// peer completed the mutual handshake with a certificate of the cluster CA; plain TCP, no
// certificate, another CA's, or no handshake within the timeout is logged and closed.
#include <map>
#include <memory>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/frame_guard.hpp"
#include "actors/broker_listener.hpp"
#include "actors/interfaces.hpp"

namespace gwtf::actors {

namespace {

struct relay_pair {
  caf::io::connection_handle other; // invalid while a TLS peer is still in its handshake
  bool outer = false; // the peer's side (checked), else the middleman's side
  bool paired = false;
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
};

using guard_ptr = caf::stateful_actor<guard_state, caf::io::broker>*;

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
  self->send(st.opts.reporter, failure_atom::value, st.opts.host_name,
             "closed the connection from " + st.addresses[hdl] + ": " + why);
  close_pair(self, hdl);
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
    [self](const caf::io::new_connection_msg& msg) {
      auto& st = self->state;
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
      auto it = st.sessions.find(hdl);
      auto s = st.serials.find(hdl);
      if (it != st.sessions.end() && s != st.serials.end() && s->second == serial && !it->second->established())
        refuse(self, hdl, "no TLS handshake within " + std::to_string(st.opts.handshake_timeout_ms) + " ms");
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
        if (session.established() && !st.pairs[msg.handle].paired && !open_inner(self, msg.handle))
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
      auto other = st.pairs[msg.handle].other;
      self->write(other, size, data);
      self->flush(other);
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
