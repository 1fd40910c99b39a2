// Recovery of a whole lost relay stage in the embedded cluster (docs/checkpoints.md): what
// the next run is (hosts, placement, faults still to come) and how its result continues the
// first. Pure: no actors, no files.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "app/config/cluster_config.hpp"
#include "app/run/embedded.hpp"

namespace gwtf::app {

struct recovery_plan {
  cluster_config cfg; ///< the run that resumes: the gone hosts removed, the mover restaged
  std::string mover;  ///< the relay that restores the lost stage
  int from_stage = 0; ///< its stage until now
};

/// After `run` stopped because relay stage `run.lost_stage` lost its last replica: the hosts
/// that crashed or left are dropped, the scripted faults that already happened too (they
/// would strike again in the replayed iterations), and a relay of the stage with the most
/// live replicas (at least two; ties: the lower stage, then the first name) moves to the lost
/// stage. A host whose scripted join has not come yet is no candidate. A joiner of the lost
/// stage that was still downloading (in `run`, not gone) restores it itself: it is the
/// `mover`, with `from_stage` the lost stage. An error says why no relay can be spared.
std::variant<recovery_plan, std::string> plan_recovery(const cluster_config& cfg, const embedded_result& run);

/// The result of a run that stopped for a recovery and of the run that resumed at iteration
/// `resumed_at`, as one: rows before `resumed_at` from the first, the rest from the second;
/// counts summed; the compute of the rolled-back iterations (`resumed_at` and later) of the
/// hosts that survived counted as wasted; hashes, placement and the end state from the second.
embedded_result merge_runs(embedded_result first, embedded_result second, std::uint64_t resumed_at);

} // namespace gwtf::app
