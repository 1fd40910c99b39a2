// Benchmark: tokens/s of the embedded cluster (every host of CONFIG in this process, actors,
// Cap'n Proto frames, GWTF flows, stage aggregation) with no emulated network delay, against
// the single-process reference trainer on the same model, data and cores. Rounds alternate
// between the two so that machine noise hits both alike; the ratio is the figure of merit.
// The first WARMUP iterations of every run are left out of both: the cluster spends them
// building its flows.
//
// usage: gwtf-bench-cluster CONFIG [ITERATIONS_PER_RUN] [ROUNDS] [WARMUP]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "bench_config.hpp"
#include "app/config/cluster_config.hpp"
#include "app/run/embedded.hpp"
#include "model/reference.hpp"
#include "model/torch_runtime.hpp"
#include "bench_stats.hpp"

using gwtf::bench::median;

using namespace gwtf;

namespace {

// Tokens per second over iterations [warmup, end): every iteration has the same tokens, so
// this is the harmonic mean of the per-iteration figures.
double steady(const std::vector<double>& per_iteration, int warmup) {
  double inv = 0;
  int n = 0;
  for (std::size_t i = static_cast<std::size_t>(warmup); i < per_iteration.size(); ++i)
    if (per_iteration[i] > 0) {
      inv += 1.0 / per_iteration[i];
      ++n;
    }
  return n > 0 ? n / inv : 0.0;
}

} // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto loaded = bench::load_config(argc, argv, "gwtf-bench-cluster CONFIG [ITERATIONS_PER_RUN] [ROUNDS] [WARMUP]", exit_code);
  if (!loaded)
    return exit_code;
  auto cfg = *loaded;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 12;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  int warmup = argc > 4 ? std::atoi(argv[4]) : 2;
  if (iterations <= warmup || rounds < 1 || warmup < 0) {
    std::fprintf(stderr, "need ITERATIONS_PER_RUN > WARMUP >= 0 and ROUNDS >= 1\n");
    return 2;
  }
  if (!cfg.emulation) {
    std::fprintf(stderr, "%s: no emulation section: not an embedded cluster\n", argv[1]);
    return 1;
  }
  // No faults and no emulated delay: what the runtime costs over plain training.
  for (auto& f : cfg.faults.script)
    if (f.action == actors::fault_action::join)
      cfg.hosts.erase(std::remove_if(cfg.hosts.begin(), cfg.hosts.end(),
                                     [&](auto& h) { return h.name == f.host; }),
                      cfg.hosts.end());
  cfg.faults.script.clear();
  cfg.faults.crash_rate = 0;
  cfg.emulation->time_scale = 0;
  cfg.training.iterations = iterations;
  cfg.training.loss_out.clear();
  int holders = 0;
  for (auto& h : cfg.hosts)
    holders += h.role == actors::host_role::data_holder ? 1 : 0;
  model::configure_torch(1);

  std::vector<double> ref_tps, cluster_tps, ratios;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> ref_rows;
    auto ok = model::run_reference(cfg.model, cfg.training, cfg.data, holders,
                                   [&](const model::reference_report& rep) { ref_rows.push_back(rep.tokens_per_s); });
    if (auto* e = std::get_if<std::string>(&ok)) {
      std::fprintf(stderr, "reference: %s\n", e->c_str());
      return 1;
    }
    std::ostringstream log;
    auto res = app::run_embedded(cfg, log, 600);
    if (!res.completed) {
      std::fprintf(stderr, "cluster run did not complete:\n%s", log.str().c_str());
      return 1;
    }
    std::vector<double> rows;
    for (auto& row : res.rows)
      rows.push_back(row.tokens_per_s);
    double a = steady(ref_rows, warmup), b = steady(rows, warmup);
    ref_tps.push_back(a);
    cluster_tps.push_back(b);
    ratios.push_back(b / a);
    std::printf("round %d: reference %8.0f tokens/s   cluster %8.0f tokens/s   ratio %.3f   "
                "(cluster wall %.1f s, exactly-once violations %zu)\n",
                r, a, b, b / a, res.wall_s, res.exactly_once_violations.size());
    std::fflush(stdout);
  }
  std::printf("median: reference %.0f tokens/s, cluster %.0f tokens/s, cluster/reference %.3f\n",
              median(ref_tps), median(cluster_tps), median(ratios));
  return 0;
}
