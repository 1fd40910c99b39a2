// Benchmark: the cost of reproducible gradient sums (training.reproducible_sums, docs/model.md
// "Reproducible sums"). Three copies of the same training through the stage API (every stage
// in this process, as gwtf-bench-model drives it): key_order (each replica's microbatch
// gradients kept apart and added in key order at the step), exact (each rounded onto the
// 2^-40 grid and added as int64 into one sum per data holder) and off (one float32 running
// sum per data holder, as they come). Rounds rotate through the three so that machine noise
// hits all alike; the tokens/s ratios to off are the figures of merit. It also prints the
// gradient memory each holds at the step and the bytes of one share.
//
// usage: gwtf-bench-sums CONFIG [ITERATIONS_PER_ROUND] [ROUNDS]
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_config.hpp"
#include "bench_stats.hpp"
#include "app/config/cluster_config.hpp"
#include "model/pipeline.hpp"
#include "model/torch_runtime.hpp"

using gwtf::bench::median;

using namespace gwtf;

int main(int argc, char** argv) {
  int exit_code = 0;
  auto setup = bench::load_training_bench(argc, argv, "gwtf-bench-sums CONFIG [ITERATIONS_PER_ROUND] [ROUNDS]", 5, exit_code);
  if (!setup)
    return exit_code;
  auto& cfg = setup->cfg;
  auto& text = setup->text;
  int per_round = setup->per_round, rounds = setup->rounds, holders = setup->holders;
  model::configure_torch(1);

  const std::vector<std::pair<model::sum_order, const char*>> modes = {
    {model::sum_order::off, "off"}, {model::sum_order::key_order, "key_order"}, {model::sum_order::exact, "exact"}};
  std::vector<model::local_pipeline> pipes;
  for (auto& [how, name] : modes) {
    auto t = cfg.training;
    t.reproducible_sums = how;
    pipes.emplace_back(cfg.model, t);
  }
  auto run_iteration = [&](model::local_pipeline& p, std::int64_t it) {
    for (int h = 0; h < holders; ++h)
      for (int i = 0; i < cfg.training.microbatches_per_holder; ++i) {
        model::microbatch_id id{static_cast<std::uint64_t>(it), static_cast<std::uint32_t>(h),
                                static_cast<std::uint32_t>(i)};
        auto mb = model::sample(text, cfg.training.seed, id, cfg.training.microbatch_size, cfg.model.seq_len);
        if (std::holds_alternative<std::string>(p.run_microbatch(id.key(), mb)))
          return false;
      }
    return !std::holds_alternative<std::string>(p.apply(it));
  };
  using clock = std::chrono::steady_clock;
  double tokens_per_iteration = static_cast<double>(holders) * cfg.training.microbatches_per_holder
                                * cfg.training.microbatch_size * cfg.model.seq_len;
  std::vector<std::vector<double>> tps(modes.size()), ratios(modes.size());
  std::int64_t it = 0;
  for (int r = 0; r < rounds; ++r, it += per_round) {
    std::vector<double> x(modes.size());
    for (std::size_t k = 0; k < modes.size(); ++k) {
      auto m = (k + static_cast<std::size_t>(r)) % modes.size(); // rotate who goes first
      auto t0 = clock::now();
      for (int j = 0; j < per_round; ++j)
        if (!run_iteration(pipes[m], it + j))
          return 1;
      x[m] = tokens_per_iteration * per_round / std::chrono::duration<double>(clock::now() - t0).count();
    }
    std::printf("round %d:", r);
    for (std::size_t m = 0; m < modes.size(); ++m) {
      tps[m].push_back(x[m]);
      ratios[m].push_back(x[m] / x[0]);
      std::printf("  %s %8.0f tokens/s (%.3f)", modes[m].second, x[m], x[m] / x[0]);
    }
    std::printf("\n");
  }
  // Gradient memory at the step, whole model, one replica per stage: every parameter once
  // per microbatch (key_order, float32), once per data holder (off: float32; exact: int64).
  double params = 0;
  for (int s = 0; s < cfg.model.stages; ++s)
    for (auto& p : pipes[0].at(s).parameters())
      params += static_cast<double>(p.tensor.numel());
  double mib = params * 4 / (1 << 20);
  int per_iteration = holders * cfg.training.microbatches_per_holder;
  std::printf("gradient memory at the step: off %.1f MiB (%d holders), key_order %.1f MiB (%d microbatches), "
              "exact %.1f MiB (int64, %d holders)\n",
              mib * holders, holders, mib * per_iteration, per_iteration, 2 * mib * holders, holders);
  std::printf("share bytes (whole model): off and key_order %.1f MiB (fp32), exact %.1f MiB (int64)\n", mib, 2 * mib);
  std::printf("median:");
  for (std::size_t m = 0; m < modes.size(); ++m)
    std::printf("  %s %.0f tokens/s (%s/off %.3f)", modes[m].second, median(tps[m]), modes[m].second, median(ratios[m]));
  std::printf("\n");
  return 0;
}
