// Config loading shared by the benchmark commands.
#pragma once

#include <cstdio>
#include <optional>

#include "app/config/cluster_config.hpp"

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

} // namespace gwtf::bench
