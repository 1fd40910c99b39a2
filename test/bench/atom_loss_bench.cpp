// Benchmark: the convergence ATOM's local steps cost (docs/atom.md, docs/results.md "Pipeline or
// whole-model peers"), in the real trainer on a config's model and data. The synchronous
// reference trainer (every microbatch of an iteration in one step: what GWTF's pipeline
// computes) against model::run_atom_reference with PEERS whole-model peers sharing the same
// microbatches per iteration (each takes total / PEERS and steps on its own) and averaging
// parameters every SYNC_EVERY iterations. Same tokens per iteration; the figure is the loss
// over the last tenth of the run, each setting against the synchronous one.
//
// usage: gwtf-bench-atom-loss CONFIG [ITERATIONS] [PEERS] [SYNC_EVERY...]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "bench_config.hpp"
#include "model/reference.hpp"
#include "model/torch_runtime.hpp"

using namespace gwtf;

namespace {


// Mean loss over the last tenth of the iterations (at least one).
double tail_loss(const std::vector<double>& losses) {
  std::size_t n = std::max<std::size_t>(1, losses.size() / 10);
  double sum = 0;
  for (std::size_t i = losses.size() - n; i < losses.size(); ++i)
    sum += losses[i];
  return sum / static_cast<double>(n);
}

} // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto cfg = bench::load_config(argc, argv, "gwtf-bench-atom-loss CONFIG [ITERATIONS] [PEERS] [SYNC_EVERY...]", exit_code);
  if (!cfg)
    return exit_code;
  if (argc > 2)
    cfg->training.iterations = bench::positive_arg("gwtf-bench-atom-loss", "ITERATIONS", argv[2]);
  int holders = bench::holder_count(*cfg);
  int total = holders * cfg->training.microbatches_per_holder;
  int peers = argc > 3 ? bench::positive_arg("gwtf-bench-atom-loss", "PEERS", argv[3]) : holders;
  if (total % peers != 0) {
    std::fprintf(stderr, "gwtf-bench-atom-loss: PEERS (%d) must divide the %d microbatches of an iteration\n", peers, total);
    return 2;
  }
  std::vector<int> periods;
  for (int a = 4; a < argc; ++a)
    periods.push_back(bench::positive_arg("gwtf-bench-atom-loss", "SYNC_EVERY", argv[a]));
  if (periods.empty())
    periods = {1, 4, 16};
  model::configure_torch(2);
  auto run = [&](const char* what, auto&& train) {
    std::vector<double> losses;
    auto r = train([&](const model::reference_report& rep) { losses.push_back(rep.loss); });
    if (auto* err = std::get_if<std::string>(&r)) {
      std::fprintf(stderr, "gwtf-bench-atom-loss: %s: %s\n", what, err->c_str());
      std::exit(1);
    }
    return losses;
  };
  auto sync = run("reference", [&](auto&& on) {
    return model::run_reference(cfg->model, cfg->training, cfg->data, holders, on);
  });
  std::printf("gwtf-bench-atom-loss: %s, %d iterations of %d microbatches of %d x %d tokens, %d ATOM peers of %d "
              "microbatches each; loss over the last %zu iterations\n",
              argv[1], cfg->training.iterations, total, cfg->training.microbatch_size, cfg->model.seq_len, peers,
              total / peers, std::max<std::size_t>(1, sync.size() / 10));
  std::printf("| training | first loss | loss at the end | / synchronous |\n|---|---|---|---|\n");
  std::printf("| synchronous (one step per iteration) | %.4f | %.4f | 1 |\n", sync.front(), tail_loss(sync));
  auto atom_training = cfg->training;
  atom_training.microbatches_per_holder = total / peers;
  for (int k : periods) {
    auto losses = run("atom", [&](auto&& on) {
      return model::run_atom_reference(cfg->model, atom_training, cfg->data, peers, k, on);
    });
    std::printf("| ATOM, %d peers, average every %d | %.4f | %.4f | %.3f |\n", peers, k, losses.front(),
                tail_loss(losses), tail_loss(losses) / tail_loss(sync));
  }
  return 0;
}
