// Benchmark: the cost of reproducible gradient sums (training.reproducible_sums, docs/model.md
// "Reproducible sums"). Two copies of the same training through the stage API (every stage in
// this process, as gwtf-bench-model drives it), one adding each replica's microbatch gradients
// in key order (kept apart until the step), one as they come (a running sum per data holder).
// Rounds alternate between the two so that machine noise hits both alike; the tokens/s ratio
// is the figure of merit. It also prints the gradient memory each holds at the step: one copy
// per microbatch the stage counted against one per data holder, over all stages.
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

  auto keyed = cfg.training, arrival = cfg.training;
  keyed.reproducible_sums = true;
  arrival.reproducible_sums = false;
  model::local_pipeline a{cfg.model, keyed};
  model::local_pipeline b{cfg.model, arrival};
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
  std::vector<double> keyed_tps, arrival_tps, ratios;
  std::int64_t it_a = 0, it_b = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock::now();
    for (int k = 0; k < per_round; ++k)
      if (!run_iteration(a, it_a++))
        return 1;
    auto t1 = clock::now();
    for (int k = 0; k < per_round; ++k)
      if (!run_iteration(b, it_b++))
        return 1;
    auto t2 = clock::now();
    double x = tokens_per_iteration * per_round / std::chrono::duration<double>(t1 - t0).count();
    double y = tokens_per_iteration * per_round / std::chrono::duration<double>(t2 - t1).count();
    keyed_tps.push_back(x);
    arrival_tps.push_back(y);
    ratios.push_back(x / y);
    std::printf("round %d: key order %8.0f tokens/s   arrival order %8.0f tokens/s   ratio %.3f\n", r, x, y, x / y);
  }
  // Gradient memory at the step: every parameter of the model once per microbatch (key
  // order) or once per data holder (arrival order); a replica holds its share of either.
  double params = 0;
  for (int s = 0; s < cfg.model.stages; ++s)
    for (auto& p : a.at(s).parameters())
      params += static_cast<double>(p.tensor.numel());
  double mib = params * 4 / (1 << 20);
  int per_iteration = holders * cfg.training.microbatches_per_holder;
  std::printf("gradient memory at the step (whole model, one replica per stage): key order %.1f MiB "
              "(%d microbatches), arrival order %.1f MiB (%d holders)\n",
              mib * per_iteration, per_iteration, mib * holders, holders);
  std::printf("median: key order %.0f tokens/s, arrival order %.0f tokens/s, key/arrival %.3f\n", median(keyed_tps),
              median(arrival_tps), median(ratios));
  return 0;
}
