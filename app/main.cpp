// caf-gwtf: entry point. Parses the command line and dispatches to a mode.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <chrono>

#include <boost/version.hpp>
#include <caf/config.hpp>
#include <capnp/common.h>

#include "app/config/check_report.hpp"
#include "app/tools/export.hpp"
#include "app/cli.hpp"
#include "app/config/cluster_config.hpp"
#include "app/run/compare.hpp"
#include "app/run/embedded.hpp"
#include "app/run/launch.hpp"
#include "app/tools/shell.hpp"
#include "app/run/node.hpp"
#include "app/run/spec.hpp"
#include "app/sim/from_config.hpp"
#include "app/sim/scenario.hpp"
#include "app/sim/sim_report.hpp"
#include "model/reference.hpp"
#include "model/stage_timing.hpp"
#include "model/torch_runtime.hpp"

namespace {

using namespace gwtf::app;

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
std::optional<cluster_config> load_or_report(const std::string& file, const std::vector<std::string>& sets) {
  config_overrides extra;
  extra.sets = sets;
  auto result = load_cluster_config(file, extra);
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

// Trains the unpartitioned model on the global batch of the config's data holders.
int run_reference_mode(const cluster_config& cfg) {
  // A node's config names the cluster's data holders; an embedded one declares them.
  int holders = static_cast<int>(cfg.training.data_holders.size());
  for (auto& h : cfg.hosts)
    holders += cfg.training.data_holders.empty() && h.role == gwtf::actors::host_role::data_holder ? 1 : 0;
  if (holders == 0) {
    std::cerr << "caf-gwtf: reference needs at least one data_holder in hosts (it samples "
                 "their microbatches)\n";
    return exit_code::failure;
  }
  gwtf::model::configure_torch(1);
  std::ofstream loss_out;
  if (!cfg.training.loss_out.empty()) {
    loss_out.open(cfg.training.loss_out);
    if (!loss_out) {
      std::cerr << "caf-gwtf: cannot write training.loss_out '" << cfg.training.loss_out << "'\n";
      return exit_code::failure;
    }
    loss_out << "iteration,loss,lr,grad_norm,tokens_per_s\n";
  }
  std::printf("reference: %s, %d blocks, d=%d, %d data holder(s) x %d microbatches of %d x %d "
              "tokens, seed %llu, BLAS %s\n",
              cfg.model.arch == gwtf::model::architecture::gpt ? "gpt" : "llama", cfg.model.layers,
              cfg.model.hidden, holders, cfg.training.microbatches_per_holder,
              cfg.training.microbatch_size, cfg.model.seq_len,
              static_cast<unsigned long long>(cfg.training.seed),
              gwtf::model::blas_is_optimised() ? "OpenBLAS" : "reference (slow)");
  bool atom = cfg.training.mode == gwtf::model::training_mode::atom;
  if (atom) // docs/atom.md: ATOM's semantics in one process, the atom mode's oracle
    std::printf("reference: training.mode atom: %d whole-model peers, a parameter average every %d local step(s)%s\n",
                holders, cfg.training.atom.sync_every,
                cfg.training.averaging == gwtf::model::averaging_mode::overlap ? " (synchronous here: overlap is the runtime's)"
                                                                               : "");
  double tokens_per_s_sum = 0;
  std::int64_t reported = 0;
  auto report = [&](const gwtf::model::reference_report& rep) {
    std::printf("iter %5lld  loss %.4f  lr %.2e  |g| %7.3f  tokens/s %8.0f\n",
                static_cast<long long>(rep.iteration), rep.loss, rep.lr, rep.grad_norm,
                rep.tokens_per_s);
    std::fflush(stdout);
    if (loss_out)
      loss_out << rep.iteration << "," << rep.loss << "," << rep.lr << "," << rep.grad_norm
               << "," << rep.tokens_per_s << "\n";
    tokens_per_s_sum += rep.tokens_per_s;
    ++reported;
  };
  auto r = atom ? gwtf::model::run_atom_reference(cfg.model, cfg.training, cfg.data, holders, cfg.training.atom.sync_every,
                                                  report)
                : gwtf::model::run_reference(cfg.model, cfg.training, cfg.data, holders, report, cfg.training.averaging);
  if (auto* err = std::get_if<std::string>(&r)) {
    std::cerr << "caf-gwtf: " << *err << "\n";
    return exit_code::failure;
  }
  std::printf("reference: %lld iterations, mean %.0f tokens/s%s%s\n", static_cast<long long>(reported),
              tokens_per_s_sum / static_cast<double>(reported),
              loss_out ? ", loss series in " : "", loss_out ? cfg.training.loss_out.c_str() : "");
  return exit_code::ok;
}

// Simulates the scenario with each router on the same churn trace; prints the table and
// writes the outputs.
int run_sim(const cli_options& opts) {
  const auto& file = opts.config.empty() ? opts.scenario : opts.config;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    std::cerr << "caf-gwtf: cannot read " << (opts.config.empty() ? "scenario" : "config") << " '" << file
              << "': " << (std::filesystem::exists(file, ec) ? "not a regular file" : "no such file") << "\n";
    return exit_code::usage;
  }
  scenario_result loaded;
  if (opts.config.empty()) {
    loaded = load_scenario(opts.scenario, opts.seed);
  } else { // the cluster config, with this machine's measured compute
    auto cfg = load_cluster_config(opts.config, config_overrides{opts.sets, {}});
    if (!cfg.config) {
      for (auto& e : cfg.errors)
        std::cerr << e.to_string() << "\n";
      std::cerr << "caf-gwtf: " << opts.config << ": " << cfg.errors.size() << " error(s); see docs/config.md\n";
      return exit_code::failure;
    }
    measured_compute compute;
    if (opts.compute_ms) {
      compute = {opts.compute_ms->first / 1e3, opts.compute_ms->second / 1e3};
      std::printf("sim --from-config %s: a microbatch's forward + backward (--compute-ms): data holder %.2f ms, "
                  "relay stage %.2f ms; each host x its compute_scale\n",
                  opts.config.c_str(), compute.holder_s * 1e3, compute.relay_s * 1e3);
    } else {
      gwtf::model::configure_torch(1); // as each host of the embedded cluster computes
      int blas_before = gwtf::model::set_blas_threads(1);
      gwtf::model::stage_times times;
      try {
        times = gwtf::model::time_stages(cfg.config->model, cfg.config->training, 10);
      } catch (const std::exception& e) { // a stage the config describes cannot compute here
        std::cerr << "caf-gwtf: sim --from-config " << opts.config << ": timing its stages failed: " << e.what()
                  << " (give the times with --compute-ms HOLDER,RELAY)\n";
        return exit_code::failure;
      }
      if (blas_before > 0)
        gwtf::model::set_blas_threads(blas_before);
      compute = {times.holder_s, times.relay_s};
      std::printf("sim --from-config %s: a microbatch's forward + backward here (median of %d): data holder %.2f ms, "
                  "relay stage %.2f ms; each host x its compute_scale (replay: --compute-ms %.3f,%.3f)\n",
                  opts.config.c_str(), times.repetitions, times.holder_s * 1e3, times.relay_s * 1e3,
                  times.holder_s * 1e3, times.relay_s * 1e3);
    }
    loaded = scenario_from_config(*cfg.config, opts.config, compute, opts.seed);
  }
  for (auto& e : loaded.errors)
    std::cerr << e.to_string() << "\n";
  if (!loaded.scenario) {
    std::cerr << "caf-gwtf: " << file << ": " << loaded.errors.size() << " error(s); see docs/simulator.md\n";
    return exit_code::failure;
  }
  auto& sc = *loaded.scenario;
  auto trace = gwtf::sim::churn_trace(sc.sim);
  int counts[4] = {0, 0, 0, 0};
  for (auto& e : trace)
    ++counts[static_cast<int>(e.kind)];
  int holders = 0;
  for (auto& h : sc.sim.hosts)
    holders += h.stage == 0;
  std::printf("sim: %s, network %s, %zu hosts (%d data holders), %d stages, %d iterations x %d microbatches, "
              "seed %llu\n     churn trace: %d crashes, %d leaves, %d joins, %d degrades (the same for every router)\n",
              sc.config.name.c_str(), sc.sim.net.name.c_str(), sc.sim.hosts.size(), holders, sc.sim.stages,
              sc.sim.iterations, holders * sc.sim.microbatches_per_holder,
              static_cast<unsigned long long>(sc.config.seed), counts[0], counts[1], counts[2], counts[3]);
  std::printf("     placement: %s", gwtf::sim::to_string(sc.config.placement.policy));
  if (sc.dtfm)
    std::printf(", DT-FM cost %.3f s (data-parallel %.3f s + 2 x pipeline %.3f s)", sc.dtfm->cost,
                sc.dtfm->data_parallel_s, sc.dtfm->pipeline_s);
  std::printf("\n");
  std::vector<gwtf::sim::sim_result> results;
  bool all_completed = true;
  for (auto& name : opts.routers) {
    using gwtf::sim::sim_router;
    auto r = name == "gwtf"            ? sim_router::gwtf
             : name == "swarm"         ? sim_router::swarm
             : name == "swarm-restart" ? sim_router::swarm_restart
             : name == "atom"          ? sim_router::atom
                                       : sim_router::centralized;
    auto t0 = std::chrono::steady_clock::now();
    try {
      results.push_back(gwtf::sim::simulate(sc.sim, r));
    } catch (const std::exception& e) { // a limit of the simulator, said plainly
      std::cerr << "caf-gwtf sim: router " << name << ": " << e.what() << "\n";
      return exit_code::failure;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("     %s: simulated %.1f s of training in %.2f s\n", name.c_str(), results.back().total_s, wall);
    std::fflush(stdout);
    all_completed = all_completed && results.back().completed;
  }
  std::cout << "\n" << comparison_table(summarize(sc.sim, results));
  std::string dir = opts.out.empty() ? "sim-results/" + sc.config.name + "-seed" + std::to_string(sc.config.seed)
                                     : opts.out;
  if (auto err = write_sim_outputs(dir, sc, results); !err.empty()) {
    std::cerr << "caf-gwtf: " << err << "\n";
    return exit_code::failure;
  }
  std::cout << "\nwrote " << dir << "/{summary.csv,iterations.csv,result.json,throughput.svg,iteration_times.svg}\n";
  if (!all_completed) {
    std::cerr << "caf-gwtf: a router did not finish every iteration (see why above); seed "
              << sc.config.seed << "\n";
    return exit_code::failure;
  }
  return exit_code::ok;
}

// Exit code of an embedded or launched run; prints why it failed.
int report_run(const embedded_result& r) {
  return run_exit_code({r.completed, r.failures, r.exactly_once_violations, r.replica_disagreements}, std::cerr);
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
    case cli_action::sim:
      return run_sim(opts);
    case cli_action::shell:
      return run_shell(opts, std::cout, std::cerr);
    case cli_action::compare:
    case cli_action::check:
    case cli_action::node:
    case cli_action::reference:
    case cli_action::launch:
    case cli_action::export_hf:
    case cli_action::eval:
    case cli_action::import_hf:
      break;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(opts.config, ec)) {
    std::cerr << "caf-gwtf: cannot read config '" << opts.config << "': "
              << (std::filesystem::exists(opts.config, ec) ? "not a regular file" : "no such file")
              << "\n";
    return exit_code::usage;
  }
  auto cfg = load_or_report(opts.config, opts.sets);
  if (!cfg)
    return exit_code::failure;
  if (opts.action == cli_action::check)
    return run_check(*cfg, opts.config);
  if (opts.action == cli_action::reference)
    return run_reference_mode(*cfg);
  if (opts.action == cli_action::export_hf || opts.action == cli_action::eval || opts.action == cli_action::import_hf) {
    checkpoint_tool_options co{opts.checkpoint, opts.iteration, opts.out, opts.batch_out, opts.from};
    if (opts.action == cli_action::import_hf)
      return run_import(*cfg, co, std::cout, std::cerr);
    return opts.action == cli_action::export_hf ? run_export(*cfg, co, std::cout, std::cerr)
                                                : run_eval(*cfg, co, std::cout, std::cerr);
  }
  if (opts.action == cli_action::compare) {
    compare_options co;
    co.routers = opts.routers;
    co.seeds = opts.seeds;
    co.launch = opts.launch_hosts;
    co.out = opts.out.empty() ? "compare-results/" + std::filesystem::path(opts.config).stem().string() : opts.out;
    co.executable = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) {
      std::cerr << "caf-gwtf: cannot find its own executable: " << ec.message() << "\n";
      return exit_code::failure;
    }
    return run_compare(*cfg, co, std::cout, std::cerr);
  }
  if (auto why = runtime_refusal(*cfg); !why.empty()) { // launch, node mode and embedded alike
    std::cerr << "caf-gwtf: " << why << "\n";
    return exit_code::failure;
  }
  if (opts.action == cli_action::launch) {
    launch_options lo;
    lo.logs = opts.logs.empty() ? "launch-logs" : opts.logs;
    lo.executable = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) {
      std::cerr << "caf-gwtf: cannot find its own executable: " << ec.message() << "\n";
      return exit_code::failure;
    }
    lo.resume = {opts.resume, opts.resume_at, opts.until};
    return report_run(run_launch(*cfg, lo, std::cout));
  }
  if (cfg->hosts.size() == 1) {
    node_options no;
    no.join = opts.join;
    no.resume = opts.resume;
    no.resume_at = opts.resume_at;
    no.until = opts.until;
    no.report = opts.report;
    restore_order restore;
    int code = run_node(*cfg, no, std::cout, &restore);
    if (code == exit_code::restore)
      return restart_self(restore_arguments(args, restore.iteration, restore.stage), "to restore a lost stage");
    return code == exit_code::rejoin ? restart_as_joiner(args) : code;
  }
  if (opts.join || !opts.report.empty()) {
    std::cerr << "caf-gwtf: --join and --report are for node mode (a config with one host)\n";
    return exit_code::usage;
  }
  return report_run(run_embedded(*cfg, std::cout, 3600, {opts.resume, opts.resume_at, opts.until}));
}
