#include "app/run/run_report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <spawn.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "app/svg_plot.hpp"

extern char** environ;

namespace gwtf::app {

namespace {

std::string line_plot(const std::vector<iteration_row>& rows, const std::string& title, const std::string& ylabel,
                 double (*value)(const iteration_row&)) {
  plot::frame f;
  double xmax = 1, ymax = 0;
  for (auto& r : rows) {
    xmax = std::max(xmax, static_cast<double>(r.iteration));
    ymax = std::max(ymax, value(r));
  }
  f.xmax = plot::nice_max(xmax);
  f.ymax = plot::nice_max(ymax);
  f.open(title, "iteration", ylabel);
  int crashes = 0;
  bool marked = false;
  for (auto& r : rows) {
    if (r.crashes > crashes) {
      auto x = f.x(static_cast<double>(r.iteration));
      f.svg << "<line x1=\"" << x << "\" y1=\"" << f.y(0) << "\" x2=\"" << x << "\" y2=\"" << f.y(f.ymax)
            << "\" stroke=\"#d62728\" stroke-dasharray=\"4,3\"/>\n";
      marked = true;
    }
    crashes = std::max(crashes, r.crashes);
  }
  std::vector<std::pair<double, double>> pts;
  for (auto& r : rows)
    pts.emplace_back(static_cast<double>(r.iteration), value(r));
  f.polyline(pts, "#1f77b4");
  f.legend(0, ylabel, "#1f77b4");
  if (marked)
    f.legend(1, "crash", "#d62728");
  return f.close();
}

} // namespace

std::string loss_svg(const std::vector<iteration_row>& rows, const std::string& title) {
  return line_plot(rows, title, "loss", [](const iteration_row& r) { return r.loss; });
}

std::string throughput_svg(const std::vector<iteration_row>& rows, const std::string& title) {
  return line_plot(rows, title, "tokens/s", [](const iteration_row& r) { return r.tokens_per_s; });
}

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

} // namespace

std::string flows_dot(const std::map<std::string, std::string>& flows, const std::string& title) {
  using json = nlohmann::json;
  static const char* palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::map<int, std::set<std::string>> by_stage; // -1: unknown
  std::map<std::string, int> stage_of;
  struct edge {
    int flows = 0;
    double cost_sum = 0;
    int costed = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, edge> edges; // (from, to, holder)
  std::set<std::string> holders, unreadable;
  for (auto& [host, text] : flows) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("flows") || !j["flows"].is_array()) {
      unreadable.insert(host);
      by_stage[-1].insert(host);
      continue;
    }
    int stage = j.contains("stage") && j["stage"].is_number_integer() ? j["stage"].get<int>() : -1;
    stage_of[host] = stage;
    by_stage[stage].insert(host);
    for (auto& f : j["flows"]) {
      if (!f.is_object() || !f.value("built", false))
        continue; // half-built flows carry nothing yet
      auto next = f.contains("next") && f["next"].is_string() ? f["next"].get<std::string>() : std::string{};
      auto holder = f.contains("holder") && f["holder"].is_string() ? f["holder"].get<std::string>() : std::string{};
      if (next.empty() || holder.empty())
        continue;
      holders.insert(holder);
      auto& e = edges[{host, next, holder}];
      ++e.flows;
      if (f.contains("ring_cost_s") && f["ring_cost_s"].is_number()) {
        e.cost_sum += f["ring_cost_s"].get<double>();
        ++e.costed;
      }
    }
  }
  std::map<std::string, std::string> colour;
  std::size_t k = 0;
  for (auto& h : holders)
    colour[h] = palette[k++ % (sizeof palette / sizeof palette[0])];
  std::ostringstream dot;
  dot << "digraph flows {\n  label=" << quoted(title) << ";\n  labelloc=t;\n  rankdir=LR;\n"
      << "  node [shape=box, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n";
  for (auto& h : unreadable)
    dot << "  // " << h << ": its flows could not be read\n";
  for (auto& [stage, hosts] : by_stage) {
    dot << "  subgraph " << quoted(stage < 0 ? "cluster_unknown" : "cluster_stage_" + std::to_string(stage)) << " {\n"
        << "    label=" << quoted(stage < 0 ? "stage unknown" : stage == 0 ? "data holders" : "stage " + std::to_string(stage))
        << ";\n    style=dashed;\n";
    for (auto& h : hosts)
      dot << "    " << quoted(h) << (stage == 0 ? " [style=filled, fillcolor=\"#eeeeee\"]" : "") << ";\n";
    dot << "  }\n";
  }
  for (auto& [key, e] : edges) {
    auto& [from, to, holder] = key;
    std::string label = holder + " x" + std::to_string(e.flows);
    if (e.costed > 0) {
      char buf[48];
      std::snprintf(buf, sizeof buf, ", ring %.3f s", e.cost_sum / e.costed);
      label += buf;
    }
    dot << "  " << quoted(from) << " -> " << quoted(to) << " [label=" << quoted(label) << ", color=\""
        << colour[holder] << "\", penwidth=" << std::min(1 + e.flows, 6) << "];\n";
  }
  dot << "}\n";
  return dot.str();
}

std::vector<std::string> write_flow_graph(const std::string& dot, const std::string& path) {
  std::vector<std::string> lines;
  {
    std::ofstream f{path + ".dot"};
    f << dot;
    if (!f) {
      lines.push_back("could not write " + path + ".dot");
      return lines;
    }
  }
  lines.push_back("flow graph: " + path + ".dot");
  // Rendered when Graphviz is installed: `dot` from the PATH, no shell in between.
  std::string in = path + ".dot", out = "-o" + path + ".svg";
  const char* argv[] = {"dot", "-Tsvg", in.c_str(), out.c_str(), nullptr};
  pid_t pid = 0;
  if (::posix_spawnp(&pid, "dot", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
    lines.push_back("flow graph: Graphviz's dot is not installed: no " + path + ".svg (apt install graphviz)");
    return lines;
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    lines.push_back("flow graph: " + path + ".svg");
  else
    lines.push_back("flow graph: dot could not render " + path + ".dot");
  return lines;
}

} // namespace gwtf::app
