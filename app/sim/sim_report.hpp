// What `caf-gwtf sim` prints and writes: the comparison table, CSV, JSON and SVG plots of
// simulation results (docs/simulator.md, "Outputs"). No CAF, no LibTorch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "app/sim/scenario.hpp"
#include "sim/simulator.hpp"

namespace gwtf::app {

/// One router's figures, derived from its result.
struct sim_summary {
  std::string router;
  bool completed = false;
  std::string why;
  int iterations = 0;
  double total_s = 0;
  double setup_s = 0;
  double microbatches_per_s = 0;
  double tokens_per_s = 0;
  double wasted_fraction = 0;       ///< wasted compute seconds / compute seconds
  double iteration_p50_s = 0, iteration_p90_s = 0, iteration_max_s = 0;
  int flows_first = 0, flows_min = 0, flows_last = 0;
  double vs_centralized = 0;        ///< throughput / the centralized router's; 0 when it did not run
  double bound_microbatches_per_s = 0;     ///< the scenario's proven bound: the highest of the pipeline runs' bounds
  double run_bound_microbatches_per_s = 0; ///< this run's bound (from the hosts it had in each iteration)
  double vs_bound = 0;              ///< throughput / bound_microbatches_per_s (at most 1); atom: / its own run bound
  int crashes = 0, leaves = 0, joins = 0, degrades = 0, moves = 0;
};

/// Summaries of `results` (the centralized router's throughput, if present, is the reference
/// of vs_centralized; the highest run bound is the reference of vs_bound).
std::vector<sim_summary> summarize(const sim::sim_scenario& s, const std::vector<sim::sim_result>& results);

/// The terminal table.
std::string comparison_table(const std::vector<sim_summary>& rows);

/// Writes summary.csv, iterations.csv, result.json, throughput.svg and iteration_times.svg
/// into `dir` (created if needed). Returns an error message, empty on success.
std::string write_sim_outputs(const std::filesystem::path& dir, const loaded_scenario& sc,
                              const std::vector<sim::sim_result>& results);

/// The two plots, as SVG documents.
std::string throughput_svg(const loaded_scenario& sc, const std::vector<sim::sim_result>& results);
std::string iteration_times_svg(const loaded_scenario& sc, const std::vector<sim::sim_result>& results);

} // namespace gwtf::app
