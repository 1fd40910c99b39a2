// The churn trace of a scenario: crashes, leaves and joins drawn from the seed before routing
// starts, plus the scripted events.
#include "sim/simulator.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "common/seeded.hpp"

namespace gwtf::sim {

void degrade_links(network_matrix& net, const sim_event& e) {
  auto scale = [&](std::size_t a, std::size_t b) {
    if (a != b) {
      net.bandwidth_mbps[a][b] *= e.factor;
      return;
    }
    if (net.intra_by_region.empty()) // only this region's own links degrade
      net.intra_by_region.assign(net.regions.size(), net.intra_region);
    net.intra_by_region[a].bandwidth_mbps *= e.factor;
  };
  scale(e.region_a, e.region_b);
  if (e.region_a != e.region_b)
    scale(e.region_b, e.region_a);
}

std::vector<sim_event> churn_trace(const sim_scenario& s) {
  std::vector<sim_event> out;
  auto stages = static_cast<std::size_t>(std::max(s.stages, 1));
  std::vector<int> live(stages, 0);
  std::vector<double> rate(stages, 0.0); // live microbatches/s per stage: where joiners go
  std::vector<sim_host> hosts = s.hosts; // then the joiners, as they come
  std::vector<bool> alive(hosts.size(), true);
  std::vector<std::size_t> initial_relays;
  std::set<std::size_t> regions_used;
  auto add = [&](const sim_host& h, int sign) {
    if (h.stage > 0 && h.stage < s.stages) {
      live[static_cast<std::size_t>(h.stage)] += sign;
      rate[static_cast<std::size_t>(h.stage)] += sign / std::max(h.compute_s, 1e-9);
    }
  };
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    add(hosts[h], 1);
    if (hosts[h].stage > 0)
      initial_relays.push_back(h);
    regions_used.insert(hosts[h].region);
  }
  std::vector<std::size_t> regions(regions_used.begin(), regions_used.end());
  int joined = 0;
  for (int i = 0; i < s.iterations; ++i) {
    auto it = static_cast<std::uint64_t>(i);
    // Candidates of this iteration: the script's and the drawn ones, applied in time order
    // so that the last-relay rule and the joiners' placement see the cluster of that moment.
    std::vector<std::pair<sim_event, bool>> cand; // event, scripted
    for (auto& e : s.script)
      if (e.iteration == i)
        cand.emplace_back(e, true);
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      if (!alive[h] || hosts[h].stage <= 0)
        continue;
      double u = seeded_unit(s.seed, it, h);
      sim_event e;
      if (u < s.crash_rate)
        e.kind = sim_event_kind::crash;
      else if (u < s.crash_rate + s.leave_rate)
        e.kind = sim_event_kind::leave;
      else
        continue;
      e.iteration = i;
      e.at_fraction = seeded_unit(s.seed ^ 0x5bd1e995ULL, it, h);
      e.host = h;
      cand.emplace_back(e, false);
    }
    if (s.join_rate > 0 && !initial_relays.empty())
      for (std::size_t k = 0; k < initial_relays.size(); ++k) {
        if (seeded_unit(s.seed ^ 0x27d4eb2fULL, it, k) >= s.join_rate)
          continue;
        auto like = initial_relays[mix64(s.seed ^ mix64(it * 7919 + k)) % initial_relays.size()];
        sim_event e;
        e.kind = sim_event_kind::join;
        e.iteration = i;
        e.at_fraction = seeded_unit(s.seed ^ 0x165667b1ULL, it, k);
        e.joiner = s.hosts[like];
        e.joiner.name = s.hosts[like].name + "+j" + std::to_string(++joined);
        e.joiner.stage = -1;
        cand.emplace_back(e, false);
      }
    if (s.degrade_rate > 0 && seeded_unit(s.seed ^ 0x85ebca6bULL, it, 0) < s.degrade_rate) {
      sim_event e;
      e.kind = sim_event_kind::degrade;
      e.iteration = i;
      e.at_fraction = seeded_unit(s.seed ^ 0xc2b2ae35ULL, it, 0);
      e.region_a = regions[mix64(s.seed ^ mix64(it * 31 + 1)) % regions.size()];
      e.region_b = regions[mix64(s.seed ^ mix64(it * 31 + 2)) % regions.size()];
      e.factor = s.degrade_factor;
      cand.push_back({e, false});
    }
    std::stable_sort(cand.begin(), cand.end(),
                     [](const auto& a, const auto& b) { return a.first.at_fraction < b.first.at_fraction; });
    for (auto& [e, scripted] : cand) {
      switch (e.kind) {
        case sim_event_kind::crash:
        case sim_event_kind::leave: {
          if (e.host >= hosts.size() || !alive[e.host])
            continue; // the script's bad hosts are reported by simulate()
          auto st = hosts[e.host].stage;
          if (!scripted && (st <= 0 || st >= s.stages || live[static_cast<std::size_t>(st)] <= 1))
            continue; // drawn churn keeps one live relay per stage
          alive[e.host] = false;
          add(hosts[e.host], -1);
          break;
        }
        case sim_event_kind::join: {
          if (e.joiner.stage <= 0 || e.joiner.stage >= s.stages) {
            // The bottleneck stage: the lowest live throughput (ties: the lower stage).
            int best = 1;
            for (int st = 2; st < s.stages; ++st)
              if (rate[static_cast<std::size_t>(st)] < rate[static_cast<std::size_t>(best)])
                best = st;
            e.joiner.stage = best;
          }
          e.host = hosts.size();
          hosts.push_back(e.joiner);
          alive.push_back(true);
          add(e.joiner, 1);
          break;
        }
        case sim_event_kind::degrade:
          break;
      }
      out.push_back(e);
    }
  }
  return out;
}

} // namespace gwtf::sim
