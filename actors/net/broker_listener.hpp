// Internal to actors/: the listening socket of a broker (net guard, inspection and metrics
// servers) and its answer to (caf::get_atom): the port it bound, or why it could not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/io/broker.hpp>

namespace gwtf::actors {

struct broker_listener {
  std::optional<std::uint16_t> port;
  caf::error failed;

  /// Binds `host:port` (0: any port) for `self`.
  void open(caf::io::abstract_broker* self, const std::string& host, std::uint16_t wanted) {
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
};

} // namespace gwtf::actors
