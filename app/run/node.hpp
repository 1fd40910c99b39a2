// Node mode: this process runs the one host of its cluster.yaml and trains with its peers
// over TCP (actors/net/peer_transport). `caf-gwtf --config cluster.yaml` on every host.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "app/config/cluster_config.hpp"

namespace gwtf::app {

/// Command-line choices of node mode.
struct node_options {
  bool join = false;  ///< --join: enter a running cluster (download the stage's state first)
  std::string report; ///< --report HOST:PORT: also send every event to `caf-gwtf launch`
  bool resume = false; ///< --resume: start from this host's newest checkpoint (or resume_at's)
  std::optional<std::uint64_t> resume_at;
  std::optional<std::uint64_t> until; ///< --until N: stop after N iterations applied
};

/// Where a node process starts again after the restore of a lost stage (exit_code::restore).
struct restore_order {
  std::uint64_t iteration = 0; ///< every host resumes at this consistent cut
  std::int32_t stage = -1;     ///< this relay's stage from then on; -1: a data holder, or a
                               ///< relay that places itself again
};

/// Runs the host until training ends (exit 0 after a graceful leave), SIGTERM / SIGINT
/// (graceful leave, exit 0), or an injected crash (the process SIGKILLs itself). Logs one
/// line per event to `out`. Returns the process exit code.
/// A host declared dead while frozen returns exit_code::rejoin: its caller then calls
/// restart_as_joiner. A host that follows the restore of a lost stage (node mode with
/// checkpoints, no launcher) returns exit_code::restore with `restore` filled: its caller
/// then calls restart_self with restore_arguments.
int run_node(const cluster_config& cfg, const node_options& opts, std::ostream& out, restore_order* restore = nullptr);

/// Replaces this process by a fresh one of the same executable with `args` (same PID, log
/// and launcher). Returns only if that fails (exit_code::failure, with why on stderr, which
/// names `why`: what the new process was to do).
int restart_self(const std::vector<std::string>& args, const std::string& why);

/// restart_self with `args` plus --join: a new CAF node that downloads its stage's state.
int restart_as_joiner(const std::vector<std::string>& args);

} // namespace gwtf::app
