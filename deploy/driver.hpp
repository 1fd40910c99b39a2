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
#include "deploy/embedded.hpp"

namespace gwtf::deploy {

/// (exited_atom, host, bool crashed): a host is gone (launch: its process ended).
using exited_atom = caf::atom_constant<caf::atom("exited")>;
/// (resume_atom, host): a hang is over.
using resume_atom = caf::atom_constant<caf::atom("resume")>;

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
  virtual std::map<std::string, caf::actor> supervisors() { return {}; }
  /// A launched host attached itself: its supervisor and link (launch only).
  virtual void attached(caf::event_based_actor*, const std::string&, caf::actor, caf::actor) {}
};

/// Everything every host of the run shares, from the config: model, roster, timings.
std::shared_ptr<actors::cluster_spec> make_spec(const cluster_config& cfg);

/// Where a resumed run starts (docs/checkpoints.md): with `at`, that iteration if every stage
/// has a valid checkpoint of it at one of its declared hosts; else the consistent cut, the
/// newest iteration every stage has. Files are verified (hash, stage, config) on the way;
/// `notes` gets a line for each one rejected. An error says which stage lacks what.
std::variant<std::uint64_t, std::string> resume_point(const actors::cluster_spec& spec, std::optional<std::uint64_t> at,
                                                      std::vector<std::string>& notes);

/// --until N, and --resume / --resume-at N of the embedded cluster and launch: finds the resume point,
/// prints it (and every checkpoint passed over) to `out` and marks `spec` to resume there.
/// Empty on success, else why the run cannot resume.
std::string prepare_resume(actors::cluster_spec& spec, const run_bounds& request, std::ostream& out);

/// Runs the driver with `control` until training ends, a whole relay stage is lost with
/// checkpoints on (`lost_stage`), or `timeout_s` passes.
embedded_result run_driver(const cluster_config& cfg, std::shared_ptr<const actors::cluster_spec> spec,
                           host_control& control, bool with_network,
                           std::ostream& out, double timeout_s);

/// Starts the run of `cfg` resumed as `spec` says (round N of restores): its result, or
/// nothing when the run was interrupted meanwhile.
using rerun_fn = std::function<std::optional<embedded_result>(const cluster_config& cfg,
                                                              std::shared_ptr<const actors::cluster_spec> spec, int round)>;

/// A whole relay stage lost with checkpoints on (`result.lost_stage`): a relay of the stage
/// with the most replicas moves there, every host goes back to the newest iteration every
/// stage has a checkpoint of, and `rerun` trains on; again for every stage lost later
/// (docs/checkpoints.md, "Loss of a whole stage"). `current` ends as the last run's config.
embedded_result restore_lost_stages(embedded_result result, cluster_config& current,
                                    std::optional<std::uint64_t> until, std::ostream& out, const rerun_fn& rerun);

/// The summary lines of a run (and training.loss_out with its plots).
void print_summary(const cluster_config& cfg, const embedded_result& result, std::ostream& out);

} // namespace gwtf::deploy
