// The reporter of a node process (one host per process): it logs what its host reports, one
// line per event, forwards the reports to the launcher's driver when there is one, watches
// the host's supervisor and sets the process's exit code (app/run/node.hpp). It implements
// the reporter protocol of actors/interfaces.hpp, as the driver (app/run/driver.cpp) does.
#pragma once

#include <cstdint>
#include <future>
#include <ostream>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "app/run/node.hpp"

namespace gwtf::app {

/// Spawns the reporter. `last_iteration`: the run's last iteration (its end); `upstream`: the
/// launcher's driver, or none; `upstream_address`: where to dial it again after a loss;
/// `exit_code` gets the process's exit code; `linger_ms`: how long the end waits for the last
/// reports to go out; `restore`: where the process starts again after a restore.
caf::actor spawn_node_reporter(caf::actor_system& sys, std::ostream* out, std::string me, std::uint64_t last_iteration,
                               caf::actor upstream, std::string upstream_address, std::promise<int>* exit_code,
                               int linger_ms, restore_order* restore);

} // namespace gwtf::app
