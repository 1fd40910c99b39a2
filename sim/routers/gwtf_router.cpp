// The simulator's GWTF router.
#include "sim/engine.hpp"

namespace gwtf::sim {

// GWTF: one flow_balancer per host, wired through the simulated links; microbatches follow
// the built flows of their holder.
class engine::gwtf_router final : public engine::router {
public:
  using router::router;
  sim_router kind() const override { return sim_router::gwtf; }
  bool rematerialises() const override { return routing::rematerialises(e_.s_.gwtf.backward, e_.remat_gains_slots()); }

  void start() override {
    auto& e = e_;
    balancers_.resize(e.hosts_.size());
    for (std::size_t i = 0; i < e.s_.hosts.size(); ++i)
      make_balancer(i);
    known_.resize(e.hosts_.size());
    // The hosts by stage and region, joiners included (a GWTF host keeps its stage).
    at_.assign(static_cast<std::size_t>(e.S()), std::vector<std::vector<std::size_t>>(e.net_.regions.size()));
    for (std::size_t h = 0; h < e.hosts_.size(); ++h)
      if (e.stage_of(h) >= 0 && e.stage_of(h) < e.S() && e.hosts_[h].region < e.net_.regions.size())
        at_[static_cast<std::size_t>(e.stage_of(h))][e.hosts_[h].region].push_back(h);
    for (std::size_t i = 0; i < e.s_.hosts.size(); ++i)
      meet(i);
    e.at(0, [this] { tick(); });
  }

  int concurrency(std::size_t holder) const override {
    auto& e = e_;
    auto n = flow_count(holder, holder);
    if (n > 0 || !degraded(holder))
      return n;
    // As the runtime does (docs/runtime.md, degraded mode): a holder without a ring for
    // 4 ticks uses the live first-stage hosts directly rather than stall.
    int live1 = 0;
    for (std::size_t h = 0; h < e.hosts_.size(); ++h)
      live1 += known_[holder].count(h) > 0 && e.believed_alive(h) && e.stage_of(h) == 1 % e.S();
    return live1;
  }

  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) override {
    auto& e = e_;
    // A flow of this holder entering `from` from the hop before it, else any of its flows.
    const std::string& came_from = s >= 2 ? e.hosts_[mb.path[static_cast<std::size_t>(s - 2)]].name : std::string{};
    std::vector<std::size_t> exact, any;
    each_flow(from, mb.holder, [&](const held_flow& f, std::size_t h) {
      if (e.stage_of(h) != s)
        return;
      any.push_back(h);
      if (s == 1 || f.prev == came_from)
        exact.push_back(h);
    });
    auto& pick = !exact.empty() ? exact : any;
    if (!pick.empty())
      return pick[mb.flow_slot % pick.size()];
    return e.fallback(mb, s, from);
  }

  // Its introduced peers; when `from` is gone, the peers of the microbatch's other hosts.
  void fallback_candidates(const microbatch& mb, std::size_t from,
                           const std::function<bool(std::size_t)>& consider) override {
    auto& e = e_;
    bool any = false;
    if (e.believed_alive(from))
      for (auto h : known_[from])
        any = consider(h) || any;
    if (!any)
      for (auto p : mb.path)
        if (e.believed_alive(p))
          for (auto h : known_[p])
            consider(h);
  }

  void entered(std::size_t j) override {
    make_balancer(j);
    meet(j);
  }

  void links_degraded(std::size_t a, std::size_t b) override {
    auto& e = e_;
    e.at(e.now_ + e.s_.detect_s, [this, a, b] {
      auto& e = e_;
      for (std::size_t i = 0; i < e.hosts_.size(); ++i)
        for (auto j : known_[i]) {
          if (!e.alive_[i] || !e.alive_[j] || e.stage_of(j) != (e.stage_of(i) + 1) % e.S())
            continue;
          auto ri = e.hosts_[i].region, rj = e.hosts_[j].region;
          if ((ri == a && rj == b) || (ri == b && rj == a)) {
            balancers_[i]->add_peer(e.hosts_[j].name, e.stage_of(j), e.cost(i, j), e.link_s(i, j));
            balancers_[j]->add_peer(e.hosts_[i].name, e.stage_of(i), e.cost(j, i), e.link_s(j, i));
          }
        }
    });
  }

  void detected(std::size_t h) override {
    auto& e = e_;
    auto knew = std::move(known_[h]);
    known_[h].clear();
    for (auto i : knew) {
      known_[i].erase(h);
      if (e.alive_[i] && balancers_[i]) {
        deliver(i, balancers_[i]->remove_peer(e.hosts_[h].name, tick_));
        meet(i);
      }
    }
  }

  void finish(sim_result& res) override {
    for (auto& b : balancers_)
      if (b) {
        res.reroutes += b->moves().reroutes;
        res.deferred_moves += b->moves().deferred;
      }
  }

  void iteration_started() override {
    auto& e = e_;
    by_holder_.clear();
    for (auto* mb : e.mbs_)
      by_holder_[mb->holder].push_back(mb);
  }

private:
  void make_balancer(std::size_t i) {
    auto& e = e_;
    balancers_[i] = std::make_unique<flow_balancer>(e.hosts_[i].name, e.stage_of(i), e.S(), e.hosts_[i].capacity,
                                                    e.s_.gwtf, e.s_.seed);
    balancers_[i]->set_microbatches(static_cast<std::uint32_t>(e.s_.microbatches_per_holder));
    balancers_[i]->set_in_flight([this, i](const std::string& target, const std::string& next) { return holds(i, target, next); });
  }

  // Whether host i sent a microbatch of data holder `target` on to `next` and has not run
  // its backward yet (the holder itself: one of its own, unfinished; the last relay stage,
  // whose next hop is the holder: any it holds), as the host itself knows.
  bool holds(std::size_t i, const std::string& target, const std::string& next) const {
    auto& e = e_;
    auto h = e.index_.find(target);
    auto n = e.index_.find(next);
    if (h == e.index_.end() || n == e.index_.end())
      return false;
    auto mbs = by_holder_.find(h->second);
    if (mbs == by_holder_.end())
      return false;
    int s = e.stage_of(i);
    if (s < 0)
      return false;
    auto st = static_cast<std::size_t>(s);
    for (auto* mb : mbs->second) {
      if (!mb->launched || mb->done || st >= mb->path.size() || mb->path[st] != i)
        continue;
      bool last = st + 1 == mb->path.size();
      if ((last || mb->path[st + 1] == n->second) && (st == 0 || !mb->bwd_done[st]))
        return true;
    }
    return false;
  }

  static constexpr double control_bytes = 256; // one balancer message on the wire

  void tick() {
    auto& e = e_;
    for (std::size_t i = 0; i < balancers_.size(); ++i)
      if (e.alive_[i])
        deliver(i, balancers_[i]->tick(tick_));
    for (auto h : e.holders_) {
      if (flow_count(h, h) > 0)
        no_flow_since_.erase(h);
      else // from the start too, as the runtime does: a holder that gets no ring does not wait forever
        no_flow_since_.emplace(h, e.now_);
    }
    ++tick_;
    if (!e.finished_)
      e.at(e.now_ + e.s_.gwtf.tick_ms / 1000.0, [this] { tick(); });
  }

  void deliver(std::size_t from, std::vector<outgoing> out) {
    auto& e = e_;
    for (auto& o : out) {
      auto it = e.index_.find(o.to);
      if (it == e.index_.end())
        continue;
      auto to = it->second;
      double t = e.transfer(from, to, control_bytes); // queued behind activations on the same link
      // The message waits in a pool slot; the event holds (from, to, slot) in one word, so
      // that it needs no allocation of its own.
      std::uint64_t slot;
      if (free_slots_.empty()) {
        slot = pool_.size();
        pool_.push_back(std::move(o.msg));
      } else {
        slot = free_slots_.back();
        free_slots_.pop_back();
        pool_[slot] = std::move(o.msg);
      }
      if (from >= (1u << 20) || to >= (1u << 20) || slot >= (std::uint64_t{1} << 24))
        throw std::length_error("simulator: more than 2^20 hosts or 2^24 balancer messages in flight");
      std::uint64_t packed = from << 44 | to << 24 | slot;
      e.at(t, [this, packed] {
        auto& e = e_;
        auto from = static_cast<std::size_t>(packed >> 44), to = static_cast<std::size_t>(packed >> 24 & 0xfffff);
        auto slot = static_cast<std::size_t>(packed & 0xffffff);
        auto msg = std::move(pool_[slot]);
        pool_[slot] = wire::message{};
        free_slots_.push_back(slot);
        if (e.alive_[to] && e.alive_[from])
          deliver(to, balancers_[to]->handle(e.hosts_[from].name, msg, tick_));
      });
    }
  }

  // Host `at`'s built flows of `holder` whose next hop it believes alive, with that hop;
  // `each(flow, next)` is called for each (the flows' order).
  template <class F>
  void each_flow(std::size_t at, std::size_t holder, F&& each) const {
    auto& e = e_;
    auto& name = e.hosts_[holder].name;
    // A holder's flows mostly share a few next hops: the last one looked up is kept.
    const std::string* last = nullptr;
    constexpr auto none = std::numeric_limits<std::size_t>::max();
    std::size_t last_at = none; // none: not a host, or not believed alive
    for (auto& [id, f] : balancers_[at]->flows()) {
      if (!f.built || f.target != name)
        continue;
      if (last == nullptr || f.next != *last) {
        auto n = e.index_.find(f.next);
        last = &f.next;
        last_at = n != e.index_.end() && e.believed_alive(n->second) ? n->second : none;
      }
      if (last_at != none)
        each(f, last_at);
    }
  }
  int flow_count(std::size_t at, std::size_t holder) const {
    int n = 0;
    each_flow(at, holder, [&n](const held_flow&, std::size_t) { ++n; });
    return n;
  }

  bool degraded(std::size_t holder) const {
    auto it = no_flow_since_.find(holder);
    return it != no_flow_since_.end() && e_.now_ - it->second >= 4 * e_.s_.gwtf.tick_ms / 1000.0;
  }

  // i and j learn of each other (a neighbour: previous, same or next stage).
  void introduce(std::size_t i, std::size_t j) {
    auto& e = e_;
    int si = e.stage_of(i), sj = e.stage_of(j);
    if (!known_[i].insert(j).second)
      return;
    known_[j].insert(i);
    // d for previous- and next-stage peers; the balancer ignores it for same-stage ones.
    balancers_[i]->add_peer(e.hosts_[j].name, sj, e.cost(i, j), e.link_s(i, j));
    balancers_[j]->add_peer(e.hosts_[i].name, si, e.cost(j, i), e.link_s(j, i));
  }

  // i tops up its view of each neighbouring stage to `gwtf_view` live hosts (0: all),
  // the lowest-latency ones first (as a bootstrap or gossip would hand them out; ties by a
  // seeded hash, then the index). Called at start, on entering and when a known peer is
  // detected gone. Latency depends on the regions only, so the candidates are taken region
  // group by region group, nearest first: the same hosts as sorting every host of the stage
  // by (latency, hash, index), at the cost of the nearest regions' hosts.
  void meet(std::size_t i) {
    auto& e = e_;
    std::set<int> stages{(e.stage_of(i) + e.S() - 1) % e.S(), e.stage_of(i), (e.stage_of(i) + 1) % e.S()};
    std::map<int, std::size_t> have;
    for (auto j : known_[i])
      if (e.alive_[j]) // a crashed peer not yet detected is replaced already
        ++have[e.stage_of(j)];
    for (int st : stages) {
      auto want = e.s_.gwtf_view > 0 ? static_cast<std::size_t>(e.s_.gwtf_view) : e.hosts_.size();
      if (have[st] >= want)
        continue;
      auto need = want - have[st];
      auto& regions = at_[static_cast<std::size_t>(st)];
      std::vector<std::pair<double, std::size_t>> order; // (latency, region)
      for (std::size_t r = 0; r < regions.size(); ++r)
        if (!regions[r].empty())
          order.emplace_back(e.est(i, regions[r].front()).latency_s, r);
      std::sort(order.begin(), order.end());
      std::vector<std::tuple<std::uint64_t, std::size_t>> cand;
      for (std::size_t g = 0; g < order.size() && need > 0;) {
        cand.clear();
        auto latency = order[g].first;
        for (; g < order.size() && order[g].first == latency; ++g)
          for (auto j : regions[order[g].second])
            if (j != i && e.alive_[j] && e.stage_of(j) == st && known_[i].count(j) == 0)
              cand.emplace_back(mix64(e.s_.seed ^ mix64(i * 0x9e37ULL + j)), j);
        auto take = std::min(need, cand.size());
        std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(take), cand.end());
        for (std::size_t k = 0; k < take; ++k)
          introduce(i, std::get<1>(cand[k]));
        need -= take;
      }
    }
  }

  std::vector<std::unique_ptr<flow_balancer>> balancers_;
  std::vector<wire::message> pool_;             // balancer messages in flight, by slot
  std::vector<std::size_t> free_slots_;         // pool_ slots free for reuse
  std::vector<std::set<std::size_t>> known_;    // whom each host has been introduced to
  std::vector<std::vector<std::vector<std::size_t>>> at_; // stage -> region -> hosts (all, in index order)
  std::map<std::size_t, double> no_flow_since_; // holders without a ring, since
  std::unordered_map<std::size_t, std::vector<const microbatch*>> by_holder_; // this iteration's, per holder
  std::int64_t tick_ = 0;
};

std::unique_ptr<engine::router> engine::make_gwtf_router(engine& e) {
  return std::make_unique<gwtf_router>(e);
}

} // namespace gwtf::sim
