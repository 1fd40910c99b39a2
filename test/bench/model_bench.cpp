// Benchmark: tokens/s of the unpartitioned reference against the same training driven
// through the stage API (every stage in this process, in order). Rounds alternate between
// the two so that machine noise hits both alike; the ratio is the figure of merit.
//
// usage: gwtf-bench-model CONFIG [ITERATIONS_PER_ROUND] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_config.hpp"
#include "app/config/cluster_config.hpp"
#include "model/pipeline.hpp"
#include "model/reference.hpp"
#include "model/torch_runtime.hpp"
#include "bench_stats.hpp"

using gwtf::bench::median;

using namespace gwtf;

int main(int argc, char** argv) {
  int exit_code = 0;
  auto setup = bench::load_training_bench(argc, argv, "gwtf-bench-model CONFIG [ITERATIONS_PER_ROUND] [ROUNDS]", 10, exit_code);
  if (!setup)
    return exit_code;
  auto& cfg = setup->cfg;
  auto& text = setup->text;
  int per_round = setup->per_round, rounds = setup->rounds, holders = setup->holders;
  model::configure_torch(1);

  model::reference_model ref{cfg.model, cfg.training};
  model::local_pipeline pipe{cfg.model, cfg.training};
  auto microbatches = [&](std::int64_t it) {
    std::vector<std::pair<std::uint64_t, model::microbatch_tokens>> out;
    for (int h = 0; h < holders; ++h)
      for (int i = 0; i < cfg.training.microbatches_per_holder; ++i) {
        model::microbatch_id id{static_cast<std::uint64_t>(it), static_cast<std::uint32_t>(h),
                                static_cast<std::uint32_t>(i)};
        out.emplace_back(id.key(), model::sample(text, cfg.training.seed, id,
                                                 cfg.training.microbatch_size, cfg.model.seq_len));
      }
    return out;
  };
  using clock = std::chrono::steady_clock;
  double tokens_per_iteration = static_cast<double>(holders) * cfg.training.microbatches_per_holder
                                * cfg.training.microbatch_size * cfg.model.seq_len;
  std::vector<double> ref_tps, pipe_tps, ratios;
  std::int64_t it_ref = 0;
  std::int64_t it_pipe = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock::now();
    for (int k = 0; k < per_round; ++k, ++it_ref) {
      for (auto& [key, mb] : microbatches(it_ref))
        ref.accumulate(key, mb);
      ref.apply(it_ref);
    }
    auto t1 = clock::now();
    for (int k = 0; k < per_round; ++k, ++it_pipe) {
      for (auto& [key, mb] : microbatches(it_pipe))
        if (std::holds_alternative<std::string>(pipe.run_microbatch(key, mb)))
          return 1;
      if (std::holds_alternative<std::string>(pipe.apply(it_pipe)))
        return 1;
    }
    auto t2 = clock::now();
    double a = tokens_per_iteration * per_round / std::chrono::duration<double>(t1 - t0).count();
    double b = tokens_per_iteration * per_round / std::chrono::duration<double>(t2 - t1).count();
    ref_tps.push_back(a);
    pipe_tps.push_back(b);
    ratios.push_back(b / a);
    std::printf("round %d: reference %8.0f tokens/s   stage API %8.0f tokens/s   ratio %.3f\n", r,
                a, b, b / a);
  }
  std::printf("median: reference %.0f tokens/s, stage API %.0f tokens/s, stage/reference %.3f "
              "(overhead %.1f%%)\n",
              median(ref_tps), median(pipe_tps), median(ratios), (1.0 - median(ratios)) * 100);
  return 0;
}
