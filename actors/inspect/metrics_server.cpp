// The metrics server of a node (node.metrics): a broker that answers one HTTP/1.x request per
// connection (docs/metrics.md). Every byte is a stranger's: a request head above 8 KiB or a
// bad request line gets 400 and the connection closes; the host goes on.
#include <map>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/inspect/inspect_server.hpp"
#include "actors/errors.hpp"
#include "actors/net/broker_listener.hpp"
#include "actors/interfaces.hpp"

namespace gwtf::actors {

namespace {

constexpr std::size_t max_head = 8 * 1024;

// One request per connection, a probe or a scrape at a time: a few dozen at once is plenty.
// The handshake is the whole request head.
port_limits metrics_limits(int handshake_timeout_ms) {
  port_limits l;
  l.max_connections = 64;
  l.max_per_address = 16;
  l.handshake_timeout = std::chrono::milliseconds(handshake_timeout_ms);
  l.idle_timeout = std::chrono::seconds(60); // an answer that never drains
  return l;
}

struct http_client {
  std::string head;
  bool answered = false;
  bool closing = false; // the response is written: close when it is out
  std::uint64_t serial = 0; // handles are socket numbers, reused after a close: this names the connection
};

struct metrics_state {
  inspect_server_options opts;
  broker_listener listener;
  std::map<caf::io::connection_handle, http_client> clients;
  std::uint64_t next_serial = 0;
};

using metrics_ptr = caf::stateful_actor<metrics_state, caf::io::broker>*;

void respond(metrics_ptr self, caf::io::connection_handle hdl, int code, const std::string& type,
             const std::string& body, std::uint64_t serial = 0) {
  auto it = self->state.clients.find(hdl);
  // Gone meanwhile, or (`serial` given: an answer that took its time) the handle now names a
  // newer connection, which must not get this answer and be closed after it.
  if (it == self->state.clients.end() || (serial != 0 && it->second.serial != serial))
    return;
  const char* reason = code == 200   ? "OK"
                       : code == 400 ? "Bad Request"
                       : code == 404 ? "Not Found"
                       : code == 405 ? "Method Not Allowed"
                                     : "Service Unavailable";
  auto text = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type
              + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  // Closed once the bytes are out (data_transferred_msg): closing now would drop them.
  it->second.closing = true;
  self->ack_writes(hdl, true);
  self->write(hdl, text.size(), text.data());
  self->flush(hdl);
  self->state.listener.active(hdl);
}

// Closes `hdl` with a (rate-limited) line.
void drop(metrics_ptr self, caf::io::connection_handle hdl, const std::string& why) {
  auto& st = self->state;
  st.clients.erase(hdl);
  st.listener.close(self, hdl, broker_listener::address(self, hdl), why, [&](const std::string& line) {
    self->send(st.opts.reporter, failure_atom::value, st.opts.host_name, line);
  });
}

void on_request(metrics_ptr self, caf::io::connection_handle hdl, const std::string& line) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    respond(self, hdl, 400, "text/plain", "bad request line\n");
    return;
  }
  auto method = line.substr(0, sp1);
  auto path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (auto q = path.find('?'); q != std::string::npos)
    path.resize(q);
  if (path != "/metrics" && path != "/healthz" && path != "/readyz") {
    respond(self, hdl, 404, "text/plain", "not found: /metrics, /healthz, /readyz\n");
    return;
  }
  if (method != "GET" && method != "HEAD") {
    respond(self, hdl, 405, "text/plain", "only GET\n");
    return;
  }
  auto& st = self->state;
  auto sup = caf::actor_cast<supervisor_actor>(st.opts.supervisor);
  auto query = path == "/metrics" ? std::string{"metrics"} : std::string{"status"};
  auto serial = st.clients.at(hdl).serial;
  self->request(sup, std::chrono::milliseconds(st.opts.timeout_ms), inspect_atom::value, query)
    .then(
      [self, hdl, path, serial](std::string& body) {
        if (path == "/metrics") {
          respond(self, hdl, 200, "text/plain; version=0.0.4; charset=utf-8", body, serial);
          return;
        }
        if (path == "/healthz") {
          respond(self, hdl, 200, "text/plain", "ok\n", serial);
          return;
        }
        auto j = nlohmann::json::parse(body, nullptr, false);
        bool ready = j.is_object() && j.contains("ready") && j["ready"].is_boolean() && j["ready"].get<bool>()
                     && j.contains("stage") && j["stage"].is_number_integer() && j["stage"].get<int>() >= 0;
        respond(self, hdl, ready ? 200 : 503, "text/plain",
                ready ? "ready\n" : "not ready: the host holds no valid weights of a stage yet\n", serial);
      },
      [self, hdl, serial](caf::error& e) {
        respond(self, hdl, 503, "text/plain",
                "the host did not answer: " + (e == caf::sec::request_timeout ? std::string{"timeout"}
                                                                              : caf::to_string(e))
                  + "\n",
                serial);
      });
}

caf::behavior metrics_server(metrics_ptr self, inspect_server_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.listener.open(self, st.opts.host, st.opts.port, "metrics", metrics_limits(st.opts.handshake_timeout_ms));
  self->send(self, tick_atom::value);
  return {
    [self](caf::get_atom) { return self->state.listener.answer(); },
    [self](tick_atom) {
      self->state.listener.expire([self](caf::io::connection_handle hdl, port_guard::lapse lapse) {
        drop(self, hdl,
             lapse == port_guard::lapse::idle
               ? describe(lapse, self->state.listener.guard->limits())
               : "no whole request head within " + std::to_string(self->state.opts.handshake_timeout_ms) + " ms");
      });
      self->delayed_send(self, broker_listener::scan_every, tick_atom::value);
    },
    [self](const caf::io::new_connection_msg& msg) {
      auto say = [self](const std::string& line) {
        self->send(self->state.opts.reporter, failure_atom::value, self->state.opts.host_name, line);
      };
      auto evict = [self](caf::io::connection_handle h, const std::string& why) { drop(self, h, why); };
      if (!self->state.listener.admit(self, msg.handle, say, evict))
        return;
      auto& c = self->state.clients[msg.handle] = http_client{};
      c.serial = ++self->state.next_serial;
      self->configure_read(msg.handle, caf::io::receive_policy::at_most(4096));
    },
    [self](caf::io::new_data_msg& msg) {
      auto it = self->state.clients.find(msg.handle);
      if (it == self->state.clients.end() || it->second.answered)
        return; // one request per connection: the rest is ignored
      auto& c = it->second;
      self->state.listener.active(msg.handle);
      c.head.append(msg.buf.begin(), msg.buf.end());
      // The answer waits for the whole head (its blank line): answering and closing at the
      // request line would reset a client still writing its headers (bash's printf to
      // /dev/tcp, the image's HEALTHCHECK, writes them in pieces and died of SIGPIPE).
      auto end = c.head.find("\r\n\r\n");
      if (end == std::string::npos)
        end = c.head.find("\n\n");
      if (end == std::string::npos) {
        if (c.head.size() > max_head) {
          c.answered = true; // one answer and one line per connection, however much more comes
          self->state.listener.handshaken(msg.handle);
          auto who = broker_listener::address(self, msg.handle);
          if (auto line = self->state.listener.line(who, "answered 400 and closed the connection from " + who,
                                                    "no complete request head in 8 KiB"))
            self->send(self->state.opts.reporter, failure_atom::value, self->state.opts.host_name, *line);
          respond(self, msg.handle, 400, "text/plain", "request head too large\n");
        }
        return;
      }
      auto eol = c.head.find('\n');
      if (eol > 0 && c.head[eol - 1] == '\r')
        --eol;
      c.answered = true;
      self->state.listener.handshaken(msg.handle);
      on_request(self, msg.handle, c.head.substr(0, eol));
    },
    [self](const caf::io::data_transferred_msg& msg) {
      auto it = self->state.clients.find(msg.handle);
      if (it != self->state.clients.end() && it->second.closing && msg.remaining == 0) {
        self->state.clients.erase(it);
        self->state.listener.left(msg.handle);
        self->close(msg.handle);
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

caf::actor spawn_metrics_server(caf::actor_system& sys, inspect_server_options opts) {
  return sys.middleman().spawn_broker(metrics_server, std::move(opts));
}

} // namespace gwtf::actors
