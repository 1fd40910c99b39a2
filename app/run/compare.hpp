// `caf-gwtf compare`: the same cluster config trained once per router and seed in the real
// trainer (embedded, or one process per host with --launch), side by side: a table per
// router, a CSV of the runs and plots (app/run/compare_report.hpp; docs/results.md).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "app/config/cluster_config.hpp"

namespace gwtf::app {

struct compare_options {
  std::vector<std::string> routers{"gwtf", "swarm"}; ///< each: routing.router of its runs
  int seeds = 1;           ///< runs per router: training.seed, training.seed + 1, ...
  bool launch = false;     ///< one process per host (caf-gwtf launch) instead of embedded
  std::string out;         ///< directory for the runs' logs, loss series, compare.csv and plots
  std::string executable;  ///< --launch: the caf-gwtf binary the hosts run
  double timeout_s = 3600; ///< per run
};

/// Runs `cfg` once per router and seed (its faults as the config says: the script, or the
/// crash rate drawn from the seed), one progress line per run on `out`, then the table; the
/// files go to opts.out. A config one of the routers cannot run is refused up front on `err`,
/// naming the router. Returns the exit code: ok, failure (a run did not complete, or
/// refused) or check_failed (a run broke exactly-once or the replicas' agreement).
int run_compare(const cluster_config& cfg, const compare_options& opts, std::ostream& out, std::ostream& err);

} // namespace gwtf::app
