#include "deploy/run_report.hpp"

#include <algorithm>

#include "deploy/svg_plot.hpp"

namespace gwtf::deploy {

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

} // namespace gwtf::deploy
