// The driver of a local cluster run (embedded or launched): starts the hosts of the config,
// injects its faults, collects what every host reports, checks exactly-once and replica
// agreement from outside the mechanism, and prints one line per iteration and a summary.
// How hosts are started and hurt is a host_control: actors in this process (embedded.cpp)
// or one OS process per host (launch.cpp).
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/system_messages.hpp>
#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "app/run/embedded.hpp"
#include "app/run/launcher_protocol.hpp"

namespace gwtf::app {

/// (exited_atom, host, bool crashed): a host is gone (launch: its process ended).
using exited_atom = caf::atom_constant<caf::atom("exited")>;
/// (resume_atom, host): a hang is over.
using resume_atom = caf::atom_constant<caf::atom("resume")>;
/// (settle_atom): the end waited its bound for the last reports.
using settle_atom = caf::atom_constant<caf::atom("settle")>;

/// The driver: the reporter of every host of the run (embedded: directly; launch: through
/// each node's reporter), and its own controls. Its behaviour is checked against this at
/// compile time; the actor is dynamically typed so that host_control can drive hosts with it.
using driver_actor = launcher_actor::extend<
    /// the end waited its bound for the last reports (internal)
    caf::reacts_to<settle_atom>,
    /// stop now (launch: the driver could not be published)
    caf::reacts_to<actors::stop_atom>,
    /// the run's time is up
    caf::reacts_to<actors::timeout_atom>,
    /// a host is gone (launch: its process ended); whether it crashed
    caf::reacts_to<exited_atom, std::string, bool>,
    /// a hang of this host is over
    caf::reacts_to<resume_atom, std::string>>;

/// Starts, crashes and stops the hosts of a run on behalf of the driver actor.
class host_control {
public:
  virtual ~host_control() = default;
  /// Called once, from the driver, before any host starts.
  virtual void init(caf::event_based_actor* driver) = 0;
  /// Starts `h`; `joining`: it downloads its stage state from a live replica.
  virtual void start(caf::event_based_actor* driver, const actors::host_config& h, bool joining) = 0;
  /// "any": dies now; "forward" / "backward": dies in its next such pass; "actor": one local
  /// actor fails (supervision restarts it); "hang": stops answering for a while (launch).
  virtual void crash(caf::event_based_actor* driver, const std::string& host, const std::string& phase) = 0;
  /// Graceful leave.
  virtual void leave(caf::event_based_actor* driver, const std::string& host) = 0;
  /// The link host <-> peer gets `factor` times slower (emulated networks).
  virtual void slow(caf::event_based_actor* driver, const std::string& host, const std::string& peer,
                    double factor) = 0;
  /// The host stops answering (launch: SIGSTOP); `resume` ends it (SIGCONT). False when
  /// this control cannot hang a host.
  virtual bool hang(caf::event_based_actor*, const std::string&) { return false; }
  virtual void resume(caf::event_based_actor*, const std::string&) {}
  /// The run is over: stop every host.
  virtual void stop_all(caf::event_based_actor* driver) = 0;
  /// A monitored actor went down: the host it stood for, and whether it crashed.
  virtual std::optional<std::pair<std::string, bool>> on_down(const caf::down_msg&) { return std::nullopt; }
  /// The supervisors of the hosts started so far (the run report asks them for their flows).
  virtual std::map<std::string, actors::supervisor_actor> supervisors() { return {}; }
  /// A launched host attached itself: its supervisor and link (launch only).
  virtual void attached(caf::event_based_actor*, const std::string&, actors::supervisor_actor, actors::net_link_actor) {}
};

class run_interrupts;

/// Runs the driver with `control` until training ends, a whole relay stage is lost with
/// checkpoints on (`lost_stage`), `timeout_s` passes, or `interrupts` (if given) sees SIGINT
/// or SIGTERM.
embedded_result run_driver(const cluster_config& cfg, std::shared_ptr<const actors::cluster_spec> spec,
                           host_control& control, bool with_network,
                           std::ostream& out, double timeout_s, run_interrupts* interrupts = nullptr);

} // namespace gwtf::app
