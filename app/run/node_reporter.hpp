// The reporter of a node process (one host per process): it logs what its host reports, one
// line per event, forwards the reports to the launcher's driver when there is one, watches
// the host's supervisor and sets the process's exit code (app/run/node.hpp). It implements
// the reporter protocol of actors/protocols.hpp, as the driver (app/run/driver.cpp) does.
#pragma once

#include <cstdint>
#include <future>
#include <ostream>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "app/run/launcher_protocol.hpp"
#include "app/run/node.hpp"

namespace gwtf::app {

/// (restore_exit_atom): the restore's last reports had their time to go out.
using restore_exit_atom = caf::atom_constant<caf::atom("restexit")>;

/// The node reporter: its host's reporter, plus
using node_reporter_actor = actors::reporter_actor::extend<
    /// node.cpp: the host's supervisor (watched) and link, once they run
    caf::reacts_to<actors::register_atom, actors::supervisor_actor, actors::net_link_actor>,
    /// internal: the restore's last reports had their time: the process ends to start again
    caf::reacts_to<restore_exit_atom>,
    /// internal: the host stopped and the last frames had their time: the process ends
    caf::reacts_to<actors::done_atom>,
    /// SIGTERM / SIGINT, the end of training, or the launcher's loss: a graceful leave
    caf::reacts_to<actors::stop_atom>,
    /// the same for a shutdown signal, named (said at once: the drain may take a while)
    caf::reacts_to<actors::stop_atom, std::string>>;

/// Spawns the reporter. `last_iteration`: the run's last iteration (its end); `upstream`: the
/// launcher's driver, or none; `upstream_address`: where to dial it again after a loss;
/// `exit_code` gets the process's exit code; `linger_ms`: how long the end waits for the last
/// reports to go out; `restore`: where the process starts again after a restore.
node_reporter_actor spawn_node_reporter(caf::actor_system& sys, std::ostream* out, std::string me,
                                        std::uint64_t last_iteration, launcher_actor upstream,
                                        std::string upstream_address, std::promise<int>* exit_code, int linger_ms,
                                        restore_order* restore);

} // namespace gwtf::app
