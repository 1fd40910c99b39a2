#include "deploy/exactly_once.hpp"

#include "model/data.hpp"

namespace gwtf::deploy {

std::optional<std::string> exactly_once_violation(std::uint32_t stage, std::uint64_t iteration,
                                                  const std::vector<std::string>& holders,
                                                  const std::map<std::string, std::uint32_t>& finished,
                                                  const std::vector<std::string>& contributors,
                                                  const share_reports& reports) {
  std::map<std::uint64_t, int> seen;
  for (auto& who : contributors)
    if (auto r = reports.find(who); r != reports.end())
      for (auto k : r->second)
        ++seen[k];
  int missing = 0, twice = 0;
  for (std::uint32_t h = 0; h < holders.size(); ++h) {
    auto rep = finished.find(holders[h]);
    if (rep == finished.end())
      continue;
    for (std::uint32_t j = 0; j < rep->second; ++j) {
      auto it = seen.find(model::microbatch_id{iteration, h, j}.key());
      int n = it == seen.end() ? 0 : it->second;
      missing += n == 0;
      twice += n > 1;
    }
  }
  if (missing == 0 && twice == 0)
    return std::nullopt;
  return "stage " + std::to_string(stage) + " iteration " + std::to_string(iteration) + ": "
         + std::to_string(missing) + " missing, " + std::to_string(twice) + " counted twice";
}

} // namespace gwtf::deploy
