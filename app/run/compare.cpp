#include "app/run/compare.hpp"

#include <filesystem>
#include <fstream>
#include <iomanip>

#include "app/cli.hpp"
#include "app/config/derive.hpp"
#include "app/run/compare_report.hpp"
#include "app/run/embedded.hpp"
#include "app/run/launch.hpp"
#include "app/run/spec.hpp"

namespace gwtf::app {

namespace {

std::optional<routing::router_kind> router_named(const std::string& name) {
  for (auto& [kind, n] : enum_names(routing::router_kind{}))
    if (name == n)
      return kind;
  return std::nullopt;
}

// The config as run `name`: a router of the pipeline, or atom (training.mode atom: every host
// a whole-model peer, docs/atom.md).
cluster_config variant(const cluster_config& cfg, const std::string& name) {
  auto c = cfg;
  if (name == "atom")
    make_atom(c);
  else
    c.routing.router = *router_named(name);
  return c;
}

} // namespace

int run_compare(const cluster_config& cfg, const compare_options& opts, std::ostream& out, std::ostream& err) {
  namespace fs = std::filesystem;
  // Every router must be able to run the config, before any run starts.
  for (auto& name : opts.routers) {
    if (name != "atom" && !router_named(name)) {
      err << "caf-gwtf: compare: unknown router '" << name << "'\n";
      return exit_code::usage;
    }
    auto c = variant(cfg, name);
    if (auto refused = atom_refusals(c); name == "atom" && !refused.empty()) {
      err << "caf-gwtf: compare: the config cannot run as atom: " << refused.front().first << ": expected "
          << refused.front().second << "\n";
      return exit_code::failure;
    }
    if (auto why = runtime_refusal(c); !why.empty()) {
      err << "caf-gwtf: compare: the config cannot run with routing.router " << name << ": " << why << "\n";
      return exit_code::failure;
    }
  }
  std::error_code ec;
  fs::create_directories(opts.out, ec);
  if (ec) {
    err << "caf-gwtf: compare: cannot create " << opts.out << ": " << ec.message() << "\n";
    return exit_code::failure;
  }
  std::vector<compare_run> runs;
  int total = static_cast<int>(opts.routers.size()) * opts.seeds, n = 0;
  for (int k = 0; k < opts.seeds; ++k) {
    for (auto& name : opts.routers) {
      auto c = variant(cfg, name);
      c.training.seed = cfg.training.seed + static_cast<std::uint64_t>(k);
      auto stem = (fs::path(opts.out) / (name + "-seed" + std::to_string(c.training.seed))).string();
      c.training.loss_out = stem + ".csv";
      out << "compare: run " << ++n << "/" << total << ": " << name << ", seed " << c.training.seed << ", "
          << (opts.launch ? "one process per host" : "embedded") << " (log " << stem << ".log)" << std::endl;
      std::ofstream log{stem + ".log"};
      embedded_result r;
      if (opts.launch) {
        launch_options lo;
        lo.logs = stem + "-logs";
        lo.executable = opts.executable;
        lo.timeout_s = opts.timeout_s;
        r = run_launch(c, lo, log);
      } else {
        r = run_embedded(c, log, opts.timeout_s);
      }
      runs.push_back(compare_run_of(name, c.training.seed, r));
      auto s = stats_of(runs.back());
      out << "compare: " << name << ", seed " << c.training.seed << ": "
          << (r.completed ? "completed" : "did NOT complete") << ", " << r.rows.size() << " iterations, "
          << std::fixed << std::setprecision(0) << s.tokens_per_s << " tokens/s, p50 " << std::setprecision(3)
          << s.p50_s << " s, crashes " << r.crashes << ", final loss " << std::setprecision(4) << s.final_loss
          << std::defaultfloat << std::endl;
    }
  }
  auto summary = summarize(runs);
  out << "\n" << compare_table(summary);
  auto title = std::to_string(cfg.hosts.size()) + " hosts, " + std::to_string(opts.seeds) + " seed(s)"
               + (opts.launch ? ", one process per host" : ", embedded");
  auto base = fs::path(opts.out);
  for (auto& [file, text] : {std::pair{"compare.csv", compare_csv(runs)},
                             std::pair{"compare-loss.svg", compare_loss_svg(runs, "loss over wall time: " + title)},
                             std::pair{"compare-throughput.svg",
                                       compare_throughput_svg(runs, "tokens/s per iteration: " + title)}}) {
    std::ofstream f{base / file};
    f << text;
    if (!f) {
      err << "caf-gwtf: compare: could not write " << (base / file).string() << "\n";
      return exit_code::failure;
    }
    out << "# " << (base / file).string() << "\n";
  }
  bool all = true, checks = true;
  for (auto& r : runs) {
    all = all && r.completed;
    checks = checks && r.violations == 0 && r.disagreements == 0;
  }
  if (!all)
    err << "caf-gwtf: compare: a run did not complete (its log says why)\n";
  else if (!checks)
    err << "caf-gwtf: compare: a run broke exactly-once or the replicas' agreement (its log says which)\n";
  return !all ? exit_code::failure : !checks ? exit_code::check_failed : exit_code::ok;
}

} // namespace gwtf::app
