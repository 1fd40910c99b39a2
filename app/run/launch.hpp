// `caf-gwtf launch`: the hosts of a multi-host config (configs/local.yaml) as one OS process
// each on 127.0.0.1, in node mode over TCP, with the fault script delivered as real signals.
#pragma once

#include <ostream>
#include <string>

#include "app/config/cluster_config.hpp"
#include "app/run/embedded.hpp"

namespace gwtf::app {

/// Choices of launch mode.
struct launch_options {
  std::string logs;        ///< directory for each host's config and log (created)
  std::string executable;  ///< the caf-gwtf binary the hosts run
  double timeout_s = 3600; ///< the run ends (hosts killed) after this long
  run_bounds resume;   ///< --resume / --resume-at: every founding host resumes at the cut
};

/// Runs every host of `cfg` as a process, drives the faults, prints the same progress lines
/// and summary as the embedded cluster, and leaves no process behind.
embedded_result run_launch(const cluster_config& cfg, const launch_options& opts, std::ostream& out);

} // namespace gwtf::app
