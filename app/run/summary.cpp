#include "app/run/summary.hpp"

#include <filesystem>
#include <fstream>
#include <iomanip>

#include "app/run/run_report.hpp"

namespace gwtf::app {

namespace {

void write_loss(const cluster_config& cfg, const embedded_result& r, std::ostream& out) {
  if (cfg.training.loss_out.empty())
    return;
  std::error_code ec;
  auto parent = std::filesystem::path(cfg.training.loss_out).parent_path();
  if (!parent.empty())
    std::filesystem::create_directories(parent, ec);
  std::ofstream f{cfg.training.loss_out};
  if (!f) {
    out << "# could not write " << cfg.training.loss_out << "\n";
    return;
  }
  f << "iteration,loss,tokens_per_s,flows,hosts_alive,crashes,wasted_fraction,seconds,aggregation_s\n";
  for (auto& row : r.rows)
    f << row.iteration << "," << std::setprecision(9) << row.loss << "," << row.tokens_per_s << ","
      << row.flows << "," << row.hosts_alive << "," << row.crashes << "," << row.wasted_fraction << "," << row.seconds
      << "," << row.aggregation_s << "\n";
  out << "# loss series: " << cfg.training.loss_out << "\n";
  // Plots next to it: <stem>.svg (the loss curve) and <stem>-throughput.svg.
  auto csv = std::filesystem::path(cfg.training.loss_out);
  auto stem = (csv.parent_path() / csv.stem()).string();
  auto title = std::to_string(cfg.hosts.size()) + " hosts, " + std::to_string(r.rows.size()) + " iterations, "
               + std::to_string(r.crashes) + " crashes";
  std::string written;
  for (auto& [path, svg] : {std::pair{stem + ".svg", loss_svg(r.rows, "loss: " + title)},
                            std::pair{stem + "-throughput.svg", throughput_svg(r.rows, "throughput: " + title)}}) {
    std::ofstream p{path};
    p << svg;
    if (p)
      written += (written.empty() ? "" : ", ") + path;
    else
      out << "# could not write " << path << "\n";
  }
  if (!written.empty())
    out << "# plots: " << written << "\n";
  if (!r.final_flows.empty())
    for (auto& line : write_flow_graph(flows_dot(r.final_flows, "final flows: " + title), stem + "-flows"))
      out << "# " << line << "\n";
}

} // namespace

void print_summary(const cluster_config& cfg, const embedded_result& result, std::ostream& out) {
  out << "# summary: " << result.rows.size() << " iterations in " << std::fixed << std::setprecision(1)
      << result.wall_s << " s; crashes " << result.crashes << ", joins " << result.joins << ", departures "
      << result.departures << ", restarts " << result.restarts << "; wasted compute " << std::setprecision(2)
      << (result.compute_s > 0 ? 100 * result.wasted_s / result.compute_s : 0) << "% of "
      << std::setprecision(1) << result.compute_s << " s; exactly-once violations "
      << result.exactly_once_violations.size() << "; replica disagreements " << result.replica_disagreements.size()
      << "; handled peer errors " << result.failures.size();
  if (result.reloads > 0)
    out << "; replicas reloaded " << result.reloads;
  if (result.recoveries > 0)
    out << "; lost stages restored " << result.recoveries;
  out << "\n";
  for (auto& v : result.exactly_once_violations)
    out << "# exactly-once violation: " << v << "\n";
  for (auto& v : result.replica_disagreements)
    out << "# replica disagreement: " << v << "\n";
  if (!result.false_deaths.empty())
    out << "# false deaths (a live host without a fault declared dead): " << result.false_deaths.size() << ", first: "
        << result.false_deaths.front() << "\n";
  if (result.checkpoints > 0)
    out << "# checkpoints: " << result.checkpoints << " written (newest at iteration " << result.last_checkpoint
        << "), " << std::setprecision(1) << result.checkpoint_ms / result.checkpoints << " ms each on average; "
        << result.checkpoint_replicas << " copies stored by hosts of other stages\n";
  if (!result.rows.empty())
    out << "# loss " << std::setprecision(4) << result.rows.front().loss << " -> " << result.rows.back().loss << "\n";
  if (!result.carried.empty()) {
    out << "# microbatches carried (stage work averaged):";
    for (auto& [host, n] : result.carried)
      out << " " << host << "=" << n;
    out << "\n";
  }
  write_loss(cfg, result, out);
}

} // namespace gwtf::app
