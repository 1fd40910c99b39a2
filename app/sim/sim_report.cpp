#include "app/sim/sim_report.hpp"
#include "app/quantile.hpp"
#include "app/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace gwtf::app {

namespace fs = std::filesystem;
using sim::sim_result;
using namespace plot;

namespace {


std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += std::string{"\\"} + c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    }
    else
      out += c;
  }
  return out + "\"";
}


template <class T>
std::string json_array(const std::vector<T>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i ? "," : "") + fmt("%.6g", static_cast<double>(v[i]));
  return out + "]";
}

const char* color(const std::string& router) {
  if (router == "gwtf")
    return "#1f77b4";
  if (router == "swarm")
    return "#d62728";
  if (router == "swarm-restart")
    return "#ff7f0e";
  if (router == "atom")
    return "#9467bd";
  return "#2ca02c";
}



std::string scenario_title(const loaded_scenario& sc) {
  return sc.config.name + " (seed " + std::to_string(sc.config.seed) + ")";
}

} // namespace

std::vector<sim_summary> summarize(const sim::sim_scenario& s, const std::vector<sim_result>& results) {
  std::vector<sim_summary> out;
  double centralized = 0, bound = 0;
  for (auto& r : results) {
    if (r.router == sim::sim_router::centralized && r.completed && r.total_s > 0)
      centralized = static_cast<double>(r.microbatches) / r.total_s;
    // The pipeline's bound; ATOM's whole-model peers have their own (docs/atom.md).
    if (r.router != sim::sim_router::atom && r.completed && r.bound_s > 0)
      bound = std::max(bound, static_cast<double>(r.microbatches) / r.bound_s);
  }
  for (auto& r : results) {
    sim_summary x;
    x.router = to_string(r.router);
    x.completed = r.completed;
    x.why = r.why;
    x.iterations = static_cast<int>(r.iteration_s.size());
    x.total_s = r.total_s;
    x.setup_s = r.setup_s;
    if (r.total_s > 0) {
      x.microbatches_per_s = static_cast<double>(r.microbatches) / r.total_s;
      x.tokens_per_s = x.microbatches_per_s * s.tokens_per_microbatch;
    }
    x.wasted_fraction = r.compute_s > 0 ? r.wasted_s / r.compute_s : 0;
    x.iteration_p50_s = quantile(r.iteration_s, 0.5);
    x.iteration_p90_s = quantile(r.iteration_s, 0.9);
    x.iteration_max_s = quantile(r.iteration_s, 1.0);
    if (!r.flows.empty()) {
      x.flows_first = r.flows.front();
      x.flows_min = *std::min_element(r.flows.begin(), r.flows.end());
      x.flows_last = r.flows.back();
    }
    x.vs_centralized = centralized > 0 && r.completed ? x.microbatches_per_s / centralized : 0;
    x.bound_microbatches_per_s = bound;
    x.run_bound_microbatches_per_s = r.bound_s > 0 ? static_cast<double>(r.microbatches) / r.bound_s : 0;
    double against = r.router == sim::sim_router::atom ? x.run_bound_microbatches_per_s : bound;
    x.vs_bound = against > 0 && r.completed ? x.microbatches_per_s / against : 0;
    x.moves = r.moves;
    x.crashes = r.crashes;
    x.leaves = r.leaves;
    x.joins = r.joins;
    x.degrades = r.degrades;
    out.push_back(x);
  }
  return out;
}

std::string comparison_table(const std::vector<sim_summary>& rows) {
  std::ostringstream o;
  o << "router         done  total_s  setup_s    mb/s    tokens/s  wasted  iter_p50  iter_p90  iter_max  flows(first/min/last)  vs_central  vs_bound  churn(c/l/j/d)\n";
  for (auto& r : rows) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "%-14s %-4s %8.1f %8.1f %7.3f %11.0f %6.2f%% %9.2f %9.2f %9.2f  %6d/%d/%-6d         %-10s  %-8s  %d/%d/%d/%d\n",
                  r.router.c_str(), r.completed ? "yes" : "NO", r.total_s, r.setup_s, r.microbatches_per_s,
                  r.tokens_per_s, 100 * r.wasted_fraction, r.iteration_p50_s, r.iteration_p90_s, r.iteration_max_s,
                  r.flows_first, r.flows_min, r.flows_last,
                  r.vs_centralized > 0 ? fmt("%.3f", r.vs_centralized).c_str() : "-",
                  r.vs_bound > 0 ? fmt("%.3f", r.vs_bound).c_str() : "-", r.crashes, r.leaves, r.joins, r.degrades);
    o << line;
    if (!r.completed)
      o << "         why: " << r.why << "\n";
  }
  if (!rows.empty() && rows.front().bound_microbatches_per_s > 0)
    o << "bound: " << fmt("%.3f", rows.front().bound_microbatches_per_s)
      << " microbatches/s at most, for any router (proven per iteration from the hosts that could work in it; "
         "docs/routing.md)\n";
  if (std::any_of(rows.begin(), rows.end(), [](auto& r) { return r.router == "atom"; }))
    o << "atom's vs_bound is against its own bound: every peer's compute alone, no network (docs/atom.md)\n";
  return o.str();
}

std::string throughput_svg(const loaded_scenario& sc, const std::vector<sim_result>& results) {
  frame f;
  double tmax = 0, ymax = 0;
  double per_iter = static_cast<double>(sc.sim.microbatches_per_holder);
  std::size_t holders = 0;
  for (auto& h : sc.sim.hosts)
    holders += h.stage == 0;
  per_iter *= static_cast<double>(holders);
  for (auto& r : results) {
    tmax = std::max(tmax, r.total_s);
    for (auto t : r.iteration_s)
      if (t > 0)
        ymax = std::max(ymax, per_iter / t);
  }
  f.xmax = nice_max(tmax);
  f.ymax = nice_max(ymax * 1.05);
  f.bottom = 60 + 14 * static_cast<double>(results.size());
  f.open("Throughput over time: " + scenario_title(sc), "virtual time (s); ticks below: crash/leave (x), join (+)",
         "microbatches/s per iteration");
  for (std::size_t k = 0; k < results.size(); ++k) {
    auto& r = results[k];
    auto name = std::string{to_string(r.router)};
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < r.iteration_s.size() && i < r.iteration_end_s.size(); ++i) {
      double start = r.iteration_end_s[i] - r.iteration_s[i];
      double tp = r.iteration_s[i] > 0 ? per_iter / r.iteration_s[i] : 0;
      pts.emplace_back(start, tp); // a step per iteration
      pts.emplace_back(r.iteration_end_s[i], tp);
    }
    f.polyline(pts, color(name));
    f.legend(k, name, color(name));
    // Churn markers in a row of its own below the axis, in the router's colour.
    double row = f.h - f.bottom + 34 + 14 * static_cast<double>(k);
    f.svg << "<text x=\"" << f.left - 6 << "\" y=\"" << row + 4 << "\" text-anchor=\"end\" font-size=\"10\">"
          << name << "</text>\n";
    for (auto t : r.crash_times_s)
      f.svg << "<text x=\"" << f.x(t) << "\" y=\"" << row + 4 << "\" text-anchor=\"middle\" fill=\"" << color(name)
            << "\" font-size=\"11\">x</text>\n";
    for (auto t : r.join_times_s)
      f.svg << "<text x=\"" << f.x(t) << "\" y=\"" << row + 4 << "\" text-anchor=\"middle\" fill=\"" << color(name)
            << "\" font-size=\"13\">+</text>\n";
  }
  f.svg << "<text x=\"" << f.w - f.right + 15 << "\" y=\"" << f.top + 10 + 20 * static_cast<double>(results.size()) + 4
        << "\" font-size=\"10\">x crash/leave, + join</text>\n";
  return f.close();
}

std::string iteration_times_svg(const loaded_scenario& sc, const std::vector<sim_result>& results) {
  frame f;
  double xmax = 0;
  for (auto& r : results)
    for (auto t : r.iteration_s)
      xmax = std::max(xmax, t);
  f.xmax = nice_max(xmax * 1.02);
  f.ymax = 1;
  f.open("Iteration time distribution (CDF): " + scenario_title(sc), "iteration time (s)",
         "fraction of iterations");
  for (std::size_t k = 0; k < results.size(); ++k) {
    auto& r = results[k];
    auto name = std::string{to_string(r.router)};
    auto v = r.iteration_s;
    std::sort(v.begin(), v.end());
    std::vector<std::pair<double, double>> pts{{v.empty() ? 0 : v.front(), 0}};
    for (std::size_t i = 0; i < v.size(); ++i) {
      pts.emplace_back(v[i], static_cast<double>(i) / static_cast<double>(v.size()));
      pts.emplace_back(v[i], static_cast<double>(i + 1) / static_cast<double>(v.size()));
    }
    f.polyline(pts, color(name));
    f.legend(k, name + " (p50 " + fmt("%.1f", quantile(r.iteration_s, 0.5)) + " s)", color(name));
  }
  return f.close();
}

std::string write_sim_outputs(const fs::path& dir, const loaded_scenario& sc, const std::vector<sim_result>& results) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return "cannot create output directory '" + dir.string() + "': " + ec.message();
  auto rows = summarize(sc.sim, results);
  auto write = [&](const char* name, const std::string& text) -> std::string {
    std::ofstream out(dir / name);
    out << text;
    out.close();
    if (!out)
      return "cannot write '" + (dir / name).string() + "'";
    return {};
  };
  std::ostringstream summary;
  summary << "scenario,seed,router,completed,iterations,total_s,setup_s,microbatches_per_s,tokens_per_s,"
             "wasted_fraction,iteration_p50_s,iteration_p90_s,iteration_max_s,flows_first,flows_min,flows_last,"
             "vs_centralized,bound_microbatches_per_s,run_bound_microbatches_per_s,vs_bound,crashes,leaves,joins,degrades,"
             "moves\n";
  for (auto& r : rows)
    summary << sc.config.name << "," << sc.config.seed << "," << r.router << "," << (r.completed ? 1 : 0) << ","
            << r.iterations << "," << fmt("%.6g", r.total_s) << "," << fmt("%.6g", r.setup_s) << ","
            << fmt("%.6g", r.microbatches_per_s) << "," << fmt("%.6g", r.tokens_per_s) << ","
            << fmt("%.6g", r.wasted_fraction) << "," << fmt("%.6g", r.iteration_p50_s) << ","
            << fmt("%.6g", r.iteration_p90_s) << "," << fmt("%.6g", r.iteration_max_s) << "," << r.flows_first << ","
            << r.flows_min << "," << r.flows_last << "," << fmt("%.6g", r.vs_centralized) << ","
            << fmt("%.6g", r.bound_microbatches_per_s) << "," << fmt("%.6g", r.run_bound_microbatches_per_s) << ","
            << fmt("%.6g", r.vs_bound) << "," << r.crashes << "," << r.leaves << "," << r.joins << "," << r.degrades
            << "," << r.moves << "\n";
  std::ostringstream iters;
  iters << "router,iteration,start_s,end_s,duration_s,aggregation_s,flows\n";
  for (auto& r : results)
    for (std::size_t i = 0; i < r.iteration_s.size(); ++i)
      iters << to_string(r.router) << "," << i << "," << fmt("%.6g", r.iteration_end_s[i] - r.iteration_s[i]) << ","
            << fmt("%.6g", r.iteration_end_s[i]) << "," << fmt("%.6g", r.iteration_s[i]) << ","
            << fmt("%.6g", i < r.aggregation_s.size() ? r.aggregation_s[i] : 0.0) << ","
            << (i < r.flows.size() ? r.flows[i] : 0) << "\n";
  std::ostringstream json;
  json << "{\"scenario\":" << json_string(sc.config.name) << ",\"seed\":" << sc.config.seed
       << ",\"network\":" << json_string(sc.sim.net.name) << ",\"hosts\":" << sc.sim.hosts.size()
       << ",\"stages\":" << sc.sim.stages << ",\"iterations\":" << sc.sim.iterations
       << ",\"tokens_per_microbatch\":" << fmt("%.6g", sc.sim.tokens_per_microbatch)
       << ",\"placement\":" << json_string(to_string(sc.config.placement.policy))
       << ",\"compression\":" << json_string(sc.config.compression.mode == sim_compression_mode::adaptive ? "adaptive" : "off")
       << ",\"dtfm_cost_s\":" << (sc.dtfm ? fmt("%.6g", sc.dtfm->cost) : std::string{"null"}) << ",\"routers\":[";
  for (std::size_t k = 0; k < results.size(); ++k) {
    auto& r = results[k];
    auto& x = rows[k];
    json << (k ? "," : "") << "{\"router\":" << json_string(x.router) << ",\"completed\":" << (x.completed ? "true" : "false")
         << ",\"why\":" << json_string(x.why) << ",\"total_s\":" << fmt("%.6g", x.total_s)
         << ",\"setup_s\":" << fmt("%.6g", x.setup_s) << ",\"microbatches\":" << r.microbatches
         << ",\"microbatches_per_s\":" << fmt("%.6g", x.microbatches_per_s)
         << ",\"tokens_per_s\":" << fmt("%.6g", x.tokens_per_s) << ",\"compute_s\":" << fmt("%.6g", r.compute_s)
         << ",\"wasted_s\":" << fmt("%.6g", r.wasted_s) << ",\"wasted_fraction\":" << fmt("%.6g", x.wasted_fraction)
         << ",\"vs_centralized\":" << fmt("%.6g", x.vs_centralized)
         << ",\"bound_microbatches_per_s\":" << fmt("%.6g", x.bound_microbatches_per_s)
         << ",\"run_bound_microbatches_per_s\":" << fmt("%.6g", x.run_bound_microbatches_per_s)
         << ",\"vs_bound\":" << fmt("%.6g", x.vs_bound) << ",\"bound_iteration_s\":" << json_array(r.bound_iteration_s)
         << ",\"iteration_s\":" << json_array(r.iteration_s)
         << ",\"iteration_end_s\":" << json_array(r.iteration_end_s)
         << ",\"aggregation_s\":" << json_array(r.aggregation_s) << ",\"flows\":" << json_array(r.flows)
         << ",\"crash_times_s\":" << json_array(r.crash_times_s) << ",\"join_times_s\":" << json_array(r.join_times_s)
         << ",\"crashes\":" << r.crashes << ",\"leaves\":" << r.leaves << ",\"joins\":" << r.joins
         << ",\"degrades\":" << r.degrades << ",\"moves\":" << r.moves << ",\"fallback_hops\":" << r.fallback_hops << ",\"reroutes\":" << r.reroutes
         << ",\"deferred_moves\":" << r.deferred_moves
         << ",\"dense_transfers\":" << r.dense_transfers << ",\"sparse_transfers\":" << r.sparse_transfers
         << "}";
  }
  json << "]}\n";
  for (auto& [name, text] : std::vector<std::pair<const char*, std::string>>{
         {"summary.csv", summary.str()},
         {"iterations.csv", iters.str()},
         {"result.json", json.str()},
         {"throughput.svg", throughput_svg(sc, results)},
         {"iteration_times.svg", iteration_times_svg(sc, results)}})
    if (auto err = write(name, text); !err.empty())
      return err;
  return {};
}

} // namespace gwtf::app
