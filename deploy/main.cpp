// caf-gwtf: entry point. Parses the command line and dispatches to a mode.
#include <filesystem>
#include <iostream>

#include <boost/version.hpp>
#include <caf/config.hpp>
#include <capnp/common.h>

#include "deploy/check_report.hpp"
#include "deploy/cli.hpp"
#include "deploy/cluster_config.hpp"
#include "model/torch_runtime.hpp"

namespace {

using namespace gwtf::deploy;

int print_version() {
  std::cout << "caf-gwtf " << GWTF_VERSION << "\n"
            << "  CAF " << CAF_VERSION / 10000 << "." << CAF_VERSION / 100 % 100 << "."
            << CAF_VERSION % 100 << "\n"
            << "  LibTorch " << gwtf::model::torch_version() << " (CPU)\n"
            << "  Cap'n Proto " << CAPNP_VERSION_MAJOR << "." << CAPNP_VERSION_MINOR << "."
            << CAPNP_VERSION_MICRO << "\n"
            << "  Boost " << BOOST_VERSION / 100000 << "." << BOOST_VERSION / 100 % 1000 << "."
            << BOOST_VERSION % 100 << "\n"
            << "  yaml-cpp " << GWTF_YAML_CPP_VERSION << "\n"
            << "  BLAS " << gwtf::model::blas_backend() << "\n";
  return exit_code::ok;
}

// Loads the config; prints every error and returns nullopt when it is invalid.
std::optional<cluster_config> load_or_report(const std::string& file) {
  auto result = load_cluster_config(file);
  for (auto& e : result.errors)
    std::cerr << e.to_string() << "\n";
  if (!result.config)
    std::cerr << "caf-gwtf: " << file << ": " << result.errors.size()
              << " error(s); see docs/config.md\n";
  return std::move(result.config);
}

int run_check(const cluster_config& cfg, const std::string& file) {
  std::cout << "# caf-gwtf " << GWTF_VERSION << ": " << file << " is valid; resolved config:\n"
            << to_yaml(cfg) << derived_report(cfg);
  if (!gwtf::model::blas_is_optimised())
    std::cout << "# WARNING: LibTorch uses the " << gwtf::model::blas_backend() << "\n";
  return exit_code::ok;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = parse_cli(args);
  if (auto* err = std::get_if<cli_error>(&parsed)) {
    std::cerr << "caf-gwtf: " << err->message << "\n";
    return exit_code::usage;
  }
  auto& opts = std::get<cli_options>(parsed);
  switch (opts.action) {
    case cli_action::help:
      std::cout << usage_text();
      return exit_code::ok;
    case cli_action::version:
      return print_version();
    case cli_action::check:
    case cli_action::node:
      break;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(opts.config, ec)) {
    std::cerr << "caf-gwtf: cannot read config '" << opts.config << "': "
              << (std::filesystem::exists(opts.config, ec) ? "not a regular file" : "no such file")
              << "\n";
    return exit_code::usage;
  }
  auto cfg = load_or_report(opts.config);
  if (!cfg)
    return exit_code::failure;
  if (opts.action == cli_action::check)
    return run_check(*cfg, opts.config);
  std::cerr << "caf-gwtf: " << opts.config
            << " is valid, but this build has no node runtime yet (the actor runtime is "
               "the next milestone, see docs/architecture.md); use --check\n";
  return exit_code::failure;
}
