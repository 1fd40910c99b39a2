// Benchmark: checkpoint write and read (verify) times (docs/checkpoints.md). For each stage of
// CONFIG's model: export_state + an atomic write (encode, hash, write, fsync, rename) and a
// read (read, verify, import_state). Then a synthetic stage of a 1.2B-parameter model split
// into STAGES stages (weights + two Adam moments, fp32: 12 bytes a parameter), written and
// read the same way. Medians over ROUNDS; files under DIR (default: a temporary directory).
//
// usage: gwtf-bench-checkpoint CONFIG [ROUNDS=3] [STAGES=8] [DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <vector>

#include "bench_config.hpp"
#include "model/checkpoint.hpp"
#include "model/stage.hpp"
#include "model/torch_runtime.hpp"
#include "bench_stats.hpp"

using gwtf::bench::median;

using namespace gwtf;
using clock_type = std::chrono::steady_clock;

namespace {

double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }


} // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto loaded = bench::load_config(argc, argv, "gwtf-bench-checkpoint CONFIG [ROUNDS=3] [STAGES=8] [DIR]", exit_code);
  if (!loaded)
    return exit_code;
  auto& cfg = *loaded;
  int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  int big_stages = argc > 3 ? std::max(1, std::atoi(argv[3])) : 8;
  namespace fs = std::filesystem;
  fs::path dir = argc > 4 ? fs::path{argv[4]} : fs::temp_directory_path() / ("gwtf-bench-ckpt-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  model::configure_torch(1);
  std::printf("checkpoints under %s, %d rounds (medians)\n", dir.c_str(), rounds);
  for (int s = 0; s < cfg.model.stages; ++s) {
    model::stage st{cfg.model, cfg.training, s};
    std::vector<double> exp, write, read;
    std::size_t bytes = 0;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = clock_type::now();
      auto blob = st.export_state();
      exp.push_back(since(t0));
      bytes = blob.size();
      model::checkpoint_meta meta{static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(cfg.model.stages),
                                  static_cast<std::uint64_t>(r + 1), 1, "bench"};
      t0 = clock_type::now();
      auto why = model::write_checkpoint(dir.string(), meta, blob, 1);
      write.push_back(since(t0));
      if (!why.empty()) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 1;
      }
      t0 = clock_type::now();
      auto c = model::read_checkpoint(model::checkpoint_path(dir.string(), meta.stage, meta.iteration), meta.stage, 1);
      auto& cp = std::get<model::checkpoint>(c);
      auto ok = st.import_state(cp.state.data(), cp.state.size());
      read.push_back(since(t0));
      if (std::holds_alternative<std::string>(ok))
        return 1;
    }
    std::printf("%s stage %d: %.1f MB; export_state %.1f ms, write %.1f ms, read+verify+import %.1f ms\n",
                cfg.model.arch == model::architecture::gpt ? "gpt" : "llama", s, bytes / 1e6, 1e3 * median(exp),
                1e3 * median(write), 1e3 * median(read));
  }
  // One stage of a 1.2B-parameter model (synthetic bytes: the format does not look inside).
  std::size_t params = 1'200'000'000ull / static_cast<std::size_t>(big_stages);
  std::vector<std::uint8_t> blob(params * 12);
  for (std::size_t i = 0; i < blob.size(); i += 4096)
    blob[i] = static_cast<std::uint8_t>(i >> 12);
  std::vector<double> write, read;
  for (int r = 0; r < rounds; ++r) {
    model::checkpoint_meta meta{0, static_cast<std::uint32_t>(big_stages), static_cast<std::uint64_t>(r + 1), 1, "bench"};
    auto t0 = clock_type::now();
    auto why = model::write_checkpoint((dir / "big").string(), meta, blob, 1);
    write.push_back(since(t0));
    if (!why.empty()) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 1;
    }
    t0 = clock_type::now();
    auto c = model::read_checkpoint(model::checkpoint_path((dir / "big").string(), 0, meta.iteration), 0, 1);
    read.push_back(since(t0));
    if (!std::holds_alternative<model::checkpoint>(c))
      return 1;
  }
  std::printf("1.2B parameters / %d stages: %.2f GB a stage; write %.2f s (%.0f MB/s), read+verify %.2f s (%.0f MB/s)\n",
              big_stages, blob.size() / 1e9, median(write), blob.size() / 1e6 / median(write), median(read),
              blob.size() / 1e6 / median(read));
  if (argc <= 4)
    fs::remove_all(dir);
  return 0;
}
