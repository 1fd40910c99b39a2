#include "actors/core/stage_restore.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace gwtf::actors {

bool decides_restore(const std::string& me, const std::vector<restore_host>& live) {
  bool holder = false;
  for (auto& h : live) {
    if (!h.data_holder)
      continue;
    if (h.name == me)
      holder = true;
    else if (h.name < me)
      return false;
  }
  return holder;
}

std::vector<std::uint32_t> lost_stages(int stages, const std::vector<restore_host>& live) {
  std::set<std::int32_t> served;
  for (auto& h : live)
    if (!h.data_holder)
      served.insert(h.stage);
  std::vector<std::uint32_t> out;
  for (int s = 1; s < stages; ++s)
    if (served.count(s) == 0)
      out.push_back(static_cast<std::uint32_t>(s));
  return out;
}

std::variant<std::uint64_t, std::string> newest_cut(int stages, const std::vector<restore_host>& live) {
  // Per stage, the iterations some live host keeps; the newest all stages share.
  std::vector<std::set<std::uint64_t>> held(static_cast<std::size_t>(stages));
  for (auto& h : live)
    for (auto& c : h.checkpoints)
      if (c.stage < static_cast<std::uint32_t>(stages))
        held[c.stage].insert(c.iteration);
  for (auto it = held[0].rbegin(); it != held[0].rend(); ++it) {
    bool everywhere = true;
    for (int s = 1; s < stages && everywhere; ++s)
      everywhere = held[static_cast<std::size_t>(s)].count(*it) > 0;
    if (everywhere)
      return *it;
  }
  for (int s = 0; s < stages; ++s)
    if (held[static_cast<std::size_t>(s)].empty())
      return "no live host keeps a checkpoint of stage " + std::to_string(s);
  return std::string{"no iteration of which every stage has a checkpoint on a live host"};
}

std::variant<wire::restore, std::string> plan_resume(int stages, const std::vector<std::string>& holders,
                                                     const std::string& me, const std::vector<restore_host>& live) {
  std::set<std::string> names;
  for (auto& h : live)
    names.insert(h.name);
  for (auto& h : holders)
    if (names.count(h) == 0)
      return "data holder " + h + " is not here yet";
  if (auto lost = lost_stages(stages, live); !lost.empty())
    return "no live host of stage " + std::to_string(lost.front()) + " yet";
  auto cut = newest_cut(stages, live);
  if (auto* why = std::get_if<std::string>(&cut))
    return *why;
  return wire::restore{0, std::get<std::uint64_t>(cut), "", -1, me};
}

bool holder_quorum(const std::vector<std::string>& roster, const std::vector<restore_host>& live) {
  if (roster.empty())
    return false;
  std::set<std::string> here;
  for (auto& h : live)
    if (h.data_holder)
      here.insert(h.name);
  std::size_t n = 0;
  for (auto& h : roster)
    n += here.count(h);
  auto lowest = *std::min_element(roster.begin(), roster.end());
  return 2 * n > roster.size() || (2 * n == roster.size() && here.count(lowest) > 0);
}

std::variant<wire::restore, std::string> plan_restore(int stages, std::uint32_t lost, const std::string& me,
                                                      const std::vector<restore_host>& live,
                                                      const std::vector<std::string>& roster) {
  auto name = "stage " + std::to_string(lost);
  if (lost < 1 || static_cast<int>(lost) >= stages)
    return name + " is not a relay stage of this model (1.." + std::to_string(stages - 1) + ")";
  for (auto& h : live)
    if (!h.data_holder && h.stage == static_cast<std::int32_t>(lost))
      return name + " is not lost: " + h.name + " serves it";
  if (!holder_quorum(roster, live)) {
    std::size_t n = 0;
    for (auto& h : live)
      n += h.data_holder && std::find(roster.begin(), roster.end(), h.name) != roster.end();
    return "this host sees " + std::to_string(n) + " of the " + std::to_string(roster.size())
           + " data holders, no quorum (a partition?): only the side with more than half of them (half "
             "with the lowest-named) restores a stage";
  }
  auto cut = newest_cut(stages, live);
  if (auto* why = std::get_if<std::string>(&cut))
    return *why + ": " + name + " cannot be restored";
  // The restorer: a relay without a stage (a joiner), else one of the stage with the most
  // live hosts, if it keeps at least one.
  std::map<std::int32_t, std::vector<std::string>> relays;
  for (auto& h : live)
    if (!h.data_holder)
      relays[h.stage].push_back(h.name);
  for (auto& [s, names] : relays)
    std::sort(names.begin(), names.end());
  std::string restorer;
  std::int32_t from = -1;
  if (auto free = relays.find(-1); free != relays.end() && !free->second.empty()) {
    restorer = free->second.front();
  } else {
    std::size_t most = 1;
    for (auto& [s, names] : relays) // ascending stage: a tie keeps the lower stage
      if (s >= 1 && names.size() > most) {
        most = names.size();
        from = s;
        restorer = names.front();
      }
  }
  if (restorer.empty())
    return "no relay to spare for " + name + ": no relay without a stage and no stage with two live relays";
  return wire::restore{lost, std::get<std::uint64_t>(cut), restorer, from, me};
}

std::optional<std::string> check_restore(const wire::restore& r, int stages, const std::string& me,
                                         std::int32_t my_stage, bool awaiting_cut) {
  if (r.stage == 0) // a resume order: for hosts started with plain --resume, waiting for it
    return awaiting_cut ? std::nullopt
                        : std::optional<std::string>{"this host is not waiting for the cluster's cut to resume at"};
  if (awaiting_cut)
    return "this host is waiting for the cluster's cut to resume at, not training";
  if (static_cast<int>(r.stage) >= stages)
    return "stage " + std::to_string(r.stage) + " is not a relay stage of this model (1.." + std::to_string(stages - 1)
           + ")";
  if (r.from_stage >= stages)
    return "the restorer's stage " + std::to_string(r.from_stage) + " is not a stage of this model";
  if (r.restorer == me) {
    if (my_stage != r.from_stage)
      return "it names this host as the restorer from stage " + std::to_string(r.from_stage) + ", but this host is at "
             + (my_stage < 0 ? std::string{"no stage"} : "stage " + std::to_string(my_stage));
  } else if (my_stage == static_cast<std::int32_t>(r.stage)) {
    return "this host serves stage " + std::to_string(r.stage) + ", which it calls lost";
  }
  return std::nullopt;
}

} // namespace gwtf::actors
