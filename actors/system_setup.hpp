// Turns our config into CAF's: scheduler size, failure detection, error rendering.
#pragma once

#include <caf/actor_system_config.hpp>

#include "actors/node_config.hpp"

namespace gwtf::actors {

/// An actor_system_config for one process of caf-gwtf.
class system_config : public caf::actor_system_config {
public:
  /// Applies `node` and `faults`; loads the middleman when `with_network` is set (peers over
  /// TCP; node.tls ends in the net guard) or `serve` is (a server of this process only: the
  /// embedded cluster's shell).
  system_config(const node_config& node, const fault_config& faults, bool with_network, bool serve = false);
};

} // namespace gwtf::actors
