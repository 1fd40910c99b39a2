// The simulator's SWARM routers (stage retry, and swarm-restart).
#include "sim/engine.hpp"

namespace gwtf::sim {

// SWARM: a router (trainer) per data holder chooses a peer per call (routing/swarm.hpp).
class engine::swarm_sim_router final : public engine::router {
public:
  swarm_sim_router(engine& e, swarm_policy policy) : router(e), policy_(policy) {}
  sim_router kind() const override {
    return policy_ == swarm_policy::stage_retry ? sim_router::swarm : sim_router::swarm_restart;
  }

  void start() override {
    auto& e = e_;
    for (auto h : e.holders_) {
      swarm_[h] = std::make_unique<swarm_router>(e.s_.swarm, e.S(), policy_);
      swarm_[h]->refresh(0, live_relays());
    }
  }

  int concurrency(std::size_t) const override { return e_.s_.microbatches_per_holder; }
  bool has_routes() const override { return false; }
  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t) override {
    return choose(mb, s, swarm_task::forward);
  }

  void detected(std::size_t h) override {
    if (e_.stage_of(h) > 0)
      fill_empty_stages();
  }

  void entered(std::size_t) override { fill_empty_stages(); }

  void before_iteration() override {
    auto& e = e_;
    if (e.s_.swarm.rebalance_ms > 0 && e.now_ >= next_rebalance_) {
      next_rebalance_ = e.now_ + e.s_.swarm.rebalance_ms / 1000.0;
      rebalance(-1);
    }
  }

  void iteration_started() override {
    for (auto& [h, sw] : swarm_)
      if (sw->refresh_due(e_.now_))
        sw->refresh(e_.now_, live_relays());
  }

  bool trainer() const override { return true; }
  bool backward_calls() const override { return e_.s_.swarm.backward == swarm_backward::rematerialize; }
  std::optional<std::size_t> backward_peer(microbatch& mb, int s) override {
    return choose(mb, s, swarm_task::backward);
  }

  void backward_sent(microbatch& mb, int s) override { // stash mode: the forward's peer, its queue charged
    auto st = static_cast<std::size_t>(s);
    swarm_[mb.holder]->charge(e_.hosts_[mb.path[st]].name, swarm_task::backward);
    mb.call_start[st] = e_.now_;
  }

  void call_done(const microbatch& mb, std::size_t h, int s, swarm_task task) override {
    swarm_[mb.holder]->completed(e_.hosts_[h].name, task, e_.now_ - mb.call_start[static_cast<std::size_t>(s)]);
  }

  // SWARM's code (balancer.py, use_another_expert) bans a peer on an error, not on a
  // DEADLINE_EXCEEDED: with `timeout` detection a dead peer stays in the queue until the
  // peer-list refresh drops it, and a call to it costs a timeout again.
  double learns_of_loss(const microbatch& mb, std::size_t dead, int s, bool backward) const override {
    auto& cfg = e_.s_.swarm;
    if (cfg.detection == swarm_detection::oracle || !silent_crash(dead))
      return e_.detect_at_[dead]; // a leave or a move closes its connections: an error at once
    double timeout = (backward ? cfg.backward_timeout_ms : cfg.forward_timeout_ms) / 1000.0;
    return mb.call_start[static_cast<std::size_t>(s)] + timeout;
  }

  recovery call_failed(const microbatch& mb, std::size_t dead, bool backward) override {
    auto task = backward ? swarm_task::backward : swarm_task::forward;
    auto& sw = *swarm_[mb.holder];
    auto rec = e_.s_.swarm.detection == swarm_detection::timeout ? sw.timed_out(e_.hosts_[dead].name, task)
                                                                   : sw.failed(e_.hosts_[dead].name, task, e_.now_);
    if (rec == swarm_recovery::restart_microbatch)
      return recovery::restart;
    return backward ? recovery::retry_stage : recovery::resend;
  }

private:
  std::vector<swarm_peer> live_relays() const {
    auto& e = e_;
    std::vector<swarm_peer> out;
    for (std::size_t h = 0; h < e.hosts_.size(); ++h)
      if (e.alive_[h] && e.stage_of(h) > 0)
        out.push_back({e.hosts_[h].name, e.stage_of(h)});
    return out;
  }

  // SWARM: the trainer's queue picks a peer of stage s for the call.
  std::optional<std::size_t> choose(microbatch& mb, int s, swarm_task task) {
    auto& e = e_;
    auto& sw = *swarm_[mb.holder];
    if (sw.refresh_due(e.now_)) // the periodic peer-list refresh (SWARM's DHT lookup)
      sw.refresh(e.now_, live_relays());
    for (std::size_t tries = 0; tries < e.hosts_.size(); ++tries) {
      auto c = sw.choose(s, task);
      if (!c)
        break;
      auto h = e.index_.at(*c);
      bool unknown_dead =
        silent_crash(h) && (e.s_.swarm.detection == swarm_detection::timeout || e.now_ < e.detect_at_[h]);
      if ((e.alive_[h] && e.stage_of(h) == s) || unknown_dead)
        return h; // SWARM cannot know of a crash before its call times out (or, oracle: the detection)
      sw.failed(*c, task, e.now_); // gone or serving another stage now: the call errs
    }
    return std::nullopt;
  }

  // SWARM's peers notice an empty stage and one moves there at once. When no stage can spare
  // a peer yet (each has one), they look again as peers join or every rebalance period, in
  // the middle of an iteration too: it cannot end while a stage is empty.
  void fill_empty_stages() {
    auto& e = e_;
    if (e.s_.swarm.rebalance_ms <= 0 || e.finished_)
      return;
    bool still_empty = false;
    for (int st = 1; st < e.S(); ++st)
      if (live_at(st) == 0) {
        rebalance(st);
        still_empty = still_empty || live_at(st) == 0;
      }
    if (still_empty && !looking_) {
      looking_ = true;
      e.at(e.now_ + e.s_.swarm.rebalance_ms / 1000.0, [this] {
        looking_ = false;
        fill_empty_stages();
      });
    }
  }

  // Gone without a word (a crash), not a leave or a move, which peers hear of at once.
  bool silent_crash(std::size_t h) const { return !e_.alive_[h] && e_.detect_at_[h] > e_.crash_time_[h]; }

  int live_at(int stage) const {
    auto& e = e_;
    int n = 0;
    for (std::size_t h = 0; h < e.hosts_.size(); ++h)
      n += e.alive_[h] && e.stage_of(h) == stage;
    for (auto& [h, to] : e.moving_)
      n += to == stage;
    return n;
  }

  // SWARM's adaptive rebalancing (its paper, "adaptive swarm rebalancing"): from what the
  // trainers measured, one peer of the fastest stage moves to the slowest stage when that
  // raises the slower of the two; `empty` >= 1: that stage has no peer left, one moves there
  // whatever it costs. The mover leaves its stage (its work of the iteration is lost, as a
  // leave), downloads the new stage's weights, and serves it.
  void rebalance(int empty) {
    auto& e = e_;
    std::vector<swarm_load> relays;
    std::vector<std::size_t> host_of;
    for (std::size_t h = 0; h < e.hosts_.size(); ++h) {
      if (!e.alive_[h] || e.stage_of(h) <= 0)
        continue;
      double sum = 0;
      int n = 0;
      for (auto& [t, sw] : swarm_)
        if (auto tp = sw->throughput(e.hosts_[h].name)) {
          sum += *tp;
          ++n;
        }
      relays.push_back({e.hosts_[h].name, e.stage_of(h), n > 0 ? sum / n : 0.0}); // unmeasured: counts for nothing yet
      host_of.push_back(h);
    }
    auto move = swarm_rebalance(relays, e.S(), empty);
    if (!move)
      return;
    auto low = move->to;
    auto p = host_of[move->peer];
    ++e.res_.moves;
    e.crash(p, 0, false);
    e.moving_[p] = low;
    e.at(e.download(low, p), [this, p, low] {
      auto& e = e_;
      if (e.finished_ || e.moving_.count(p) == 0)
        return; // it crashed while downloading
      e.moving_.erase(p);
      e.hosts_[p].stage = low;
      e.alive_[p] = true;
      e.busy_until_[p] = e.now_; // what it queued for its old stage died with the move
      e.bound_hosts_.insert({p, low});
    });
  }

  swarm_policy policy_;
  std::map<std::size_t, std::unique_ptr<swarm_router>> swarm_;
  double next_rebalance_ = 0; // when rebalancing is next due
  bool looking_ = false;      // a look for a peer to fill an empty stage is scheduled
};

std::unique_ptr<engine::router> engine::make_swarm_router(engine& e, swarm_policy policy) {
  return std::make_unique<swarm_sim_router>(e, policy);
}

} // namespace gwtf::sim
