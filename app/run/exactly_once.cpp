#include "app/run/exactly_once.hpp"

#include <algorithm>

#include "actors/core/key_digest.hpp"
#include "model/data.hpp"

namespace gwtf::app {

bool reports_settled(const stage_counts& c, const std::set<std::string>& live) {
  for (std::size_t k = 0; k < c.contributors.size(); ++k) {
    auto& who = c.contributors[k];
    if (live.count(who) == 0)
      continue;
    auto r = c.reports.find(who);
    if (r == c.reports.end())
      return false;
    if (k < c.digests.size() && actors::key_digest(r->second) != c.digests[k])
      return false;
  }
  return true;
}

std::vector<std::string> exactly_once_violations(std::uint64_t iteration, const std::vector<std::string>& holders,
                                                 const std::map<std::string, std::uint32_t>& finished,
                                                 const std::set<std::string>& lived,
                                                 const std::map<std::uint32_t, stage_counts>& stages) {
  // Per stage: how often each key was counted by the averaged replicas.
  std::map<std::uint32_t, std::map<std::uint64_t, int>> seen;
  std::set<std::uint64_t> anywhere;
  // A stage whose averaged contributor's report never came (it was killed right after
  // sharing, its report still in its process) can only be checked for double counts: what it
  // counted is not all known here. The stage's own check (node mode's digests) covers it.
  std::set<std::uint32_t> partly_known;
  for (auto& [stage, c] : stages) {
    auto& keys = seen[stage];
    for (auto& who : c.contributors) {
      auto r = c.reports.find(who);
      if (r == c.reports.end()) {
        partly_known.insert(stage);
        continue;
      }
      for (auto k : r->second) {
        ++keys[k];
        anywhere.insert(k);
      }
    }
  }
  std::vector<std::string> out;
  for (auto& [stage, keys] : seen) {
    int missing = 0, twice = 0, elsewhere = 0;
    for (auto& [k, n] : keys)
      twice += n > 1;
    if (partly_known.count(stage) > 0) {
      if (twice > 0)
        out.push_back("stage " + std::to_string(stage) + " iteration " + std::to_string(iteration) + ": 0 missing, "
                      + std::to_string(twice) + " counted twice");
      continue;
    }
    for (auto k : anywhere)
      elsewhere += keys.count(k) == 0;
    for (std::uint32_t h = 0; h < holders.size(); ++h) {
      auto rep = finished.find(holders[h]);
      if (rep == finished.end() || lived.count(holders[h]) == 0)
        continue;
      for (std::uint32_t j = 0; j < rep->second; ++j) {
        auto key = model::microbatch_id{iteration, h, j}.key();
        missing += keys.count(key) == 0 && anywhere.count(key) == 0; // else counted as elsewhere
      }
    }
    if (missing == 0 && twice == 0 && elsewhere == 0)
      continue;
    std::string line = "stage " + std::to_string(stage) + " iteration " + std::to_string(iteration) + ": "
                       + std::to_string(missing) + " missing, " + std::to_string(twice) + " counted twice";
    if (elsewhere > 0)
      line += ", " + std::to_string(elsewhere) + " counted by another stage but not here";
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> atom_exactly_once_violations(std::uint64_t first, std::uint64_t end,
                                                      const std::vector<std::string>& holders, int per_iteration,
                                                      const stage_counts& round, const std::set<std::string>& lived) {
  std::vector<std::string> out;
  auto where = "atom round [" + std::to_string(first) + ", " + std::to_string(end) + "): ";
  for (auto& who : round.contributors) {
    auto at = std::find(holders.begin(), holders.end(), who);
    auto r = round.reports.find(who);
    if (at == holders.end() || r == round.reports.end())
      continue;
    auto index = static_cast<std::uint32_t>(at - holders.begin());
    std::map<std::uint64_t, std::set<std::uint32_t>> per; // iteration -> indices
    std::string wrong;
    for (auto key : r->second) {
      model::microbatch_id id{key >> 24, static_cast<std::uint32_t>(key >> 12 & 0xfff),
                              static_cast<std::uint32_t>(key & 0xfff)};
      if (id.holder != index)
        wrong = "a microbatch of data holder " + std::to_string(id.holder);
      else if (id.iteration < first || id.iteration >= end)
        wrong = "a microbatch of iteration " + std::to_string(id.iteration);
      else if (id.index >= static_cast<std::uint32_t>(per_iteration) || !per[id.iteration].insert(id.index).second)
        wrong = "microbatch " + std::to_string(id.index) + " of iteration " + std::to_string(id.iteration) + " twice";
      if (!wrong.empty())
        break;
    }
    for (auto& [i, indices] : per)
      if (wrong.empty() && indices.size() != static_cast<std::size_t>(per_iteration))
        wrong = std::to_string(indices.size()) + " of iteration " + std::to_string(i) + "'s " + std::to_string(per_iteration)
                + " microbatches";
    if (!wrong.empty())
      out.push_back(where + who + "'s parameters count " + wrong);
  }
  for (auto& who : lived)
    if (std::find(round.contributors.begin(), round.contributors.end(), who) == round.contributors.end())
      out.push_back(where + who + " landed it but its microbatches are not in the average");
  return out;
}

} // namespace gwtf::app
