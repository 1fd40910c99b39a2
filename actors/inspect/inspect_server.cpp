// The inspection server of a node (node.inspect): a broker that speaks length-prefixed wire
// frames with the shell. Every byte is a stranger's: a frame must announce at most
// `max_frame` bytes, decode within that limit and be an INSPECT_REQUEST; anything else is
// logged with the client's address and closes that connection only. The answer comes from
// the host's supervisor (inspect_atom), bounded by a timeout, and goes back as an
// INSPECT_REPLY with the same request id. With node.tls, a client speaks mutual TLS first and
// needs a certificate of the cluster CA (actors/net/tls_session.hpp), like a peer on node.listen.
#include <map>
#include <memory>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/inspect/inspect_server.hpp"
#include "actors/errors.hpp"
#include "actors/net/broker_listener.hpp"
#include "actors/inspect/inspect_view.hpp"
#include "actors/interfaces.hpp"
#include "messages/codec.hpp"

namespace gwtf::actors {

namespace {

constexpr std::uint32_t max_frame = 64 * 1024; // a request is a short query

// The shell connects per query: a handful at once is plenty (docs/shell.md).
port_limits inspect_limits(int handshake_timeout_ms) {
  port_limits l;
  l.max_connections = 64;
  l.max_per_address = 16;
  l.handshake_timeout = std::chrono::milliseconds(handshake_timeout_ms); // TLS and the first request
  l.idle_timeout = std::chrono::minutes(5); // longer than any trace
  return l;
}

struct client {
  std::string address;
  std::vector<std::uint8_t> buffer; // bytes of the frame being read
  std::uint32_t expected = 0;       // its length, once the 4-byte header is in
  bool header = true;               // reading the header
  std::unique_ptr<tls_session> tls; // with node.tls
  std::uint64_t serial = 0;         // names it to late answers (handles are reused)
};

struct inspect_server_state {
  inspect_server_options opts;
  broker_listener listener;
  std::map<caf::io::connection_handle, client> clients;
  std::uint64_t next_serial = 0;
};

using server_ptr = caf::stateful_actor<inspect_server_state, caf::io::broker>*;

void refuse(server_ptr self, caf::io::connection_handle hdl, const std::string& why) {
  auto& st = self->state;
  auto it = st.clients.find(hdl);
  auto who = it == st.clients.end() ? std::string{"?"} : it->second.address;
  st.clients.erase(hdl);
  st.listener.close(self, hdl, who, why, [&](const std::string& line) {
    self->send(st.opts.reporter, failure_atom::value, st.opts.host_name, line);
  });
}

void reply(server_ptr self, caf::io::connection_handle hdl, const wire::inspect_reply& r, std::uint64_t serial = 0) {
  auto it = self->state.clients.find(hdl);
  // The client went away meanwhile, or (`serial` given: an answer that took its time) the
  // handle now names a newer connection, which must not get another client's answer.
  if (it == self->state.clients.end() || (serial != 0 && it->second.serial != serial))
    return;
  auto bytes = wire::encode(wire::message{r});
  auto n = static_cast<std::uint32_t>(bytes.size());
  std::vector<std::uint8_t> out{static_cast<std::uint8_t>(n >> 24), static_cast<std::uint8_t>(n >> 16),
                                static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)};
  out.insert(out.end(), bytes.begin(), bytes.end());
  auto& c = self->state.clients.at(hdl);
  if (c.tls) {
    std::vector<std::uint8_t> records;
    bool ok = c.tls->to_peer(out.data(), out.size(), records);
    out = std::move(records);
    if (!ok) {
      refuse(self, hdl, c.tls->error());
      return;
    }
  }
  self->write(hdl, out.size(), out.data());
  self->flush(hdl);
  self->state.listener.active(hdl);
}

void on_frame(server_ptr self, caf::io::connection_handle hdl, const std::vector<std::uint8_t>& frame) {
  auto& st = self->state;
  auto decoded = wire::decode(frame.data(), frame.size(), wire::decode_limits{max_frame});
  if (auto* f = std::get_if<wire::wire_failure>(&decoded)) {
    refuse(self, hdl, std::string{"bad frame: "} + wire::to_string(f->code) + ": " + f->detail);
    return;
  }
  auto* req = std::get_if<wire::inspect_request>(&std::get<wire::message>(decoded));
  if (req == nullptr) {
    refuse(self, hdl, "not an INSPECT_REQUEST");
    return;
  }
  auto id = req->request_id;
  st.listener.handshaken(hdl);
  if (is_control(req->query) && !st.opts.control) {
    reply(self, hdl,
          wire::inspect_reply{id, false,
                              req->query + ": refused: this host runs with node.inspect_control: false (read-only shell)"});
    return;
  }
  auto sup = caf::actor_cast<supervisor_actor>(st.opts.supervisor);
  // A query for another host (@HOST) waits for that host's answer through the cluster: the
  // supervisor bounds it by one timeout, this by two; a trace runs for its seconds first.
  auto hop = parse_hop(req->query).has_value();
  auto timeout = std::chrono::milliseconds(st.opts.timeout_ms * (hop ? 2 : 1) + extra_answer_ms(req->query));
  auto serial = st.clients.at(hdl).serial;
  self->request(sup, timeout, inspect_atom::value, req->query)
    .then(
      [self, hdl, id, serial](std::string& body) {
        reply(self, hdl, wire::inspect_reply{id, true, std::move(body)}, serial);
      },
      [self, hdl, id, serial](caf::error& e) { reply(self, hdl, wire::inspect_reply{id, false, shell_text(e)}, serial); });
}

caf::behavior inspect_server(server_ptr self, inspect_server_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.listener.open(self, st.opts.host, st.opts.port, "inspect", inspect_limits(st.opts.handshake_timeout_ms));
  self->send(self, tick_atom::value);
  return {
    [self](caf::get_atom) { return self->state.listener.answer(); },
    [self](const caf::io::new_connection_msg& msg) {
      auto& st = self->state;
      auto say = [self](const std::string& line) {
        self->send(self->state.opts.reporter, failure_atom::value, self->state.opts.host_name, line);
      };
      auto drop = [self](caf::io::connection_handle h, const std::string& why) { refuse(self, h, why); };
      if (!st.listener.admit(self, msg.handle, say, drop))
        return;
      client c;
      c.address = broker_listener::address(self, msg.handle);
      c.serial = ++st.next_serial;
      if (st.opts.tls)
        c.tls = std::make_unique<tls_session>(st.opts.tls);
      st.clients[msg.handle] = std::move(c);
      self->configure_read(msg.handle, caf::io::receive_policy::at_most(16 * 1024));
    },
    [self](tick_atom) {
      auto& st = self->state;
      st.listener.expire([self](caf::io::connection_handle hdl, port_guard::lapse lapse) {
        auto& st = self->state;
        auto it = st.clients.find(hdl);
        std::string why;
        if (lapse == port_guard::lapse::idle)
          why = describe(lapse, st.listener.guard->limits());
        else if (it != st.clients.end() && it->second.tls && !it->second.tls->established())
          why = "no TLS handshake within " + std::to_string(st.opts.handshake_timeout_ms) + " ms";
        else
          why = "no request within " + std::to_string(st.opts.handshake_timeout_ms) + " ms";
        refuse(self, hdl, why);
      });
      self->delayed_send(self, broker_listener::scan_every, tick_atom::value);
    },
    [self](caf::io::new_data_msg& msg) {
      auto it = self->state.clients.find(msg.handle);
      if (it == self->state.clients.end())
        return;
      self->state.listener.active(msg.handle);
      auto* p = reinterpret_cast<const std::uint8_t*>(msg.buf.data());
      auto* end = p + msg.buf.size();
      std::vector<std::uint8_t> plain;
      if (auto& tls = it->second.tls) {
        std::vector<std::uint8_t> back;
        bool ok = tls->from_network(p, msg.buf.size(), plain, back);
        if (!back.empty()) {
          self->write(msg.handle, back.size(), back.data());
          self->flush(msg.handle);
        }
        if (!ok) {
          refuse(self, msg.handle, tls->error());
          return;
        }
        p = plain.data();
        end = p + plain.size();
      }
      while (p < end) {
        auto& c = self->state.clients.at(msg.handle);
        auto want = c.header ? 4u - c.buffer.size() : c.expected - c.buffer.size();
        auto take = std::min<std::size_t>(want, static_cast<std::size_t>(end - p));
        c.buffer.insert(c.buffer.end(), p, p + take);
        p += take;
        if (c.buffer.size() < (c.header ? 4u : c.expected))
          return;
        if (c.header) {
          c.expected = std::uint32_t{c.buffer[0]} << 24 | std::uint32_t{c.buffer[1]} << 16
                       | std::uint32_t{c.buffer[2]} << 8 | std::uint32_t{c.buffer[3]};
          c.buffer.clear();
          if (c.expected == 0 || c.expected > max_frame) {
            refuse(self, msg.handle, "a frame of " + std::to_string(c.expected) + " bytes (at most "
                                       + std::to_string(max_frame) + ")");
            return;
          }
          c.header = false;
          continue;
        }
        auto frame = std::move(c.buffer);
        c.buffer.clear();
        c.header = true;
        on_frame(self, msg.handle, frame);
        if (self->state.clients.count(msg.handle) == 0)
          return; // refused
      }
    },
    [self](const caf::io::connection_closed_msg& msg) {
      self->state.clients.erase(msg.handle);
      self->state.listener.left(msg.handle);
    },
    [](const caf::io::acceptor_closed_msg&) {},
  };
}

} // namespace

caf::actor spawn_inspect_server(caf::actor_system& sys, inspect_server_options opts) {
  return sys.middleman().spawn_broker(inspect_server, std::move(opts));
}

} // namespace gwtf::actors
