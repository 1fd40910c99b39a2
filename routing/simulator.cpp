#include "routing/simulator.hpp"

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

#include "routing/balancer.hpp"
#include "routing/cost_model.hpp"
#include "routing/optimum.hpp"
#include "routing/swarm.hpp"

namespace gwtf::routing {

const char* to_string(sim_router r) {
  switch (r) {
    case sim_router::gwtf: return "gwtf";
    case sim_router::swarm: return "swarm";
    case sim_router::optimal: return "optimal";
  }
  return "?";
}

namespace {

std::uint64_t mix(std::uint64_t x) { // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double uniform(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(mix(seed ^ mix(a * 0x100000001b3ULL + b)) >> 11) / 9007199254740992.0;
}

} // namespace

std::vector<sim_crash> crash_trace(const sim_scenario& s) {
  std::vector<sim_crash> out;
  if (s.crash_rate <= 0)
    return out;
  std::vector<int> live(static_cast<std::size_t>(s.stages), 0);
  for (auto& h : s.hosts)
    ++live[static_cast<std::size_t>(h.stage)];
  std::set<std::size_t> dead;
  for (int i = 0; i < s.iterations; ++i)
    for (std::size_t h = 0; h < s.hosts.size(); ++h) {
      auto st = static_cast<std::size_t>(s.hosts[h].stage);
      if (st == 0 || dead.count(h) > 0 || live[st] <= 1)
        continue; // data holders own the data; a stage keeps one live relay
      if (uniform(s.seed, static_cast<std::uint64_t>(i), h) >= s.crash_rate)
        continue;
      dead.insert(h);
      --live[st];
      out.push_back({h, i, uniform(s.seed ^ 0x5bd1e995ULL, static_cast<std::uint64_t>(i), h)});
    }
  return out;
}

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

struct microbatch {
  std::size_t holder = 0;
  int index = 0;
  std::vector<std::size_t> path; // host per stage; path[0] = the holder
  std::vector<bool> holds;       // a capacity slot held on path[s]
  std::vector<bool> bwd_done;    // stage s finished its backward
  std::vector<double> work;      // compute seconds per stage spent on this microbatch
  std::uint64_t epoch = 0;       // bumped on re-route/restart: older events are stale
  bool done = false;
  bool launched = false;
  std::size_t flow_slot = 0;     // which of the holder's routes it follows
};

class engine {
public:
  engine(const sim_scenario& s, sim_router r) : s_(s), r_(r) {
    auto n = s.hosts.size();
    alive_.assign(n, true);
    busy_until_.assign(n, 0.0);
    inflight_.assign(n, 0);
    waiting_.resize(n);
    iter_work_.assign(n, 0.0);
    crash_time_.assign(n, inf);
    for (std::size_t i = 0; i < n; ++i)
      if (s.hosts[i].stage == 0)
        holders_.push_back(i);
    res_.router = r;
  }

  sim_result run() {
    if (holders_.empty()) {
      res_.why = "no data holder";
      return res_;
    }
    setup_router();
    for (auto& c : crash_trace(s_))
      crashes_by_iteration_.emplace(c.iteration, c);
    at(0, [this] { try_start_iteration(); });
    while (!pq_.empty() && !finished_) {
      auto e = pq_.top();
      pq_.pop();
      now_ = e.t;
      if (now_ - last_progress_ > stall_s) {
        res_.why = "no progress for " + std::to_string(static_cast<int>(stall_s)) + " simulated seconds at iteration "
                   + std::to_string(iteration_) + " (no route left?)";
        dump();
        break;
      }
      e.fn();
    }
    if (!finished_ && res_.why.empty()) {
      res_.why = "nothing left to do at iteration " + std::to_string(iteration_) + " (a microbatch was dropped)";
      dump();
    }
    res_.completed = finished_;
    res_.total_s = finished_ ? now_ : res_.total_s;
    return res_;
  }

private:
  static constexpr double stall_s = 3600;
  struct waiter {
    microbatch* m;
    std::uint64_t epoch;
    bool backward;
    std::function<void()> then;
  };
  struct event {
    double t;
    std::uint64_t seq;
    std::function<void()> fn;
  };
  struct later {
    bool operator()(const event& a, const event& b) const {
      return a.t > b.t || (a.t == b.t && a.seq > b.seq);
    }
  };

  // GWTF_SIM_DEBUG=1: the unfinished microbatches, for a stalled run.
  void dump() const {
    if (!std::getenv("GWTF_SIM_DEBUG"))
      return;
    for (std::size_t h = 0; h < s_.hosts.size(); ++h)
      std::fprintf(stderr, "host %zu stage %d alive %d inflight %d/%d waiting %zu\n", h, stage_of(h), alive_[h] ? 1 : 0,
                   inflight_[h], s_.hosts[h].capacity, waiting_[h].size());
    for (auto* mb : mbs_) {
      if (mb->done)
        continue;
      std::fprintf(stderr, "%s mb h%zu i%d launched %d epoch %llu path", to_string(r_), mb->holder, mb->index,
                   mb->launched ? 1 : 0, static_cast<unsigned long long>(mb->epoch));
      for (std::size_t k = 0; k < mb->path.size(); ++k)
        std::fprintf(stderr, " %zu%s%s%s", mb->path[k], alive_[mb->path[k]] ? "" : "(dead)",
                     mb->holds[k] ? "[slot]" : "", mb->bwd_done[k] ? "[bwd]" : "");
      std::fprintf(stderr, "\n");
    }
  }


  void at(double t, std::function<void()> fn) { pq_.push({t, seq_++, std::move(fn)}); }

  int stage_of(std::size_t h) const { return s_.hosts[h].stage; }
  int S() const { return s_.stages; }

  link_estimate est(std::size_t a, std::size_t b) const {
    return to_estimate(s_.net.link(s_.hosts[a].region, s_.hosts[b].region));
  }

  double cost(std::size_t a, std::size_t b) const {
    return edge_cost(s_.hosts[a].compute_s, s_.hosts[b].compute_s, est(a, b), est(b, a), s_.activation_bytes);
  }

  // A transfer of `bytes` a -> b that starts now: FIFO per directed link.
  double transfer(std::size_t a, std::size_t b, double bytes) {
    if (a == b)
      return now_;
    auto e = est(a, b);
    auto& free = link_free_[{a, b}];
    double start = std::max(now_, free);
    free = start + bytes / e.bandwidth_bytes_s;
    return free + e.latency_s;
  }

  // --- compute and capacity ---------------------------------------------------------

  // Runs `seconds` of compute on h (FIFO), then `then` if h is still alive; a crash in the
  // middle wastes the part done (counted at the crash).
  // `on_crash`: what the microbatch does when h dies before it finished.
  void compute(std::size_t h, microbatch& mb, int stage, double seconds, std::function<void()> then,
               std::function<void()> on_crash, bool check_epoch = true) {
    double start = std::max(now_, busy_until_[h]);
    double end = start + seconds;
    busy_until_[h] = end;
    auto epoch = mb.epoch;
    auto* m = &mb;
    running_[h].push_back({start, end});
    at(end, [this, h, m, stage, seconds, epoch, check_epoch, then = std::move(then), on_crash = std::move(on_crash)] {
      if (!alive_[h]) { // its work was counted as wasted at the crash
        if ((!check_epoch || m->epoch == epoch) && on_crash)
          on_crash();
        return;
      }
      res_.compute_s += seconds;
      iter_work_[h] += seconds;
      m->work[static_cast<std::size_t>(stage)] += seconds;
      if (check_epoch && m->epoch != epoch)
        return; // re-routed meanwhile: this result is not used
      last_progress_ = now_;
      then();
    });
  }

  // Takes a capacity slot on h for mb, now or when one frees.
  // `backward`: the slot is for recomputing a lost stash (a crash re-routes it as such).
  void admit(std::size_t h, microbatch& mb, bool backward, std::function<void()> then) {
    if (inflight_[h] < s_.hosts[h].capacity) {
      ++inflight_[h];
      mb.holds[static_cast<std::size_t>(stage_of(h))] = true;
      then();
      return;
    }
    waiting_[h].push_back({&mb, mb.epoch, backward, std::move(then)});
  }

  void release(microbatch& mb, int stage) {
    auto st = static_cast<std::size_t>(stage);
    if (!mb.holds[st])
      return;
    mb.holds[st] = false;
    auto h = mb.path[st];
    --inflight_[h];
    while (alive_[h] && inflight_[h] < s_.hosts[h].capacity && !waiting_[h].empty()) {
      auto w = std::move(waiting_[h].front());
      waiting_[h].pop_front();
      if (w.m->epoch != w.epoch)
        continue;
      ++inflight_[h];
      w.m->holds[static_cast<std::size_t>(stage_of(h))] = true;
      w.then();
    }
  }

  // --- the microbatch pipeline ------------------------------------------------------

  void launch(microbatch& mb) {
    mb.launched = true;
    mb.path.assign(static_cast<std::size_t>(S()), mb.holder);
    mb.holds.assign(static_cast<std::size_t>(S()), false);
    mb.bwd_done.assign(static_cast<std::size_t>(S()), false);
    mb.work.assign(static_cast<std::size_t>(S()), 0.0);
    auto next = route(mb, 1, mb.holder);
    if (!next) {
      retry_later(mb, [this, &mb] { launch(mb); });
      return;
    }
    mb.path[1] = *next;
    send_forward(mb, 1);
  }

  void retry_later(microbatch& mb, std::function<void()> fn) {
    auto epoch = mb.epoch;
    auto* m = &mb;
    at(now_ + std::max(0.05, s_.gwtf.tick_ms / 1000.0), [m, epoch, fn = std::move(fn)] {
      if (m->epoch == epoch)
        fn();
    });
  }

  // Forward to stage s (s == S: back to the holder for head and loss).
  void send_forward(microbatch& mb, int s) {
    ship(mb, mb.path[static_cast<std::size_t>(s - 1)], s == S() ? mb.holder : mb.path[static_cast<std::size_t>(s)],
         &engine::arrive_forward, s);
  }

  // One activation (or its gradient) from -> to, then `arrive(mb, s)` unless re-routed meanwhile.
  void ship(microbatch& mb, std::size_t from, std::size_t to, void (engine::*arrive)(microbatch&, int), int s) {
    auto epoch = mb.epoch;
    auto* m = &mb;
    at(transfer(from, to, s_.activation_bytes), [this, m, s, epoch, arrive] {
      if (m->epoch == epoch)
        (this->*arrive)(*m, s);
    });
  }

  void arrive_forward(microbatch& mb, int s) {
    if (s == S()) { // head + loss + head backward at the data holder
      compute(mb.holder, mb, 0, s_.hosts[mb.holder].compute_s, [this, &mb] { send_backward(mb, S() - 1); }, {});
      return;
    }
    auto h = mb.path[static_cast<std::size_t>(s)];
    if (!alive_[h]) {
      lost(mb, s, false);
      return;
    }
    admit(h, mb, false, [this, &mb, h, s] {
      compute(h, mb, s, s_.hosts[h].compute_s / 3, [this, &mb, h, s] {
        if (r_ == sim_router::swarm)
          swarm_[mb.holder]->completed(s_.hosts[h].name, swarm_task::forward, s_.hosts[h].compute_s / 3);
        if (s + 1 < S()) {
          auto next = route(mb, s + 1, h);
          if (!next) {
            retry_later(mb, [this, &mb, s] { reroute_next(mb, s); });
            return;
          }
          mb.path[static_cast<std::size_t>(s + 1)] = *next;
        }
        send_forward(mb, s + 1);
      }, [this, &mb, s] { lost(mb, s, false); });
    });
  }

  void reroute_next(microbatch& mb, int s) {
    auto next = route(mb, s + 1, mb.path[static_cast<std::size_t>(s)]);
    if (!next) {
      retry_later(mb, [this, &mb, s] { reroute_next(mb, s); });
      return;
    }
    mb.path[static_cast<std::size_t>(s + 1)] = *next;
    send_forward(mb, s + 1);
  }

  // Backward into stage s (s == 0: the gradient reaches the holder: done).
  void send_backward(microbatch& mb, int s) {
    ship(mb, s + 1 == S() ? mb.holder : mb.path[static_cast<std::size_t>(s + 1)], mb.path[static_cast<std::size_t>(s)],
         &engine::arrive_backward, s);
  }

  void arrive_backward(microbatch& mb, int s) {
    if (s == 0) {
      finish(mb);
      return;
    }
    auto h = mb.path[static_cast<std::size_t>(s)];
    if (!alive_[h]) {
      lost(mb, s, true);
      return;
    }
    compute(h, mb, s, s_.hosts[h].compute_s * 2 / 3, [this, &mb, h, s] {
      mb.bwd_done[static_cast<std::size_t>(s)] = true;
      if (r_ == sim_router::swarm)
        swarm_[mb.holder]->completed(s_.hosts[h].name, swarm_task::backward, s_.hosts[h].compute_s * 2 / 3);
      release(mb, s);
      send_backward(mb, s - 1);
    }, [this, &mb, s] { lost(mb, s, true); });
  }

  void finish(microbatch& mb) {
    mb.done = true;
    ++res_.microbatches;
    --outstanding_;
    launch_more(mb.holder);
    maybe_end_iteration();
  }

  // mb needs dead stage-s host path[s] (forward: to compute; backward: its stash).
  void lost(microbatch& mb, int s, bool backward) {
    auto dead = mb.path[static_cast<std::size_t>(s)];
    double known = crash_time_[dead] + s_.detect_s;
    if (now_ < known) { // the sender learns of the crash by timeout
      auto epoch = mb.epoch;
      auto* m = &mb;
      at(known, [this, m, s, backward, epoch] {
        if (m->epoch == epoch)
          lost(*m, s, backward);
      });
      return;
    }
    mb.holds[static_cast<std::size_t>(s)] = false; // the dead host's slot went with it
    if (r_ == sim_router::swarm) {
      auto rec = swarm_[mb.holder]->failed(s_.hosts[dead].name, backward ? swarm_task::backward : swarm_task::forward,
                                           now_);
      if (rec == swarm_recovery::restart_microbatch) {
        restart(mb);
        return;
      }
    }
    ++mb.epoch;
    auto prev = mb.path[static_cast<std::size_t>(s - 1)];
    auto y = route(mb, s, prev);
    if (!y) {
      mb.path[static_cast<std::size_t>(s)] = dead;
      retry_later(mb, [this, &mb, s, backward] { lost(mb, s, backward); });
      return;
    }
    mb.path[static_cast<std::size_t>(s)] = *y;
    if (!backward) {
      send_forward(mb, s);
      return;
    }
    // GWTF: the predecessor re-sends its buffered output; the replacement recomputes this
    // stage's forward, then the successor re-sends the gradient it kept. Nothing else reruns.
    auto from = prev;
    auto t = transfer(from, *y, s_.activation_bytes);
    auto epoch = mb.epoch;
    auto* m = &mb;
    auto yy = *y;
    at(t, [this, m, s, epoch, yy] {
      if (m->epoch != epoch)
        return;
      if (!alive_[yy]) {
        lost(*m, s, true);
        return;
      }
      admit(yy, *m, true, [this, m, s, yy] {
        compute(yy, *m, s, s_.hosts[yy].compute_s / 3, [this, m, s] { send_backward(*m, s); },
                [this, m, s] { lost(*m, s, true); });
      });
    });
  }

  // SWARM: the whole microbatch again from its data holder; all its work is wasted.
  void restart(microbatch& mb) {
    for (int st = 0; st < S(); ++st) {
      auto h = mb.path[static_cast<std::size_t>(st)];
      if (alive_[h])
        res_.wasted_s += mb.work[static_cast<std::size_t>(st)];
      if (st > 0 && alive_[h])
        release(mb, st);
    }
    ++mb.epoch;
    if (mb.done) {
      mb.done = false;
      --res_.microbatches;
      ++outstanding_;
    }
    launch(mb);
  }

  void crash(std::size_t h) {
    if (!alive_[h])
      return;
    alive_[h] = false;
    crash_time_[h] = now_;
    ++res_.crashes;
    res_.crash_times_s.push_back(now_);
    // Its work of this iteration is lost with its gradients (running compute: the part done).
    double partial = 0;
    for (auto& [a, b] : running_[h])
      if (a < now_ && b > now_)
        partial += now_ - a;
    res_.wasted_s += iter_work_[h] + partial;
    res_.compute_s += partial;
    auto queued = std::move(waiting_[h]);
    waiting_[h].clear();
    for (auto& w : queued)
      if (w.m->epoch == w.epoch)
        lost(*w.m, stage_of(h), w.backward); // waits for the detection itself
    at(now_ + s_.detect_s, [this, h] { detected(h); });
  }

  // Failure detection fired: routers learn of it; microbatches whose gradients at h were
  // already accumulated are repaired (GWTF, optimal) or restarted (SWARM).
  void detected(std::size_t h) {
    if (r_ == sim_router::gwtf)
      for (std::size_t i = 0; i < balancers_.size(); ++i)
        if (alive_[i] && balancers_[i])
          deliver(i, balancers_[i]->remove_peer(s_.hosts[h].name, tick_));
    if (r_ == sim_router::optimal)
      recompute_optimum();
    if (ending_)
      return; // the iteration is being aggregated: every share was computed before the crash
    auto st = static_cast<std::size_t>(stage_of(h));
    for (auto* mb : mbs_) {
      if (!mb->launched || mb->path.size() <= st || mb->path[st] != h || !mb->bwd_done[st])
        continue;
      if (r_ == sim_router::swarm) {
        restart(*mb);
        continue;
      }
      repair(*mb, static_cast<int>(st));
    }
  }

  // The stage-s work of an already finished backward is redone at a replacement from the
  // buffered input and gradient (forward + backward of that stage only).
  void repair(microbatch& mb, int s) {
    auto prev = mb.path[static_cast<std::size_t>(s - 1)];
    auto y = route(mb, s, prev);
    if (!y) {
      at(now_ + 0.5, [this, &mb, s] { repair(mb, s); });
      return;
    }
    ++pending_repairs_;
    auto yy = *y;
    auto t = transfer(prev, yy, s_.activation_bytes);
    auto* m = &mb;
    at(t, [this, m, s, yy] {
      if (!alive_[yy]) {
        --pending_repairs_;
        repair(*m, s);
        return;
      }
      compute(
        yy, *m, s, s_.hosts[yy].compute_s,
        [this] {
          --pending_repairs_;
          maybe_end_iteration();
        },
        [this, m, s] {
          --pending_repairs_;
          repair(*m, s);
        },
        false); // a job of its own: the microbatch may still be on its way back
    });
  }

  // --- iterations --------------------------------------------------------------------

  void try_start_iteration() {
    if (!routes_ready()) {
      at(now_ + std::max(0.05, s_.gwtf.tick_ms / 1000.0), [this] { try_start_iteration(); });
      return;
    }
    if (iteration_ == 0)
      res_.setup_s = now_;
    iter_start_ = now_;
    std::fill(iter_work_.begin(), iter_work_.end(), 0.0);
    for (auto& r : running_)
      r.second.clear();
    for (auto* old : mbs_) {
      ++old->epoch; // nothing of an ended iteration may act any more
      for (int st = 1; st < S() && st < static_cast<int>(old->holds.size()); ++st)
        if (alive_[old->path[static_cast<std::size_t>(st)]])
          release(*old, st);
    }
    mbs_.clear();
    for (auto h : holders_)
      for (int j = 0; j < s_.microbatches_per_holder; ++j) {
        all_.push_back(std::make_unique<microbatch>());
        all_.back()->holder = h;
        all_.back()->index = j;
        mbs_.push_back(all_.back().get());
      }
    outstanding_ = static_cast<int>(mbs_.size());
    res_.flows.push_back(route_count());
    if (r_ == sim_router::swarm)
      for (auto& [h, sw] : swarm_)
        if (sw->refresh_due(now_))
          sw->refresh(now_, live_relays());
    double prev_len = res_.iteration_s.empty() ? 1.0 : res_.iteration_s.back();
    auto range = crashes_by_iteration_.equal_range(iteration_);
    for (auto it = range.first; it != range.second; ++it) {
      auto c = it->second;
      at(now_ + c.at_fraction * prev_len, [this, c] { crash(c.host); });
    }
    for (auto h : holders_)
      launch_more(h);
  }

  // Keeps as many of the holder's microbatches in flight as it has routes; with none (all
  // lost to crashes), looks again after a tick.
  void launch_more(std::size_t holder) {
    int limit = concurrency(holder);
    int in_flight = 0, unlaunched = 0;
    for (auto* mb : mbs_) {
      in_flight += mb->holder == holder && mb->launched && !mb->done;
      unlaunched += mb->holder == holder && !mb->launched;
    }
    for (auto* mb : mbs_) {
      if (in_flight >= limit)
        break;
      if (mb->holder != holder || mb->launched)
        continue;
      mb->flow_slot = static_cast<std::size_t>(mb->index);
      ++in_flight;
      --unlaunched;
      launch(*mb);
    }
    if (unlaunched > 0 && in_flight == 0) {
      auto it = iteration_;
      at(now_ + std::max(0.05, s_.gwtf.tick_ms / 1000.0), [this, holder, it] {
        if (iteration_ == it && !ending_)
          launch_more(holder);
      });
    }
  }

  void maybe_end_iteration() {
    if (outstanding_ > 0 || pending_repairs_ > 0 || ending_)
      return;
    ending_ = true;
    // Stage aggregation: every live replica sends its gradient share to the others.
    double end = now_;
    for (int st = 0; st < S(); ++st) {
      std::vector<std::size_t> reps;
      for (std::size_t h = 0; h < s_.hosts.size(); ++h)
        if (alive_[h] && stage_of(h) == st)
          reps.push_back(h);
      for (auto a : reps)
        for (auto b : reps)
          if (a != b)
            end = std::max(end, transfer(a, b, s_.stage_gradient_bytes));
    }
    at(end, [this] {
      ending_ = false;
      res_.iteration_s.push_back(now_ - iter_start_);
      res_.iteration_end_s.push_back(now_);
      last_progress_ = now_;
      ++iteration_;
      if (iteration_ >= s_.iterations) {
        finished_ = true;
        return;
      }
      try_start_iteration();
    });
  }

  // --- routers -------------------------------------------------------------------------

  std::vector<swarm_peer> live_relays() const {
    std::vector<swarm_peer> out;
    for (std::size_t h = 0; h < s_.hosts.size(); ++h)
      if (alive_[h] && stage_of(h) > 0)
        out.push_back({s_.hosts[h].name, stage_of(h)});
    return out;
  }

  void setup_router() {
    for (std::size_t h = 0; h < s_.hosts.size(); ++h)
      index_[s_.hosts[h].name] = h;
    switch (r_) {
      case sim_router::swarm:
        for (auto h : holders_) {
          swarm_[h] = std::make_unique<swarm_router>(s_.swarm, S());
          swarm_[h]->refresh(0, live_relays());
        }
        break;
      case sim_router::optimal:
        recompute_optimum();
        break;
      case sim_router::gwtf: {
        balancers_.resize(s_.hosts.size());
        for (std::size_t i = 0; i < s_.hosts.size(); ++i)
          balancers_[i] = std::make_unique<flow_balancer>(s_.hosts[i].name, stage_of(i), S(),
                                                          s_.hosts[i].capacity, s_.gwtf);
        for (std::size_t i = 0; i < s_.hosts.size(); ++i)
          for (std::size_t j = 0; j < s_.hosts.size(); ++j) {
            if (i == j)
              continue;
            int si = stage_of(i), sj = stage_of(j);
            bool next = sj == (si + 1) % S(), prev = si == (sj + 1) % S();
            if (next || prev || si == sj)
              balancers_[i]->add_peer(s_.hosts[j].name, sj, next ? cost(i, j) : 0.0);
          }
        at(0, [this] { gwtf_tick(); });
        break;
      }
    }
  }

  void gwtf_tick() {
    for (std::size_t i = 0; i < balancers_.size(); ++i)
      if (alive_[i])
        deliver(i, balancers_[i]->tick(tick_));
    for (auto h : holders_) {
      if (!gwtf_flows(h, h).empty())
        no_flow_since_.erase(h);
      else if (iteration_ > 0 || res_.setup_s > 0)
        no_flow_since_.emplace(h, now_);
    }
    ++tick_;
    if (!finished_)
      at(now_ + s_.gwtf.tick_ms / 1000.0, [this] { gwtf_tick(); });
  }

  void deliver(std::size_t from, std::vector<outgoing> out) {
    for (auto& o : out) {
      auto it = index_.find(o.to);
      if (it == index_.end())
        continue;
      auto to = it->second;
      double t = now_ + est(from, to).latency_s; // control messages: latency only
      auto msg = std::make_shared<wire::message>(std::move(o.msg));
      at(t, [this, from, to, msg] {
        if (alive_[to] && alive_[from])
          deliver(to, balancers_[to]->handle(s_.hosts[from].name, *msg, tick_));
      });
    }
  }

  std::vector<const held_flow*> gwtf_flows(std::size_t at, std::size_t holder) const {
    std::vector<const held_flow*> out;
    for (auto& [id, f] : balancers_[at]->flows())
      if (f.built && f.target == s_.hosts[holder].name && index_.count(f.next) && alive_[index_.at(f.next)])
        out.push_back(&f);
    return out;
  }

  void recompute_optimum() {
    std::vector<flow_node> nodes;
    std::vector<std::size_t> ids;
    for (std::size_t h = 0; h < s_.hosts.size(); ++h)
      if (alive_[h]) {
        nodes.push_back({stage_of(h), s_.hosts[h].capacity});
        ids.push_back(h);
      }
    auto mm = max_flow_min_max(nodes, S(), [&](std::size_t a, std::size_t b) { return cost(ids[a], ids[b]); });
    // The oracle is single-commodity (docs/routing.md): its unit paths are dealt to the data
    // holders in turn, each relabelled to start and end at its holder. The relay hops, the
    // flow count and the capacities stay the oracle's.
    opt_paths_.clear();
    std::size_t k = 0;
    for (auto& p : mm.paths) {
      if (p.empty())
        continue;
      auto holder = holders_[k++ % holders_.size()];
      std::vector<std::size_t> hosts;
      for (auto n : p)
        hosts.push_back(ids[n]);
      hosts.front() = holder;
      if (hosts.size() > static_cast<std::size_t>(S()))
        hosts.back() = holder;
      opt_paths_[holder].push_back(hosts);
    }
  }

  bool routes_ready() const {
    if (r_ == sim_router::swarm)
      return true;
    for (auto h : holders_)
      if (concurrency(h) == 0)
        return false;
    return true;
  }

  int concurrency(std::size_t holder) const {
    switch (r_) {
      case sim_router::swarm: return s_.microbatches_per_holder;
      case sim_router::optimal: {
        auto it = opt_paths_.find(holder);
        return it == opt_paths_.end() ? 0 : static_cast<int>(it->second.size());
      }
      case sim_router::gwtf: {
        auto n = static_cast<int>(gwtf_flows(holder, holder).size());
        if (n > 0 || !degraded(holder))
          return n;
        // As the runtime does (docs/runtime.md, degraded mode): a holder without a ring for
        // 4 ticks uses the live first-stage hosts directly rather than stall.
        int live1 = 0;
        for (std::size_t h = 0; h < s_.hosts.size(); ++h)
          live1 += alive_[h] && stage_of(h) == 1 % S();
        return live1;
      }
    }
    return 0;
  }

  bool degraded(std::size_t holder) const {
    auto it = no_flow_since_.find(holder);
    return it != no_flow_since_.end() && now_ - it->second >= 4 * s_.gwtf.tick_ms / 1000.0;
  }

  int route_count() const {
    if (r_ == sim_router::swarm)
      return 0;
    int n = 0;
    for (auto h : holders_)
      n += concurrency(h);
    return n;
  }

  // Least-loaded live host of stage s (ties: lowest index): the fallback of every router.
  std::optional<std::size_t> any_live(int s) const {
    std::optional<std::size_t> best;
    for (std::size_t h = 0; h < s_.hosts.size(); ++h)
      if (alive_[h] && stage_of(h) == s
          && (!best || inflight_[h] - s_.hosts[h].capacity < inflight_[*best] - s_.hosts[*best].capacity))
        best = h;
    return best;
  }

  // The host of stage s for mb, arriving from `from`.
  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) {
    switch (r_) {
      case sim_router::swarm: {
        auto& sw = *swarm_[mb.holder];
        for (std::size_t tries = 0; tries < s_.hosts.size(); ++tries) {
          auto c = sw.choose(s, swarm_task::forward, now_);
          if (!c)
            break;
          auto h = index_.at(*c);
          if (alive_[h] || now_ < crash_time_[h] + s_.detect_s)
            return h; // SWARM cannot know of a crash before its timeout
          sw.failed(*c, swarm_task::forward, now_);
        }
        return std::nullopt;
      }
      case sim_router::optimal: {
        auto it = opt_paths_.find(mb.holder);
        if (it != opt_paths_.end() && !it->second.empty()) {
          auto& p = it->second[mb.flow_slot % it->second.size()];
          auto st = static_cast<std::size_t>(s);
          if (st < p.size() && alive_[p[st]] && stage_of(p[st]) == s)
            return p[st];
        }
        return any_live(s);
      }
      case sim_router::gwtf: {
        // A flow of this holder entering `from` from the hop before it, else any of its flows.
        const std::string& came_from = s >= 2 ? s_.hosts[mb.path[static_cast<std::size_t>(s - 2)]].name : std::string{};
        std::vector<std::size_t> exact, any;
        for (auto* f : gwtf_flows(from, mb.holder)) {
          auto h = index_.at(f->next);
          if (stage_of(h) != s)
            continue;
          any.push_back(h);
          if (s == 1 || f->prev == came_from)
            exact.push_back(h);
        }
        auto& pick = !exact.empty() ? exact : any;
        if (!pick.empty())
          return pick[mb.flow_slot % pick.size()];
        return any_live(s);
      }
    }
    return std::nullopt;
  }

  const sim_scenario& s_;
  sim_router r_;
  sim_result res_;
  std::priority_queue<event, std::vector<event>, later> pq_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  bool finished_ = false, ending_ = false;
  int iteration_ = 0;
  double iter_start_ = 0;
  int outstanding_ = 0, pending_repairs_ = 0;
  std::int64_t tick_ = 0;
  std::vector<std::size_t> holders_;
  std::vector<bool> alive_;
  std::vector<double> busy_until_, iter_work_, crash_time_;
  std::vector<int> inflight_;
  std::vector<std::deque<waiter>> waiting_;
  double last_progress_ = 0;
  std::map<std::size_t, std::vector<std::pair<double, double>>> running_;
  std::map<std::pair<std::size_t, std::size_t>, double> link_free_;
  std::multimap<int, sim_crash> crashes_by_iteration_;
  std::vector<std::unique_ptr<microbatch>> all_; // stable addresses for pending events
  std::vector<microbatch*> mbs_;                 // this iteration's
  std::map<std::string, std::size_t> index_;
  std::map<std::size_t, std::unique_ptr<swarm_router>> swarm_;
  std::vector<std::unique_ptr<flow_balancer>> balancers_;
  std::map<std::size_t, std::vector<std::vector<std::size_t>>> opt_paths_;
  std::map<std::size_t, double> no_flow_since_; // GWTF: holders without a ring, since
};

} // namespace

sim_result simulate(const sim_scenario& s, sim_router router) {
  engine e{s, router};
  return e.run();
}

} // namespace gwtf::routing
