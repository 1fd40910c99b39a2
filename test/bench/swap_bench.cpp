// Benchmark: the cost of layer swapping (docs/model.md, "Layer swapping"). One relay stage
// holding every block of a GPT model trains in this process: in memory (stashing, the
// default), in memory rematerialising (the same compute as a swapped stage), and swapped
// through budgets of 1/2, 1/3 and 1/4 of its state. Rounds rotate which setting goes first so
// that machine noise hits all alike; the figures are the medians of the rounds' ratios
// against the in-memory stage and against the in-memory rematerialising one (a swapped stage
// computes as that one does: the second ratio is the cost of the swapping itself), and the
// resident-set growth of each setting's first round (the step's averaged gradient included).
//
// usage: gwtf-bench-swap [LAYERS] [HIDDEN] [MICROBATCHES_PER_STEP] [ROUNDS] [DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../resident_set.hpp"
#include "bench_args.hpp"
#include "bench_stats.hpp"
#include "model/stage.hpp"
#include "model/torch_runtime.hpp"

using namespace gwtf;

int main(int argc, char** argv) {
  if (argc > 6) {
    std::fprintf(stderr, "usage: gwtf-bench-swap [LAYERS] [HIDDEN] [MICROBATCHES_PER_STEP] [ROUNDS] [DIR]\n");
    return 2;
  }
  model::model_config m;
  m.layers = argc > 1 ? bench::positive_arg("gwtf-bench-swap", "LAYERS", argv[1]) : 8;
  m.hidden = argc > 2 ? bench::positive_arg("gwtf-bench-swap", "HIDDEN", argv[2]) : 512;
  m.heads = 8;
  m.seq_len = 128;
  m.vocab = 256;
  m.stages = 2; // stage 1 holds every block
  int microbatches = argc > 3 ? bench::positive_arg("gwtf-bench-swap", "MICROBATCHES_PER_STEP", argv[3]) : 4;
  int rounds = argc > 4 ? bench::positive_arg("gwtf-bench-swap", "ROUNDS", argv[4]) : 5;
  std::string dir = argc > 5 ? argv[5] : std::filesystem::temp_directory_path().string();
  if (m.hidden % m.heads != 0) {
    std::fprintf(stderr, "gwtf-bench-swap: HIDDEN must be a multiple of %d\n", m.heads);
    return 2;
  }
  model::training_config t;
  t.seed = 1;
  t.iterations = 1000;
  t.microbatch_size = 4;
  t.warmup_iterations = 10;
  model::configure_torch(1);

  struct setting {
    std::string name;
    bool remat = false;
    int divisor = 0; // budget = state / divisor; 0: in memory
    std::unique_ptr<model::stage> stage;
    std::int64_t growth = 0;
    std::vector<double> seconds, ratios, remat_ratios;
    std::int64_t iteration = 0;
  };
  std::vector<setting> settings;
  auto add = [&](std::string name, bool remat, int divisor) {
    setting s;
    s.name = std::move(name);
    s.remat = remat;
    s.divisor = divisor;
    settings.push_back(std::move(s));
  };
  add("in memory", false, 0);
  add("in memory, rematerialising", true, 0);
  for (int d : {2, 3, 4})
    add("swapped, budget 1/" + std::to_string(d), false, d);
  std::int64_t state = 0;
  {
    model::stage probe{m, t, 1};
    state = probe.state_bytes();
  }
  torch::manual_seed(2);
  auto x = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  auto one_step = [&](setting& s) {
    auto& st = *s.stage;
    auto it = static_cast<std::uint64_t>(s.iteration);
    for (int j = 0; j < microbatches; ++j)
      std::get<torch::Tensor>(st.forward(it << 24 | static_cast<std::uint64_t>(j), x));
    for (int j = 0; j < microbatches; ++j)
      std::get<torch::Tensor>(st.backward(it << 24 | static_cast<std::uint64_t>(j), x));
    auto sums = std::get<model::gradient_sum>(st.gradients(it));
    auto averaged = model::average({sums});
    std::get<bool>(st.apply(averaged, s.iteration, 1.0));
    ++s.iteration;
  };
  using clock = std::chrono::steady_clock;
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < settings.size(); ++k) {
      auto& s = settings[(k + static_cast<std::size_t>(r)) % settings.size()];
      auto before = test::status_bytes("VmRSS");
      test::reset_peak();
      if (!s.stage) // built in its first round, its growth measured over it
        s.stage = std::make_unique<model::stage>(m, t, 1, s.remat,
                                                 model::swap_options{s.divisor > 0 ? state / s.divisor : 0, dir, microbatches}); // a step's microbatches are in flight at once
      auto t0 = clock::now();
      one_step(s);
      s.seconds.push_back(std::chrono::duration<double>(clock::now() - t0).count());
      if (r == 0)
        s.growth = test::status_bytes("VmHWM") - before;
    }
    for (auto& s : settings) {
      s.ratios.push_back(settings[0].seconds.back() / s.seconds.back());
      s.remat_ratios.push_back(settings[1].seconds.back() / s.seconds.back());
    }
  }
  double tokens = static_cast<double>(microbatches) * t.microbatch_size * m.seq_len;
  std::printf("gwtf-bench-swap: GPT stage of %d blocks, d=%d, state %.1f MiB, %d microbatches of %d x %d tokens "
              "a step, %d rounds, swap files in %s\n",
              m.layers, m.hidden, static_cast<double>(state) / (1 << 20), microbatches, t.microbatch_size, m.seq_len,
              rounds, dir.c_str());
  std::printf("| setting | resident blocks | tokens/s (median) | / in memory | / in memory, rematerialising (rounds) | "
              "resident growth, first step |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (auto& s : settings) {
    auto lo = *std::min_element(s.remat_ratios.begin(), s.remat_ratios.end());
    auto hi = *std::max_element(s.remat_ratios.begin(), s.remat_ratios.end());
    std::printf("| %s | %d | %.0f | %.3f | %.3f (%.2f-%.2f) | %.1f MiB |\n", s.name.c_str(), s.stage->resident_blocks(),
                tokens / bench::median(s.seconds), bench::median(s.ratios), bench::median(s.remat_ratios), lo, hi,
                static_cast<double>(s.growth) / (1 << 20));
  }
  return 0;
}
