#include "app/run/recovery.hpp"
#include "app/config/derive.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace gwtf::app {

std::variant<recovery_plan, std::string> plan_recovery(const cluster_config& cfg, const embedded_result& run) {
  int lost = run.lost_stage;
  if (lost <= 0 || lost >= cfg.model.stages)
    return std::string{"no relay stage was lost"};
  recovery_plan plan;
  plan.cfg = cfg;
  auto& hosts = plan.cfg.hosts;
  hosts.erase(std::remove_if(hosts.begin(), hosts.end(), [&](auto& h) { return run.gone.count(h.name) > 0; }),
              hosts.end());
  auto& script = plan.cfg.faults.script;
  script.erase(std::remove_if(script.begin(), script.end(),
                              [&](auto& f) {
                                return static_cast<std::uint64_t>(f.at_iteration) <= run.faults_through
                                       || run.gone.count(f.host) > 0 || run.gone.count(f.peer) > 0;
                              }),
               script.end());
  // Who is live when the next run starts: every remaining host but those still to join.
  auto joins_later = [&](const std::string& name) {
    return std::any_of(script.begin(), script.end(), [&](auto& f) {
      return f.action == actors::fault_action::join && f.host == name && f.at_iteration > 0;
    });
  };
  auto placed = placed_hosts(plan.cfg);
  std::map<int, std::vector<std::string>> by_stage; // relay stage -> live relays, by name
  for (auto& h : placed)
    if (h.role == actors::host_role::relay && !joins_later(h.name))
      by_stage[h.stage].push_back(h.name);
  if (!by_stage[lost].empty()) {
    // A joiner of the lost stage was still downloading when its last replica went: it
    // restores the stage from the checkpoints itself; nobody moves.
    auto names = by_stage[lost];
    std::sort(names.begin(), names.end());
    plan.mover = names.front();
    plan.from_stage = lost;
    return plan;
  }
  int from = 0;
  std::size_t most = 1;
  for (auto& [stage, names] : by_stage)
    if (stage != lost && names.size() > most) {
      most = names.size();
      from = stage;
    }
  if (from == 0)
    return std::string{"no stage has a relay to spare (every live relay stage has one replica)"};
  auto names = by_stage[from];
  std::sort(names.begin(), names.end());
  plan.mover = names.front();
  plan.from_stage = from;
  for (auto& h : hosts)
    if (h.name == plan.mover)
      h.stage = lost;
  return plan;
}

embedded_result merge_runs(embedded_result first, embedded_result second, std::uint64_t resumed_at) {
  embedded_result out = std::move(second);
  std::vector<iteration_row> rows;
  for (auto& r : first.rows)
    if (r.iteration >= 0 && static_cast<std::uint64_t>(r.iteration) < resumed_at)
      rows.push_back(r);
  for (auto r : out.rows) {
    r.crashes += first.crashes; // "so far" counts the first run's too
    rows.push_back(r);
  }
  out.rows = std::move(rows);
  out.crashes += first.crashes;
  out.joins += first.joins;
  out.restarts += first.restarts;
  out.departures += first.departures;
  out.compute_s += first.compute_s;
  out.wasted_s += first.wasted_s;
  for (auto& [i, secs] : first.live_compute)
    if (i >= resumed_at)
      out.wasted_s += secs; // rolled back: computed again in the second run
  out.wall_s += first.wall_s;
  auto append = [](auto& to, auto& from) { to.insert(to.begin(), from.begin(), from.end()); };
  append(out.exactly_once_violations, first.exactly_once_violations);
  append(out.replica_disagreements, first.replica_disagreements);
  append(out.failures, first.failures);
  append(out.joined, first.joined);
  for (auto& [host, n] : first.carried)
    out.carried[host] += n;
  out.checkpoints += first.checkpoints;
  out.checkpoint_replicas += first.checkpoint_replicas;
  out.checkpoint_ms += first.checkpoint_ms;
  out.gone.insert(first.gone.begin(), first.gone.end());
  out.recoveries += first.recoveries + 1;
  out.reloads += first.reloads;
  return out;
}

} // namespace gwtf::app
