// Config loading shared by the benchmark commands.
#pragma once

#include <cstdio>
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

} // namespace gwtf::bench
