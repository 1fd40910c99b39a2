// The simulator's centralized router.
#include "sim/engine.hpp"

namespace gwtf::sim {

// The centralized router: global knowledge, rings rebuilt at every change it can observe.
class engine::centralized_router final : public engine::router {
public:
  using router::router;
  sim_router kind() const override { return sim_router::centralized; }
  bool rematerialises() const override { return routing::rematerialises(e_.s_.gwtf.backward, e_.remat_gains_slots()); }
  void start() override { recompute(); }

  int concurrency(std::size_t holder) const override {
    auto it = paths_.find(holder);
    return it == paths_.end() ? 0 : static_cast<int>(it->second.size());
  }

  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) override {
    auto& e = e_;
    auto it = paths_.find(mb.holder);
    if (it != paths_.end() && !it->second.empty()) {
      auto& p = it->second[mb.flow_slot % it->second.size()];
      auto st = static_cast<std::size_t>(s);
      if (st < p.size() && e.believed_alive(p[st]) && e.stage_of(p[st]) == s)
        return p[st];
    }
    return e.fallback(mb, s, from);
  }

  void entered(std::size_t) override { recompute(); }
  void links_degraded(std::size_t, std::size_t) override {
    e_.at(e_.now_ + e_.s_.detect_s, [this] { recompute(); });
  }
  void detected(std::size_t) override { recompute(); }

private:
  void recompute() {
    auto& e = e_;
    std::vector<flow_node> nodes;
    std::vector<std::size_t> ids;
    for (std::size_t h = 0; h < e.hosts_.size(); ++h)
      if (e.alive_[h]) {
        nodes.push_back({e.stage_of(h), e.hosts_[h].capacity});
        ids.push_back(h);
      }
    paths_.clear();
    if (e.s_.gwtf.link_load) {
      // With link load (GWTF's cost model): rings per holder, congestion-priced, with global
      // knowledge of every link's load (routing/optimum.hpp congestion_rings).
      std::vector<std::size_t> hs;
      for (std::size_t n = 0; n < ids.size(); ++n)
        if (e.stage_of(ids[n]) == 0)
          hs.push_back(n);
      int per_holder = e.s_.microbatches_per_holder;
      for (auto n : hs)
        per_holder = std::min(per_holder, e.hosts_[ids[n]].capacity);
      auto rings = congestion_rings(
        nodes, e.S(), hs, per_holder, [&](std::size_t a, std::size_t b) { return e.cost(ids[a], ids[b]); },
        [&](std::size_t a, std::size_t b) { return e.link_s(ids[a], ids[b]); });
      for (std::size_t k = 0; k < hs.size(); ++k)
        for (auto& ring : rings[k]) {
          std::vector<std::size_t> path;
          for (auto n : ring)
            path.push_back(ids[n]);
          paths_[ids[hs[k]]].push_back(std::move(path));
        }
      return;
    }
    auto mm = max_flow_min_max(nodes, e.S(), [&](std::size_t a, std::size_t b) { return e.cost(ids[a], ids[b]); });
    // The oracle is single-commodity (docs/routing.md): a unit path may leave one data holder
    // and return to another. Each path is given to the holder it costs least to close the
    // ring at (entry + return hop), every holder taking an equal share; the relay hops, the
    // flow count and the capacities stay the oracle's.
    std::vector<std::vector<std::size_t>> relays;
    for (auto& p : mm.paths) {
      std::vector<std::size_t> hosts;
      for (auto n : p)
        if (e.stage_of(ids[n]) != 0)
          hosts.push_back(ids[n]);
      if (!hosts.empty())
        relays.push_back(std::move(hosts));
    }
    if (relays.empty())
      return;
    auto quota = (relays.size() + e.holders_.size() - 1) / e.holders_.size();
    std::vector<std::tuple<double, std::size_t, std::size_t>> pairs; // cost, path, holder
    for (std::size_t k = 0; k < relays.size(); ++k)
      for (std::size_t hi = 0; hi < e.holders_.size(); ++hi) {
        auto h = e.holders_[hi];
        pairs.emplace_back(e.cost(h, relays[k].front()) + e.cost(relays[k].back(), h), k, hi);
      }
    std::sort(pairs.begin(), pairs.end());
    std::vector<bool> given(relays.size(), false);
    std::vector<std::size_t> taken(e.holders_.size(), 0);
    for (auto& [c, k, hi] : pairs) {
      if (given[k] || taken[hi] >= quota)
        continue;
      given[k] = true;
      ++taken[hi];
      auto h = e.holders_[hi];
      std::vector<std::size_t> ring{h};
      ring.insert(ring.end(), relays[k].begin(), relays[k].end());
      paths_[h].push_back(std::move(ring));
    }
    // Fewer paths than holders: a holder left without one shares its cheapest (the capacity
    // queues serialise the sharers), so that no holder starves.
    for (auto& [c, k, hi] : pairs) {
      auto h = e.holders_[hi];
      if (!paths_[h].empty())
        continue;
      std::vector<std::size_t> ring{h};
      ring.insert(ring.end(), relays[k].begin(), relays[k].end());
      paths_[h].push_back(std::move(ring));
    }
  }

  std::map<std::size_t, std::vector<std::vector<std::size_t>>> paths_;
};

std::unique_ptr<engine::router> engine::make_centralized_router(engine& e) {
  return std::make_unique<centralized_router>(e);
}

} // namespace gwtf::sim
