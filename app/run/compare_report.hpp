// `caf-gwtf compare`'s figures (app/run/compare.cpp runs the trainer): per run and per router,
// the table, the CSV and the plots. Pure: no CAF, no LibTorch, no clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app/run/embedded.hpp"

namespace gwtf::app {

/// One run of the comparison: a router on a seed, as the trainer's driver saw it.
struct compare_run {
  std::string router;     ///< "gwtf" or "swarm"
  std::uint64_t seed = 0; ///< training.seed of the run
  bool completed = false;
  std::vector<iteration_row> rows;
  int crashes = 0;
  double compute_s = 0, wasted_s = 0;
  std::size_t violations = 0;    ///< exactly-once violations
  std::size_t disagreements = 0; ///< replica disagreements
};

compare_run compare_run_of(const std::string& router, std::uint64_t seed, const embedded_result& r);

/// A run's figures. Steady state: iteration 0 (hosts finding each other, the first flows or
/// peer lists) is left out of the throughput and the iteration times.
struct compare_stats {
  double train_s = 0;      ///< wall seconds of iterations 1.. (the sum of their times)
  double tokens_per_s = 0; ///< their tokens / train_s
  double p50_s = 0, p90_s = 0; ///< iteration time, nearest rank
  double wasted_fraction = 0;  ///< wasted compute seconds / compute seconds, whole run
  double final_loss = 0;       ///< the last iteration's
  /// Of train_s, the part that waited on the stages' averaging and step (the aggregation_s of
  /// iterations 0.. that iterations 1.. include)
  double averaging_fraction = 0;
};

compare_stats stats_of(const compare_run& r);

/// Iterations a loss is averaged over for the time to a loss (one iteration's loss is the
/// mean of a few microbatches: noisy).
constexpr std::size_t loss_window = 5;
/// The loss every run of `seed` reached: the highest of their last losses, each the mean of
/// their last `loss_window` iterations (0: no run of that seed). Routers that update on
/// different batches (atom mode's peers, one local batch each) compare by the time they take
/// to it, not by tokens/s; per seed, as each seed draws its own data and crashes.
double common_loss(const std::vector<compare_run>& runs, std::uint64_t seed);
/// Wall seconds of iterations 1.. until the mean loss of the last `loss_window` iterations
/// first is at most `target` (the iteration that reaches it counted); -1 if it never is.
double seconds_to_loss(const compare_run& r, double target);

/// One router over its seeds.
struct router_summary {
  std::string router;
  int runs = 0, completed = 0;
  double tokens_per_s = 0;     ///< mean over its runs
  double p50_s = 0, p90_s = 0; ///< over every steady iteration of its runs
  double wasted_fraction = 0;  ///< summed wasted / summed compute
  double crashes = 0;          ///< mean per run
  double final_loss = 0;       ///< mean over its runs
  double averaging_fraction = 0; ///< mean over its runs
  double to_loss_s = 0;          ///< seconds_to_loss(its seed's common_loss), mean over its runs
  std::size_t violations = 0, disagreements = 0;
};

/// Per router, in the order the runs name them.
std::vector<router_summary> summarize(const std::vector<compare_run>& runs);

/// The table `compare` prints: one line per router, then each router's tokens/s, p50, final
/// loss and time to the common loss relative to the first router's.
std::string compare_table(const std::vector<router_summary>& s);

/// One line per run: router, seed, completed, iterations, the figures of stats_of and the
/// seconds to its seed's common loss.
std::string compare_csv(const std::vector<compare_run>& runs);

/// Loss over wall time, one line per run, coloured by router.
std::string compare_loss_svg(const std::vector<compare_run>& runs, const std::string& title);

/// Tokens/s per iteration, one line per run, coloured by router.
std::string compare_throughput_svg(const std::vector<compare_run>& runs, const std::string& title);

} // namespace gwtf::app
