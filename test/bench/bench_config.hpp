// Config loading shared by the benchmark commands.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "app/config/cluster_config.hpp"
#include "model/data.hpp"

namespace gwtf::bench {

/// The config named by argv[1]; prints `usage` (no argument) or the config's errors to
/// stderr and sets `exit_code` (2 or 1) when there is none.
inline std::optional<app::cluster_config> load_config(int argc, char** argv, const char* usage, int& exit_code) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s\n", usage);
    exit_code = 2;
    return std::nullopt;
  }
  auto loaded = app::load_cluster_config(argv[1]);
  if (!loaded.config) {
    for (auto& e : loaded.errors)
      std::fprintf(stderr, "%s\n", e.to_string().c_str());
    exit_code = 1;
  }
  return loaded.config;
}

/// The data holders of `cfg`.
inline int holder_count(const app::cluster_config& cfg) {
  int holders = 0;
  for (auto& h : cfg.hosts)
    holders += h.role == actors::host_role::data_holder ? 1 : 0;
  return holders;
}

/// The corpus of `cfg.data`; prints why to stderr when it cannot be opened.
inline std::optional<model::corpus> open_corpus(const app::cluster_config& cfg) {
  auto opened = model::corpus::open(cfg.data, cfg.model.vocab, cfg.model.seq_len);
  if (auto* err = std::get_if<std::string>(&opened)) {
    std::fprintf(stderr, "%s\n", err->c_str());
    return std::nullopt;
  }
  return std::move(std::get<model::corpus>(opened));
}

/// What a benchmark that trains CONFIG in alternating rounds needs: argv[1] the config,
/// argv[2] the iterations per round (default `default_per_round`), argv[3] the rounds
/// (default 5), the config's data holders and corpus. Sets `exit_code` when there is none.
struct training_bench {
  app::cluster_config cfg;
  int per_round = 0;
  int rounds = 0;
  int holders = 0;
  model::corpus text;
};
inline std::optional<training_bench> load_training_bench(int argc, char** argv, const char* usage,
                                                         int default_per_round, int& exit_code) {
  auto cfg = load_config(argc, argv, usage, exit_code);
  if (!cfg)
    return std::nullopt;
  auto text = open_corpus(*cfg);
  if (!text) {
    exit_code = 1;
    return std::nullopt;
  }
  int per_round = argc > 2 ? std::atoi(argv[2]) : default_per_round;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  int holders = holder_count(*cfg);
  return training_bench{std::move(*cfg), per_round, rounds, holders, std::move(*text)};
}

} // namespace gwtf::bench
