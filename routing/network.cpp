#include "routing/network.hpp"

#include <cmath>
#include <set>

namespace gwtf::routing {

namespace {

std::string at(const char* key, std::size_t i, std::size_t j) {
  return std::string{key} + "[" + std::to_string(i) + "][" + std::to_string(j) + "]";
}

// Checks one n x n matrix; `positive_off_diagonal` demands > 0 off the diagonal.
void check_matrix(const issue_sink& report, const char* key,
                  const std::vector<std::vector<double>>& m, std::size_t n,
                  bool positive_off_diagonal, const char* what) {
  if (m.size() != n) {
    report(key, "a " + std::to_string(n) + " x " + std::to_string(n)
                  + " matrix (one row per region), got " + std::to_string(m.size()) + " rows");
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (m[i].size() != n) {
      report(std::string{key} + "[" + std::to_string(i) + "]",
             "a row of " + std::to_string(n) + " values (one per region), got "
               + std::to_string(m[i].size()));
      continue;
    }
    for (std::size_t j = 0; j < n; ++j) {
      double v = m[i][j];
      bool ok = std::isfinite(v) && v >= 0 && (i == j || !positive_off_diagonal || v > 0);
      if (!ok)
        report(at(key, i, j), std::string{what} + ", got " + format_number(v));
    }
  }
}

} // namespace

void link_params::validate(const issue_sink& report) const {
  check_real(report, "latency_ms", latency_ms, 0, bound::closed, 1e6, bound::closed,
             "a one-way latency in ms");
  check_real(report, "bandwidth_mbps", bandwidth_mbps, 0, bound::open, 1e9, bound::closed,
             "a bandwidth in Mbit/s");
}

void network_matrix::validate(const issue_sink& report) const {
  if (regions.empty())
    report("regions", "a non-empty list of region names");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    if (regions[i].empty())
      report("regions[" + std::to_string(i) + "]", "a non-empty region name");
    else if (!seen.insert(regions[i]).second)
      report("regions[" + std::to_string(i) + "]", "a region name used once, got '" + regions[i]
                                                     + "' twice");
  }
  intra_region.validate(nested_sink(report, "intra_region"));
  check_matrix(report, "latency_ms", latency_ms, regions.size(), false,
               "a non-negative one-way latency in ms");
  check_matrix(report, "bandwidth_mbps", bandwidth_mbps, regions.size(), true,
               "a positive bandwidth in Mbit/s");
}

std::optional<std::size_t> network_matrix::region_index(const std::string& region) const {
  for (std::size_t i = 0; i < regions.size(); ++i)
    if (regions[i] == region)
      return i;
  return std::nullopt;
}

link_params network_matrix::link(std::size_t from, std::size_t to) const {
  if (from == to)
    return from < intra_by_region.size() ? intra_by_region[from] : intra_region;
  return link_params{latency_ms.at(from).at(to), bandwidth_mbps.at(from).at(to)};
}

} // namespace gwtf::routing
