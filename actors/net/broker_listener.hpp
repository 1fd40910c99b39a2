// Internal to actors/: the listening socket of a broker (inspection and metrics servers), its
// answer to (caf::get_atom) (the port it bound, or why it could not), and its guard: caps on
// connections per port and source address, handshake and idle deadlines, and rate-limited
// refusal lines (actors/net/port_guard.hpp, the same rules as the peer port).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/io/broker.hpp>

#include "actors/net/port_guard.hpp"

namespace gwtf::actors {

struct broker_listener {
  std::optional<std::uint16_t> port;
  caf::error failed;
  std::string name; ///< names the port in lines ("inspect", "metrics")
  std::unique_ptr<port_guard> guard;
  refusal_log said;

  /// Binds `host:port` (0: any port) for `self`, guarded by `limits`.
  void open(caf::io::abstract_broker* self, const std::string& host, std::uint16_t wanted, std::string port_name,
            port_limits limits) {
    name = std::move(port_name);
    guard = std::make_unique<port_guard>(limits);
    auto dm = self->add_tcp_doorman(wanted, host.c_str(), true);
    if (dm)
      port = dm->second;
    else
      failed = dm.error();
  }

  /// What (caf::get_atom) answers.
  caf::result<std::uint16_t> answer() const {
    if (port)
      return *port;
    return failed;
  }

  static std::uint64_t key(caf::io::connection_handle hdl) { return static_cast<std::uint64_t>(hdl.id()); }
  static std::string address(caf::io::abstract_broker* self, caf::io::connection_handle hdl) {
    return self->remote_addr(hdl) + ":" + std::to_string(self->remote_port(hdl));
  }

  /// The line to log for `what` ("closed the connection from ADDR") and `why`, or nothing
  /// while the rate limit holds it back.
  std::optional<std::string> line(const std::string& addr, const std::string& what, const std::string& why) {
    return said.refuse(addr, why, name + ": " + what + ": " + why, std::chrono::steady_clock::now());
  }

  /// A new connection: admitted, or closed and `say(line)` (rate-limited). Connections
  /// displaced to make room go to `drop(handle, why)`, which must close them.
  template <class Say, class Drop>
  bool admit(caf::io::abstract_broker* self, caf::io::connection_handle hdl, Say say, Drop drop) {
    auto addr = address(self, hdl);
    auto a = guard->arrive(key(hdl), self->remote_addr(hdl), std::chrono::steady_clock::now());
    for (auto old : a.evicted)
      drop(caf::io::connection_handle::from_int(static_cast<std::int64_t>(old)),
           "idle while the port was full: made room for " + addr);
    if (a.admitted)
      return true;
    if (auto l = line(addr, "refused the connection from " + addr, a.why))
      say(*l);
    self->close(hdl);
    return false;
  }

  /// Closes `hdl` (from `who`) for `why`, with `say(line)` unless the rate limit holds it back.
  /// The server forgets its own state of the connection.
  template <class Say>
  void close(caf::io::abstract_broker* self, caf::io::connection_handle hdl, const std::string& who,
             const std::string& why, Say say) {
    if (auto l = line(who, "closed the connection from " + who, why))
      say(*l);
    left(hdl);
    self->close(hdl);
  }

  void active(caf::io::connection_handle hdl) { guard->active(key(hdl), std::chrono::steady_clock::now()); }
  void handshaken(caf::io::connection_handle hdl) { guard->handshaken(key(hdl)); }
  void left(caf::io::connection_handle hdl) { guard->left(key(hdl)); }

  /// Connections past their deadlines go to `drop(handle, lapse)`.
  template <class Drop>
  void expire(Drop drop) {
    for (auto& [id, lapse] : guard->expired(std::chrono::steady_clock::now()))
      drop(caf::io::connection_handle::from_int(static_cast<std::int64_t>(id)), lapse);
  }

  /// How often a server looks at the deadlines.
  static constexpr std::chrono::milliseconds scan_every{250};
};

} // namespace gwtf::actors
