// Node mode: this process runs the one host of its cluster.yaml and trains with its peers
// over TCP (CAF's middleman). `caf-gwtf --config cluster.yaml` on every host.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "deploy/cluster_config.hpp"

namespace gwtf::deploy {

/// Command-line choices of node mode.
struct node_options {
  bool join = false;  ///< --join: enter a running cluster (download the stage's state first)
  std::string report; ///< --report HOST:PORT: also send every event to `caf-gwtf launch`
  bool resume = false; ///< --resume: start from this host's newest checkpoint (or resume_at's)
  std::optional<std::uint64_t> resume_at;
  std::optional<std::uint64_t> until; ///< --until N: stop after N iterations applied
};

/// Runs the host until training ends (exit 0 after a graceful leave), SIGTERM / SIGINT
/// (graceful leave, exit 0), or an injected crash (the process SIGKILLs itself). Logs one
/// line per event to `out`. Returns the process exit code.
/// A host declared dead while frozen returns exit_code::rejoin: its caller then calls
/// restart_as_joiner.
int run_node(const cluster_config& cfg, const node_options& opts, std::ostream& out);

/// Replaces this process by a fresh one of the same executable with `args` plus --join (same
/// PID, log and launcher): a new CAF node that downloads its stage's state. Returns only if
/// that fails (exit_code::failure, with why on stderr).
int restart_as_joiner(const std::vector<std::string>& args);

} // namespace gwtf::deploy
