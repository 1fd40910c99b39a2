#include "app/run/compare_report.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "app/quantile.hpp"
#include "app/svg_plot.hpp"

namespace gwtf::app {

namespace {

std::vector<double> steady_seconds(const compare_run& r) {
  std::vector<double> out;
  for (auto& row : r.rows)
    if (row.iteration >= 1)
      out.push_back(row.seconds);
  return out;
}

const char* colour_of(std::size_t router) {
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  return colours[router % 4];
}

std::vector<std::string> routers_of(const std::vector<compare_run>& runs) {
  std::vector<std::string> out;
  for (auto& r : runs)
    if (std::find(out.begin(), out.end(), r.router) == out.end())
      out.push_back(r.router);
  return out;
}

// One line per run (x, y from `point`), coloured by router, one legend entry per router.
template <class F>
std::string run_plot(const std::vector<compare_run>& runs, const std::string& title, const std::string& xlabel,
                     const std::string& ylabel, F point) {
  plot::frame f;
  double xmax = 0, ymax = 0;
  std::vector<std::vector<std::pair<double, double>>> lines;
  for (auto& r : runs) {
    lines.push_back(point(r));
    for (auto& [x, y] : lines.back()) {
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  }
  f.xmax = plot::nice_max(xmax);
  f.ymax = plot::nice_max(ymax);
  f.open(title, xlabel, ylabel);
  auto routers = routers_of(runs);
  for (std::size_t k = 0; k < runs.size(); ++k) {
    auto at = static_cast<std::size_t>(std::find(routers.begin(), routers.end(), runs[k].router) - routers.begin());
    f.polyline(lines[k], colour_of(at));
  }
  for (std::size_t k = 0; k < routers.size(); ++k)
    f.legend(k, routers[k], colour_of(k));
  return f.close();
}

} // namespace

compare_run compare_run_of(const std::string& router, std::uint64_t seed, const embedded_result& r) {
  compare_run out;
  out.router = router;
  out.seed = seed;
  out.completed = r.completed;
  out.rows = r.rows;
  out.crashes = r.crashes;
  out.compute_s = r.compute_s;
  out.wasted_s = r.wasted_s;
  out.violations = r.exactly_once_violations.size();
  out.disagreements = r.replica_disagreements.size();
  return out;
}

compare_stats stats_of(const compare_run& r) {
  compare_stats s;
  double tokens = 0;
  for (auto& row : r.rows)
    if (row.iteration >= 1) {
      s.train_s += row.seconds;
      tokens += row.tokens_per_s * row.seconds;
    }
  s.tokens_per_s = s.train_s > 0 ? tokens / s.train_s : 0;
  double averaging = 0;
  for (std::size_t k = 1; k < r.rows.size(); ++k)
    if (r.rows[k].iteration >= 1)
      averaging += r.rows[k - 1].aggregation_s;
  s.averaging_fraction = s.train_s > 0 ? averaging / s.train_s : 0;
  auto secs = steady_seconds(r);
  s.p50_s = quantile(secs, 0.5);
  s.p90_s = quantile(secs, 0.9);
  s.wasted_fraction = r.compute_s > 0 ? r.wasted_s / r.compute_s : 0;
  s.final_loss = r.rows.empty() ? 0 : r.rows.back().loss;
  return s;
}

namespace {
// The mean loss of rows [end - loss_window, end) (fewer at the start).
double trailing_loss(const std::vector<iteration_row>& rows, std::size_t end) {
  auto begin = end > loss_window ? end - loss_window : 0;
  double sum = 0;
  for (auto k = begin; k < end; ++k)
    sum += rows[k].loss;
  return end > begin ? sum / static_cast<double>(end - begin) : 0;
}
} // namespace

double common_loss(const std::vector<compare_run>& runs, std::uint64_t seed) {
  double out = 0;
  for (auto& r : runs)
    if (r.seed == seed && !r.rows.empty())
      out = std::max(out, trailing_loss(r.rows, r.rows.size()));
  return out;
}

double seconds_to_loss(const compare_run& r, double target) {
  double t = 0;
  for (std::size_t k = 0; k < r.rows.size(); ++k) {
    if (r.rows[k].iteration >= 1)
      t += r.rows[k].seconds;
    if (trailing_loss(r.rows, k + 1) <= target)
      return t;
  }
  return -1;
}

std::vector<router_summary> summarize(const std::vector<compare_run>& runs) {
  std::vector<router_summary> out;
  for (auto& name : routers_of(runs)) {
    router_summary s;
    s.router = name;
    std::vector<double> secs;
    double compute = 0, wasted = 0;
    for (auto& r : runs) {
      if (r.router != name)
        continue;
      auto st = stats_of(r);
      ++s.runs;
      s.completed += r.completed ? 1 : 0;
      s.tokens_per_s += st.tokens_per_s;
      s.final_loss += st.final_loss;
      s.averaging_fraction += st.averaging_fraction;
      s.to_loss_s += seconds_to_loss(r, common_loss(runs, r.seed));
      s.crashes += r.crashes;
      compute += r.compute_s;
      wasted += r.wasted_s;
      s.violations += r.violations;
      s.disagreements += r.disagreements;
      auto mine = steady_seconds(r);
      secs.insert(secs.end(), mine.begin(), mine.end());
    }
    s.tokens_per_s /= s.runs;
    s.final_loss /= s.runs;
    s.averaging_fraction /= s.runs;
    s.to_loss_s /= s.runs;
    s.crashes /= s.runs;
    s.wasted_fraction = compute > 0 ? wasted / compute : 0;
    s.p50_s = quantile(secs, 0.5);
    s.p90_s = quantile(secs, 0.9);
    out.push_back(s);
  }
  return out;
}

std::string compare_table(const std::vector<router_summary>& s) {
  std::ostringstream o;
  o << std::left << std::setw(8) << "router" << std::right << std::setw(6) << "runs" << std::setw(11) << "tokens/s"
    << std::setw(10) << "p50 s" << std::setw(10) << "p90 s" << std::setw(11) << "averaging" << std::setw(10)
    << "wasted" << std::setw(9) << "crashes" << std::setw(12) << "final loss" << std::setw(11) << "to loss s"
    << std::setw(12) << "violations" << "\n";
  for (auto& r : s)
    o << std::left << std::setw(8) << r.router << std::right << std::setw(6)
      << (std::to_string(r.completed) + "/" + std::to_string(r.runs)) << std::fixed << std::setprecision(0)
      << std::setw(11) << r.tokens_per_s << std::setprecision(3) << std::setw(10) << r.p50_s << std::setw(10)
      << r.p90_s << std::setprecision(1) << std::setw(10) << 100 * r.averaging_fraction << "%" << std::setprecision(2)
      << std::setw(9) << 100 * r.wasted_fraction << "%" << std::setprecision(1)
      << std::setw(9) << r.crashes << std::setprecision(4) << std::setw(12) << r.final_loss << std::setprecision(1)
      << std::setw(11) << r.to_loss_s << std::setw(12) << r.violations + r.disagreements << "\n";
  o << "to loss s: wall seconds (iterations 1..) until the mean loss of " << loss_window
    << " iterations first is at most the highest any run of the seed ended at (mean of its last " << loss_window
    << ")\n";
  for (std::size_t k = 1; k < s.size(); ++k) {
    auto& a = s[0];
    auto& b = s[k];
    o << std::setprecision(2) << a.router << " / " << b.router << ": tokens/s "
      << (b.tokens_per_s > 0 ? a.tokens_per_s / b.tokens_per_s : 0) << "x, p50 iteration time "
      << (b.p50_s > 0 ? a.p50_s / b.p50_s : 0) << "x, final loss " << std::setprecision(4)
      << (b.final_loss > 0 ? a.final_loss / b.final_loss : 0) << "x, time to loss " << std::setprecision(2)
      << (b.to_loss_s > 0 ? a.to_loss_s / b.to_loss_s : 0) << "x\n";
  }
  return o.str();
}

std::string compare_csv(const std::vector<compare_run>& runs) {
  std::ostringstream o;
  o << "router,seed,completed,iterations,train_s,tokens_per_s,iteration_p50_s,iteration_p90_s,wasted_fraction,"
       "crashes,final_loss,exactly_once_violations,replica_disagreements,averaging_fraction,seconds_to_common_loss\n";
  o << std::setprecision(9);
  for (auto& r : runs) {
    auto s = stats_of(r);
    o << r.router << "," << r.seed << "," << (r.completed ? 1 : 0) << "," << r.rows.size() << "," << s.train_s
      << "," << s.tokens_per_s << "," << s.p50_s << "," << s.p90_s << "," << s.wasted_fraction << "," << r.crashes
      << "," << s.final_loss << "," << r.violations << "," << r.disagreements << "," << s.averaging_fraction << ","
      << seconds_to_loss(r, common_loss(runs, r.seed)) << "\n";
  }
  return o.str();
}

std::string compare_loss_svg(const std::vector<compare_run>& runs, const std::string& title) {
  return run_plot(runs, title, "wall time (s)", "loss", [](const compare_run& r) {
    std::vector<std::pair<double, double>> pts;
    double t = 0;
    for (auto& row : r.rows) {
      t += row.seconds;
      pts.emplace_back(t, row.loss);
    }
    return pts;
  });
}

std::string compare_throughput_svg(const std::vector<compare_run>& runs, const std::string& title) {
  return run_plot(runs, title, "iteration", "tokens/s", [](const compare_run& r) {
    std::vector<std::pair<double, double>> pts;
    for (auto& row : r.rows)
      pts.emplace_back(static_cast<double>(row.iteration), row.tokens_per_s);
    return pts;
  });
}

} // namespace gwtf::app
