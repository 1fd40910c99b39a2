// The embedded local cluster: every virtual host of cluster.yaml in this one process, over
// the emulated network, with the scripted and random faults of the config. The main job.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "app/config/cluster_config.hpp"

namespace gwtf::app {

/// One iteration as the driver saw it.
struct iteration_row {
  std::int64_t iteration = 0;
  double loss = 0;            ///< mean over the iteration's microbatches
  double tokens_per_s = 0;    ///< its tokens / wall time since the previous iteration ended
  double seconds = 0;         ///< that wall time
  /// From the end of this iteration's microbatches (every data holder finished them) to the
  /// last host's step of it: the stages' averaging and step, which the next iteration's
  /// `seconds` include (as the simulator's aggregation_s of this iteration)
  double aggregation_s = 0;
  int flows = 0;              ///< built flows at the data holders
  int hosts_alive = 0;
  int crashes = 0;            ///< crashes so far
  double wasted_fraction = 0; ///< wasted compute seconds / compute seconds, so far
};

/// What a run produced.
/// Where a run starts and ends: --resume / --resume-at N (docs/checkpoints.md), --until N.
struct run_bounds {
  bool resume = false;
  std::optional<std::uint64_t> at;    ///< exactly this iteration; empty: the consistent cut
  std::optional<std::uint64_t> until; ///< stop after this many iterations applied
};

struct embedded_result {
  bool completed = false;            ///< every iteration was applied at the data holders
  std::vector<iteration_row> rows;
  int crashes = 0, joins = 0, restarts = 0;
  int departures = 0;                ///< hosts that left cleanly
  double compute_s = 0, wasted_s = 0;
  std::map<std::string, double> host_compute_s; ///< host -> compute seconds it reported (as compute_scale makes them)
  double wall_s = 0;
  /// Exactly-once check per iteration (app/run/exactly_once): a stage that counted a
  /// microbatch twice, missed one of a holder that lived through the iteration, or counted
  /// one another stage did not. Empty = every stage counted the same ones, each once.
  std::vector<std::string> exactly_once_violations;
  /// Replica agreement: per stage, the weights hash of every live replica after the last
  /// iteration it applied.
  std::map<int, std::map<std::string, std::uint64_t>> final_hashes;
  /// Replica agreement on every iteration: a replica whose weights hash after applying an
  /// iteration differs from the first one reported for that stage and iteration.
  std::vector<std::string> replica_disagreements;
  std::map<std::string, std::uint64_t> last_applied; ///< host -> last iteration applied
  std::vector<std::string> joined;                   ///< hosts that loaded a state
  /// host -> microbatches in the gradient averages its stage applied (one count per stage,
  /// iteration and microbatch; the first replica to apply an iteration decides)
  std::map<std::string, std::int64_t> carried;
  std::vector<std::string> failures;                 ///< handled errors reported by hosts
  int checkpoints = 0;                               ///< checkpoint files written
  int checkpoint_replicas = 0;                       ///< copies stored by hosts of other stages
  double checkpoint_ms = 0;                          ///< their write time, summed
  std::uint64_t last_checkpoint = 0;                 ///< the newest iteration written
  /// host -> the iteration it resumed at and its weights hash after the load
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> resumed;
  /// Whole-stage loss (docs/checkpoints.md): the relay stage whose last replica went (0: none)
  /// when checkpoints are on; the run stopped there to be resumed from the cut.
  int lost_stage = 0;
  /// host -> its answer to the shell's `flows` at the end of the run (with training.loss_out):
  /// the final flow graph of the run report.
  std::map<std::string, std::string> final_flows;
  std::set<std::string> gone;          ///< hosts that crashed or left
  std::uint64_t faults_through = 0;    ///< the scripted faults of iterations <= this one happened
  /// iteration -> compute seconds of the hosts still alive at the end (rolled back on recovery)
  std::map<std::uint64_t, double> live_compute;
  int recoveries = 0;                  ///< whole stages restored from checkpoints
  int reloads = 0;                     ///< replicas that fell behind and loaded their stage state again
  /// "HOST declared PEER dead": a live peer that no fault was injected into (not crashed,
  /// hung or asked to leave) declared dead by a host: a false suspicion (a busy host taken for
  /// a dead one). Empty = every death a host declared was a fault's.
  std::vector<std::string> false_deaths;
};

/// Runs `cfg` until training.iterations are done or `timeout_s` passes. Prints one progress
/// line per iteration and a summary to `out`; writes training.loss_out when set.
embedded_result run_embedded(const cluster_config& cfg, std::ostream& out, double timeout_s = 3600,
                             const run_bounds& resume = {});

} // namespace gwtf::app
