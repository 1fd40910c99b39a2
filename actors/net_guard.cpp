// The public face of a node's TCP link: accepts every connection on node.listen, relays it to
// the middleman's private loopback port, and checks each inbound BASP frame header with
// frame_guard before the middleman allocates for it. A connection that announces an
// oversized frame, or is not BASP at all and trips the check, is logged with its address
// and closed; the host goes on.
#include <map>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/frame_guard.hpp"
#include "actors/broker_listener.hpp"
#include "actors/interfaces.hpp"

namespace gwtf::actors {

namespace {

struct relay_pair {
  caf::io::connection_handle other;
  bool outer = false; // the peer's side (checked), else the middleman's side
};

struct guard_state {
  net_guard_options opts;
  broker_listener listener;
  std::map<caf::io::connection_handle, relay_pair> pairs;
  std::map<caf::io::connection_handle, frame_guard> guards;
  std::map<caf::io::connection_handle, std::string> addresses;
};

using guard_ptr = caf::stateful_actor<guard_state, caf::io::broker>*;

void close_pair(guard_ptr self, caf::io::connection_handle hdl) {
  auto& st = self->state;
  auto it = st.pairs.find(hdl);
  if (it == st.pairs.end())
    return;
  auto other = it->second.other;
  st.pairs.erase(it);
  st.guards.erase(hdl);
  st.addresses.erase(hdl);
  self->close(hdl);
  if (st.pairs.erase(other) > 0) {
    st.guards.erase(other);
    st.addresses.erase(other);
    self->close(other);
  }
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
      auto inner = self->add_tcp_scribe("127.0.0.1", st.opts.inner_port);
      if (!inner) {
        self->close(msg.handle);
        return;
      }
      st.pairs[msg.handle] = relay_pair{*inner, true};
      st.pairs[*inner] = relay_pair{msg.handle, false};
      st.guards.emplace(msg.handle, frame_guard{st.opts.max_payload});
      st.addresses[msg.handle] = self->remote_addr(msg.handle);
      self->configure_read(msg.handle, caf::io::receive_policy::at_most(chunk));
      self->configure_read(*inner, caf::io::receive_policy::at_most(chunk));
    },
    [self](caf::io::new_data_msg& msg) {
      auto& st = self->state;
      auto it = st.pairs.find(msg.handle);
      if (it == st.pairs.end())
        return;
      if (it->second.outer) {
        auto why = st.guards.at(msg.handle).feed(reinterpret_cast<const std::uint8_t*>(msg.buf.data()), msg.buf.size());
        if (!why.empty()) {
          self->send(st.opts.reporter, failure_atom::value, st.opts.host_name,
                     "closed the connection from " + st.addresses[msg.handle] + ": " + why);
          close_pair(self, msg.handle);
          return;
        }
      }
      auto other = it->second.other;
      self->write(other, msg.buf.size(), msg.buf.data());
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
