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
#include <tuple>
#include <unordered_map>

#include "common/seeded.hpp"
#include "routing/balancer.hpp"
#include "routing/bound.hpp"
#include "routing/cost_model.hpp"
#include "routing/optimum.hpp"
#include "routing/swarm.hpp"

namespace gwtf::sim {

using namespace gwtf::routing;

const char* to_string(sim_router r) {
  switch (r) {
    case sim_router::gwtf: return "gwtf";
    case sim_router::swarm: return "swarm";
    case sim_router::swarm_restart: return "swarm-restart";
    case sim_router::centralized: return "centralized";
  }
  return "?";
}

const char* to_string(sim_event_kind k) {
  switch (k) {
    case sim_event_kind::crash: return "crash";
    case sim_event_kind::leave: return "leave";
    case sim_event_kind::join: return "join";
    case sim_event_kind::degrade: return "degrade";
  }
  return "?";
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

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

struct microbatch {
  std::size_t holder = 0;
  int index = 0;
  std::vector<std::size_t> path; // host per stage; path[0] = the holder
  std::vector<bool> holds;       // a capacity slot held on path[s]
  std::vector<bool> bwd_done;    // stage s finished its backward
  std::vector<bool> remat;       // SWARM: stage s's backward runs at bwd_host[s], forward recomputed
  std::vector<std::size_t> bwd_host; // SWARM: where stage s's backward call went
  std::vector<double> call_start;    // SWARM: when the call of stage s was made (wall-time samples)
  std::vector<double> work;      // compute seconds per stage spent on this microbatch
  std::uint64_t epoch = 0;       // bumped on re-route/restart: older events are stale
  bool done = false;
  bool launched = false;
  std::size_t flow_slot = 0;     // which of the holder's routes it follows
};

class engine {
public:
  engine(const sim_scenario& s, sim_router r) : s_(s), r_(r), hosts_(s.hosts), net_(s.net) {
    trace_ = churn_trace(s);
    for (auto& e : trace_)
      if (e.kind == sim_event_kind::join)
        hosts_.push_back(e.joiner); // at index e.host: the trace numbers joiners in order
    // GWTF (and the centralized router, its comparison point) with rematerialisation: a relay
    // keeps only a microbatch's stage input between forward and backward, so the memory of
    // `capacity` stashes holds one stash being recomputed plus (capacity - 1) stashes' worth
    // of inputs.
    remat_ = (r == sim_router::gwtf || r == sim_router::centralized)
             && s.gwtf.backward == gwtf_backward::rematerialize;
    for (auto& h : hosts_)
      stash_capacity_.push_back(h.capacity); // the bound's: a recomputed microbatch is in its remat class
    if (remat_ && s.activation_bytes > 0 && s.stash_bytes > s.activation_bytes) {
      double per_stash = std::floor(s.stash_bytes / s.activation_bytes);
      for (auto& h : hosts_)
        if (h.stage != 0)
          h.capacity = static_cast<int>(std::min(1e6, 1 + (h.capacity - 1) * per_stash));
    }
    entered_.assign(hosts_.size(), false);
    for (std::size_t i = 0; i < s.hosts.size(); ++i)
      entered_[i] = true;
    auto n = hosts_.size();
    alive_.assign(n, true);
    busy_until_.assign(n, 0.0);
    life_.assign(n, 0);
    inflight_.assign(n, 0);
    waiting_.resize(n);
    iter_work_.assign(n, 0.0);
    crash_time_.assign(n, inf);
    detect_at_.assign(n, inf);
    for (std::size_t i = s.hosts.size(); i < n; ++i)
      alive_[i] = false; // joiners enter when their download is done
    for (std::size_t i = 0; i < s.hosts.size(); ++i)
      if (hosts_[i].stage == 0)
        holders_.push_back(i);
    res_.router = r;
  }

  sim_result run() {
    if (holders_.empty()) {
      res_.why = "no data holder";
      return res_;
    }
    for (std::size_t k = 0; k < s_.script.size(); ++k) {
      auto& e = s_.script[k];
      bool removes = e.kind == sim_event_kind::crash || e.kind == sim_event_kind::leave;
      if (removes && (e.host >= s_.hosts.size() || s_.hosts[e.host].stage == 0)) {
        res_.why = "script[" + std::to_string(k) + "]: a " + to_string(e.kind) + " needs a relay host";
        return res_;
      }
      if (e.kind == sim_event_kind::degrade
          && (e.region_a >= s_.net.regions.size() || e.region_b >= s_.net.regions.size() || !(e.factor > 0))) {
        res_.why = "script[" + std::to_string(k) + "]: a degrade needs two regions of the network and a factor > 0";
        return res_;
      }
    }
    setup_router();
    for (auto& e : trace_)
      events_by_iteration_.emplace(e.iteration, e);
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
    for (auto& b : balancers_)
      if (b)
        res_.reroutes += b->moves().reroutes;
    return res_;
  }

private:
  static constexpr double stall_s = 3600;
  static constexpr double control_bytes = 256; // one balancer message on the wire
  struct waiter {
    microbatch* m;                  // null: a job of its own (a repair)
    std::uint64_t epoch;
    bool backward;
    std::function<void()> then;
    std::function<void()> job_lost; // a job: what to do when the host dies first
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
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      std::fprintf(stderr, "host %zu stage %d alive %d inflight %d/%d waiting %zu\n", h, stage_of(h), alive_[h] ? 1 : 0,
                   inflight_[h], hosts_[h].capacity, waiting_[h].size());
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

  int stage_of(std::size_t h) const { return hosts_[h].stage; }
  int S() const { return s_.stages; }

  link_estimate est(std::size_t a, std::size_t b) const {
    return to_estimate(net_.link(hosts_[a].region, hosts_[b].region));
  }

  double cost(std::size_t a, std::size_t b) const {
    return edge_cost(hosts_[a].compute_s, hosts_[b].compute_s, est(a, b), est(b, a), s_.activation_bytes);
  }

  // How long one microbatch occupies the link a <-> b (the balancer's load term).
  double link_s(std::size_t a, std::size_t b) const {
    return link_occupancy_s(est(a, b), est(b, a), s_.activation_bytes);
  }

  // A transfer of `bytes` a -> b that starts at `ready` (default: now): FIFO per directed link.
  double transfer(std::size_t a, std::size_t b, double bytes, std::optional<double> ready = std::nullopt) {
    if (a == b)
      return ready.value_or(now_);
    auto e = est(a, b);
    auto& free = link_free_[(static_cast<std::uint64_t>(a) << 32) | b];
    double start = std::max(ready.value_or(now_), free);
    free = start + bytes / e.bandwidth_bytes_s;
    return free + e.latency_s;
  }

  // One activation or activation gradient a -> b. With adaptive compression the link carries
  // what routing/compression.hpp plans for it (its bandwidth, b's compute per call), and a
  // sparse tensor first costs a its top-k and b the scatter back (compress_s_per_value per
  // value of the dense tensor): a computes it right after the output it compresses (now),
  // the transfer starts when it is done, and a's queued work waits that much longer.
  double transfer_activation(std::size_t a, std::size_t b) {
    if (!s_.compression || a == b)
      return transfer(a, b, s_.activation_bytes);
    double values = s_.activation_bytes / static_cast<double>(s_.compression->value_bytes);
    auto plan = plan_wire(*s_.compression, static_cast<std::int64_t>(values), est(a, b).bandwidth_bytes_s,
                          hosts_[b].compute_s / 2);
    ++(plan.sparse ? res_.sparse_transfers : res_.dense_transfers);
    if (!plan.sparse)
      return transfer(a, b, plan.bytes);
    double c = s_.compress_s_per_value * values;
    busy_until_[a] = std::max(busy_until_[a], now_) + c;
    return transfer(a, b, plan.bytes, now_ + c);
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
    auto life = life_[h];
    running_[h].push_back({start, end});
    at(end, [this, h, m, stage, seconds, epoch, life, check_epoch, then = std::move(then),
             on_crash = std::move(on_crash)] {
      if (!alive_[h] || life_[h] != life) { // its work was counted as wasted at the crash (or the move)
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
    if (inflight_[h] < hosts_[h].capacity) {
      ++inflight_[h];
      mb.holds[static_cast<std::size_t>(stage_of(h))] = true;
      then();
      return;
    }
    waiting_[h].push_back({&mb, mb.epoch, backward, std::move(then), {}});
  }

  void release(microbatch& mb, int stage) {
    auto st = static_cast<std::size_t>(stage);
    if (!mb.holds[st])
      return;
    mb.holds[st] = false;
    auto h = mb.path[st];
    --inflight_[h];
    drain(h);
  }

  // Hands freed slots of h to the queue.
  void drain(std::size_t h) {
    while (alive_[h] && inflight_[h] < hosts_[h].capacity && !waiting_[h].empty()) {
      auto w = std::move(waiting_[h].front());
      waiting_[h].pop_front();
      if (w.m != nullptr && w.m->epoch != w.epoch)
        continue;
      ++inflight_[h];
      if (w.m != nullptr)
        w.m->holds[static_cast<std::size_t>(stage_of(h))] = true;
      w.then();
    }
  }

  // A slot for a job of its own (a repair recomputes a stage: it needs the activations).
  void admit_job(std::size_t h, std::function<void()> then, std::function<void()> lost) {
    if (inflight_[h] < hosts_[h].capacity) {
      ++inflight_[h];
      then();
      return;
    }
    waiting_[h].push_back({nullptr, 0, true, std::move(then), std::move(lost)});
  }

  void free_job(std::size_t h) {
    --inflight_[h];
    drain(h);
  }

  // What a host's peers believe: entered, and not yet known dead (a crash is learnt
  // detect_s after it happens).
  bool believed_alive(std::size_t h) const {
    return entered_[h] && (alive_[h] || now_ < detect_at_[h]);
  }

  // --- the microbatch pipeline ------------------------------------------------------

  void launch(microbatch& mb) {
    mb.launched = true;
    mb.path.assign(static_cast<std::size_t>(S()), mb.holder);
    mb.holds.assign(static_cast<std::size_t>(S()), false);
    mb.bwd_done.assign(static_cast<std::size_t>(S()), false);
    mb.remat.assign(static_cast<std::size_t>(S()), swarm() && s_.swarm.backward == swarm_backward::rematerialize);
    mb.bwd_host.assign(static_cast<std::size_t>(S()), mb.holder);
    mb.call_start.assign(static_cast<std::size_t>(S()), 0.0);
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
    if (s < S())
      mb.call_start[static_cast<std::size_t>(s)] = now_;
    ship(mb, input_source(mb, s), s == S() ? mb.holder : mb.path[static_cast<std::size_t>(s)], &engine::arrive_forward,
         s);
  }

  // Who sends stage s its input: the stage s-1 host that computed it. SWARM's trainer keeps
  // every stage's inputs (its code saves them for backward), so when that host is gone SWARM
  // sends them from the data holder; GWTF relies on the predecessor's buffer.
  std::size_t input_source(const microbatch& mb, int s) const {
    auto prev = mb.path[static_cast<std::size_t>(s - 1)];
    return swarm() && !alive_[prev] ? mb.holder : prev;
  }

  // Who sends stage s its output gradient: the host that ran stage s+1's backward (the data
  // holder for the last stage); SWARM's trainer again keeps a copy.
  std::size_t gradient_source(const microbatch& mb, int s) const {
    if (s + 1 >= S())
      return mb.holder;
    auto from = backward_host(mb, s + 1);
    return swarm() && !alive_[from] ? mb.holder : from;
  }

  std::size_t backward_host(const microbatch& mb, int s) const {
    auto st = static_cast<std::size_t>(s);
    return mb.remat[st] ? mb.bwd_host[st] : mb.path[st];
  }

  bool swarm() const { return r_ == sim_router::swarm || r_ == sim_router::swarm_restart; }

  // One activation (or its gradient) from -> to, then `arrive(mb, s)` unless re-routed meanwhile.
  void ship(microbatch& mb, std::size_t from, std::size_t to, void (engine::*arrive)(microbatch&, int), int s) {
    auto epoch = mb.epoch;
    auto* m = &mb;
    at(transfer_activation(from, to), [this, m, s, epoch, arrive] {
      if (m->epoch == epoch)
        (this->*arrive)(*m, s);
    });
  }

  void arrive_forward(microbatch& mb, int s) {
    if (s == S()) { // head + loss + head backward at the data holder
      compute(mb.holder, mb, 0, hosts_[mb.holder].compute_s, [this, &mb] { send_backward(mb, S() - 1); }, {});
      return;
    }
    auto h = mb.path[static_cast<std::size_t>(s)];
    if (!alive_[h] || stage_of(h) != s) { // dead, or (a SWARM peer that moved) serving another stage now
      lost(mb, s, false);
      return;
    }
    auto run = [this, &mb, h, s] {
      compute(h, mb, s, hosts_[h].compute_s / 3, [this, &mb, h, s] {
        if (swarm())
          swarm_[mb.holder]->completed(hosts_[h].name, swarm_task::forward,
                                       now_ - mb.call_start[static_cast<std::size_t>(s)]);
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
    };
    if (mb.remat[static_cast<std::size_t>(s)])
      run(); // SWARM's servers keep no activations: no stash slot
    else
      admit(h, mb, false, std::move(run));
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
    auto st = static_cast<std::size_t>(s);
    if (s > 0 && mb.remat[st]) {
      swarm_backward_call(mb, s);
      return;
    }
    if (s > 0 && swarm()) { // stash mode: the forward's peer, its queue charged with the task
      swarm_[mb.holder]->charge(hosts_[mb.path[st]].name, swarm_task::backward);
      mb.call_start[st] = now_;
    }
    ship(mb, gradient_source(mb, s), mb.path[st], &engine::arrive_backward, s);
  }

  // SWARM's backward call: a peer of stage s chosen by the queue gets the stage's saved input
  // and the output gradient, recomputes the forward and runs the backward.
  void swarm_backward_call(microbatch& mb, int s) {
    auto st = static_cast<std::size_t>(s);
    auto y = swarm_choose(mb, s, swarm_task::backward);
    if (!y) {
      retry_later(mb, [this, &mb, s] { swarm_backward_call(mb, s); });
      return;
    }
    mb.remat[st] = true;
    mb.bwd_host[st] = *y;
    mb.call_start[st] = now_;
    double t = std::max(transfer_activation(input_source(mb, s), *y),
                        transfer_activation(gradient_source(mb, s), *y));
    auto epoch = mb.epoch;
    auto* m = &mb;
    at(t, [this, m, s, epoch] {
      if (m->epoch == epoch)
        arrive_backward(*m, s);
    });
  }

  void arrive_backward(microbatch& mb, int s) {
    if (s == 0) {
      finish(mb);
      return;
    }
    auto st = static_cast<std::size_t>(s);
    auto h = backward_host(mb, s);
    if (!alive_[h] || stage_of(h) != s) {
      lost(mb, s, true);
      return;
    }
    // rematerialised forward + backward (SWARM's call or a GWTF relay's recompute), else backward
    double work = hosts_[h].compute_s * (mb.remat[st] || remat_ ? 1.0 : 2.0 / 3);
    compute(h, mb, s, work, [this, &mb, h, s] {
      mb.bwd_done[static_cast<std::size_t>(s)] = true;
      if (swarm())
        swarm_[mb.holder]->completed(hosts_[h].name, swarm_task::backward,
                                     now_ - mb.call_start[static_cast<std::size_t>(s)]);
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
    auto dead = backward ? backward_host(mb, s) : mb.path[static_cast<std::size_t>(s)];
    double known = detect_at_[dead];
    if (now_ < known) { // the sender learns of the crash by timeout
      auto epoch = mb.epoch;
      auto* m = &mb;
      at(known, [this, m, s, backward, epoch] {
        if (m->epoch == epoch)
          lost(*m, s, backward);
      });
      return;
    }
    if (dead == mb.path[static_cast<std::size_t>(s)])
      mb.holds[static_cast<std::size_t>(s)] = false; // the dead host's slot went with it
    if (swarm()) {
      auto rec = swarm_[mb.holder]->failed(hosts_[dead].name, backward ? swarm_task::backward : swarm_task::forward,
                                           now_);
      if (rec == swarm_recovery::restart_microbatch) {
        restart(mb);
        return;
      }
      if (backward) { // SWARM's stage-level retry: another peer, from the saved input and gradient
        release(mb, s); // a stash left on a live forward peer is of no use any more
        ++mb.epoch;
        swarm_backward_call(mb, s);
        return;
      }
    }
    ++mb.epoch;
    // The hop that re-sends is the last live one before s: when the hosts between died too,
    // their stashes and buffered outputs went with them, and each of their stages is
    // recomputed on a replacement (as the runtime's chain of re-sends does). SWARM's trainer
    // keeps every stage's input: it retries stage s itself (input_source).
    int k = s - 1;
    while (!swarm() && k >= 1 && !alive_[mb.path[static_cast<std::size_t>(k)]])
      --k;
    if (!backward) {
      retry_forward(mb, k + 1);
      return;
    }
    repair(mb, k + 1, s);
  }

  // Forward: the live stage s-1 host re-sends its output to a stage-s host again.
  void retry_forward(microbatch& mb, int s) {
    auto y = route(mb, s, mb.path[static_cast<std::size_t>(s - 1)]);
    if (!y) { // path[s] is gone: lost() looks again at who is alive before it
      retry_later(mb, [this, &mb, s] { lost(mb, s, false); });
      return;
    }
    mb.path[static_cast<std::size_t>(s)] = *y;
    send_forward(mb, s);
  }

  // Backward broke at stage `to`: GWTF's predecessor re-sends its buffered output; a
  // replacement recomputes stage j's forward (j = the first stage whose host is gone) and
  // passes it on until stage `to`, whose successor then re-sends the gradient it kept.
  // Nothing else reruns.
  void repair(microbatch& mb, int j, int to) {
    auto from = mb.path[static_cast<std::size_t>(j - 1)];
    auto y = route(mb, j, from);
    if (!y) { // path[to] is still the lost host: lost() looks again at who is alive
      retry_later(mb, [this, &mb, to] { lost(mb, to, true); });
      return;
    }
    auto yy = *y;
    mb.path[static_cast<std::size_t>(j)] = yy;
    auto t = transfer_activation(from, yy);
    auto epoch = mb.epoch;
    auto* m = &mb;
    auto broke = [this, m, to, yy] { // the replacement died too: back off again once it is known
      auto epoch = m->epoch;
      at(std::max(now_, detect_at_[yy]), [this, m, to, epoch] {
        if (m->epoch == epoch)
          lost(*m, to, true);
      });
    };
    at(t, [this, m, j, to, epoch, yy, broke] {
      if (m->epoch != epoch)
        return;
      if (!alive_[yy]) {
        broke();
        return;
      }
      admit(yy, *m, true, [this, m, j, to, yy, broke] {
        compute(yy, *m, j, hosts_[yy].compute_s / 3, [this, m, j, to] {
          if (j == to)
            send_backward(*m, to);
          else
            repair(*m, j + 1, to);
        }, broke);
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

  // A crash (peers learn of it `detect` seconds later) or a leave (detect = 0).
  // `churn`: false for a SWARM peer that leaves its stage to serve another (not a crash).
  void crash(std::size_t h, double detect, bool churn = true) {
    if (!alive_[h])
      return;
    alive_[h] = false;
    ++life_[h];
    crash_time_[h] = now_;
    detect_at_[h] = now_ + detect;
    // Its slots went with it (a SWARM peer that moves comes back with none).
    for (auto* mb : mbs_)
      for (std::size_t st = 0; st < mb->path.size() && st < mb->holds.size(); ++st)
        if (mb->path[st] == h)
          mb->holds[st] = false;
    inflight_[h] = 0;
    if (churn)
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
      if (w.m == nullptr)
        w.job_lost();
      else if (w.m->epoch == w.epoch)
        lost(*w.m, stage_of(h), w.backward); // waits for the detection itself
    at(detect_at_[h], [this, h] { detected(h); });
  }

  void apply(const sim_event& e) {
    switch (e.kind) {
      case sim_event_kind::crash:
      case sim_event_kind::leave:
        if (!entered_[e.host] || moving_.count(e.host) > 0) { // still downloading: it never enters
          moving_.erase(e.host);
          left_before_entering_.insert(e.host);
          ++(e.kind == sim_event_kind::crash ? res_.crashes : res_.leaves);
          res_.crash_times_s.push_back(now_);
          return;
        }
        if (alive_[e.host])
          ++(e.kind == sim_event_kind::crash ? res_.crashes : res_.leaves);
        crash(e.host, e.kind == sim_event_kind::crash ? s_.detect_s : 0);
        return;
      case sim_event_kind::join:
        join(e.host);
        return;
      case sim_event_kind::degrade:
        degrade(e);
        return;
    }
  }

  // The joiner (its stage chosen by the trace: the bottleneck stage, the same for every
  // router) downloads the weights from the replica with the fastest link, then enters.
  void join(std::size_t j) {
    at(download(stage_of(j), j), [this, j] { enter(j); });
  }

  // `to` downloads a stage's weights (and optimizer state) from the live replica with the
  // fastest link, over the link queues; returns when it has them.
  double download(int stage, std::size_t to) {
    std::optional<std::size_t> from;
    double eta = inf;
    for (std::size_t h = 0; h < hosts_.size(); ++h) {
      if (!alive_[h] || stage_of(h) != stage)
        continue;
      auto e = est(h, to);
      double t = s_.stage_weight_bytes / e.bandwidth_bytes_s + e.latency_s;
      if (t < eta) {
        eta = t;
        from = h;
      }
    }
    return from ? transfer(*from, to, s_.stage_weight_bytes) : now_;
  }

  void enter(std::size_t j) {
    if (finished_ || left_before_entering_.count(j) > 0)
      return;
    alive_[j] = true;
    entered_[j] = true;
    bound_hosts_.insert({j, stage_of(j)});
    ++res_.joins;
    res_.join_times_s.push_back(now_);
    switch (r_) {
      case sim_router::gwtf: {
        balancers_[j] = std::make_unique<flow_balancer>(hosts_[j].name, stage_of(j), S(), hosts_[j].capacity,
                                                        s_.gwtf, s_.seed);
        meet(j);
        break;
      }
      case sim_router::centralized:
        recompute_optimum();
        break;
      case sim_router::swarm:
      case sim_router::swarm_restart:
        break; // its periodic refresh finds the new peer
    }
  }

  // GWTF: i and j learn of each other (a neighbour: previous, same or next stage).
  void introduce(std::size_t i, std::size_t j) {
    int si = stage_of(i), sj = stage_of(j);
    if (!known_[i].insert(j).second)
      return;
    known_[j].insert(i);
    // d for previous- and next-stage peers; the balancer ignores it for same-stage ones.
    balancers_[i]->add_peer(hosts_[j].name, sj, cost(i, j), link_s(i, j));
    balancers_[j]->add_peer(hosts_[i].name, si, cost(j, i), link_s(j, i));
  }

  // GWTF: i tops up its view of each neighbouring stage to `gwtf_view` live hosts (0: all),
  // the lowest-latency ones first (as a bootstrap or gossip would hand them out; ties by a
  // seeded hash). Called at start, on entering and when a known peer is detected gone.
  void meet(std::size_t i) {
    std::set<int> stages{(stage_of(i) + S() - 1) % S(), stage_of(i), (stage_of(i) + 1) % S()};
    for (int st : stages) {
      std::vector<std::tuple<double, std::uint64_t, std::size_t>> cand;
      std::size_t have = 0;
      for (std::size_t j = 0; j < hosts_.size(); ++j) {
        if (j == i || !alive_[j] || stage_of(j) != st)
          continue;
        if (known_[i].count(j) > 0)
          ++have;
        else
          cand.emplace_back(est(i, j).latency_s, mix64(s_.seed ^ mix64(i * 0x9e37ULL + j)), j);
      }
      auto want = s_.gwtf_view > 0 ? static_cast<std::size_t>(s_.gwtf_view) : cand.size() + have;
      if (have >= want)
        continue;
      auto take = std::min(want - have, cand.size());
      std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(take), cand.end());
      for (std::size_t k = 0; k < take; ++k)
        introduce(i, std::get<2>(cand[k]));
    }
  }

  void degrade(const sim_event& e) {
    ++res_.degrades;
    auto scale = [&](std::size_t a, std::size_t b) {
      if (a == b)
        net_.intra_region.bandwidth_mbps *= e.factor;
      else
        net_.bandwidth_mbps[a][b] *= e.factor;
    };
    scale(e.region_a, e.region_b);
    if (e.region_a != e.region_b)
      scale(e.region_b, e.region_a);
    // Routers see it through measurements: the centralized router's and GWTF's link probes
    // after the detection delay (their next measurement); SWARM in its calls' wall time.
    if (r_ == sim_router::centralized)
      at(now_ + s_.detect_s, [this] { recompute_optimum(); });
    if (r_ == sim_router::gwtf)
      at(now_ + s_.detect_s, [this, a = e.region_a, b = e.region_b] {
        for (std::size_t i = 0; i < hosts_.size(); ++i)
          for (auto j : known_[i]) {
            if (!alive_[i] || !alive_[j] || stage_of(j) != (stage_of(i) + 1) % S())
              continue;
            auto ri = hosts_[i].region, rj = hosts_[j].region;
            if ((ri == a && rj == b) || (ri == b && rj == a)) {
              balancers_[i]->add_peer(hosts_[j].name, stage_of(j), cost(i, j), link_s(i, j));
              balancers_[j]->add_peer(hosts_[i].name, stage_of(i), cost(j, i), link_s(j, i));
            }
          }
      });
  }

  // Failure detection fired: routers learn of it; microbatches whose gradients at h were
  // already accumulated are repaired (GWTF, optimal) or restarted (SWARM).
  void detected(std::size_t h) {
    if (r_ == sim_router::gwtf) {
      auto knew = std::move(known_[h]);
      known_[h].clear();
      for (auto i : knew) {
        known_[i].erase(h);
        if (alive_[i] && balancers_[i]) {
          deliver(i, balancers_[i]->remove_peer(hosts_[h].name, tick_));
          meet(i);
        }
      }
    }
    if (r_ == sim_router::centralized)
      recompute_optimum();
    if (swarm() && s_.swarm.rebalance_ms > 0 && stage_of(h) > 0 && live_at(stage_of(h)) == 0)
      rebalance(stage_of(h)); // SWARM's peers notice an empty stage and one moves there at once
    if (ending_)
      return; // the iteration is being aggregated: every share was computed before the crash
    auto st = static_cast<std::size_t>(stage_of(h));
    for (auto* mb : mbs_) {
      if (!mb->launched || mb->path.size() <= st || backward_host(*mb, static_cast<int>(st)) != h
          || !mb->bwd_done[st])
        continue;
      if (swarm()) { // its accumulated gradients died with it: another microbatch must replace it
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
    auto t = transfer_activation(prev, yy);
    auto* m = &mb;
    auto again = [this, m, s, yy] { // yy died: its peers learn it at detection, then retry
      at(std::max(now_, detect_at_[yy]), [this, m, s] {
        --pending_repairs_;
        repair(*m, s);
      });
    };
    at(t, [this, m, s, yy, again] {
      if (!alive_[yy]) {
        again();
        return;
      }
      admit_job(
        yy,
        [this, m, s, yy, again] {
          compute(
            yy, *m, s, hosts_[yy].compute_s,
            [this, yy] {
              free_job(yy);
              --pending_repairs_;
              maybe_end_iteration();
            },
            again,
            false); // a job of its own: the microbatch may still be on its way back
        },
        again);
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
    if (swarm() && s_.swarm.rebalance_ms > 0 && now_ >= next_rebalance_) {
      next_rebalance_ = now_ + s_.swarm.rebalance_ms / 1000.0;
      rebalance(-1);
    }
    bound_hosts_.clear();
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      if (alive_[h])
        bound_hosts_.insert({h, stage_of(h)});
    iter_net_ = net_;
    for (auto h : holders_)
      for (int j = 0; j < s_.microbatches_per_holder; ++j) {
        all_.push_back(std::make_unique<microbatch>());
        all_.back()->holder = h;
        all_.back()->index = j;
        mbs_.push_back(all_.back().get());
      }
    outstanding_ = static_cast<int>(mbs_.size());
    res_.flows.push_back(route_count());
    if (swarm())
      for (auto& [h, sw] : swarm_)
        if (sw->refresh_due(now_))
          sw->refresh(now_, live_relays());
    double prev_len = res_.iteration_s.empty() ? 1.0 : res_.iteration_s.back();
    auto range = events_by_iteration_.equal_range(iteration_);
    for (auto it = range.first; it != range.second; ++it) {
      const auto* e = &it->second;
      at(now_ + e->at_fraction * prev_len, [this, e] {
        if (!finished_)
          apply(*e);
      });
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
    double allreduce = 0; // its least possible time, for the bound
    for (int st = 0; st < S(); ++st) {
      std::vector<std::size_t> reps;
      for (std::size_t h = 0; h < hosts_.size(); ++h)
        if (alive_[h] && stage_of(h) == st)
          reps.push_back(h);
      // All-reduce volume: each replica sends 2 (R-1)/R of the stage's gradient, 2/R to each peer.
      double full = st == 0 && s_.holder_gradient_bytes > 0 ? s_.holder_gradient_bytes : s_.stage_gradient_bytes;
      double share = reps.empty() ? 0 : 2 * full / static_cast<double>(reps.size());
      for (auto a : reps)
        for (auto b : reps)
          if (a != b)
            end = std::max(end, transfer(a, b, share));
      allreduce = std::max(allreduce, allreduce_lower_bound(reps, full, [this](std::size_t a, std::size_t b) {
                                                              return est(a, b);
                                                            }));
    }
    record_bound(allreduce);
    res_.aggregation_s.push_back(end - now_);
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

  // The proven lower bound on this iteration's time (routing/bound.hpp) from every host
  // that could work in it, on the links as they were when it started (links only degrade).
  void record_bound(double allreduce_s) {
    std::vector<bound_host> hosts;
    std::vector<std::size_t> ids;
    for (auto& [h, st] : bound_hosts_) {
      hosts.push_back({st, stash_capacity_[h], hosts_[h].compute_s});
      ids.push_back(h);
    }
    // With adaptive compression no link carries fewer bytes than min_density's sparse tensor:
    // the bound takes that for every link (and no compress time), so it stays a lower bound.
    double bytes = s_.activation_bytes;
    if (s_.compression) {
      auto values = static_cast<std::int64_t>(s_.activation_bytes / static_cast<double>(s_.compression->value_bytes));
      auto forced = *s_.compression;
      forced.every_link = true;
      bytes = std::min(bytes, plan_wire(forced, values, std::nullopt, 0).bytes);
    }
    auto b = bound_iteration(hosts, S(), s_.microbatches_per_holder, bytes,
                             [&](std::size_t a, std::size_t c) {
                               return to_estimate(iter_net_.link(hosts_[ids[a]].region, hosts_[ids[c]].region));
                             },
                             allreduce_s);
    res_.bound_iteration_s.push_back(b.seconds);
    res_.bound_s += b.seconds;
  }

  int live_at(int stage) const {
    int n = 0;
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      n += alive_[h] && stage_of(h) == stage;
    for (auto& [h, to] : moving_)
      n += to == stage;
    return n;
  }

  // SWARM's adaptive rebalancing (its paper, "adaptive swarm rebalancing"): from what the
  // trainers measured, one peer of the fastest stage moves to the slowest stage when that
  // raises the slower of the two; `empty` >= 1: that stage has no peer left, one moves there
  // whatever it costs. The mover leaves its stage (its work of the iteration is lost, as a
  // leave), downloads the new stage's weights, and serves it.
  void rebalance(int empty) {
    std::vector<double> stage_tp(static_cast<std::size_t>(S()), 0.0);
    std::vector<std::vector<std::pair<double, std::size_t>>> peers(static_cast<std::size_t>(S()));
    for (std::size_t h = 0; h < hosts_.size(); ++h) {
      if (!alive_[h] || stage_of(h) <= 0)
        continue;
      double sum = 0;
      int n = 0;
      for (auto& [t, sw] : swarm_)
        if (auto tp = sw->throughput(hosts_[h].name)) {
          sum += *tp;
          ++n;
        }
      double tp = n > 0 ? sum / n : 0.0; // unmeasured: counts for nothing yet
      stage_tp[static_cast<std::size_t>(stage_of(h))] += tp;
      peers[static_cast<std::size_t>(stage_of(h))].emplace_back(tp, h);
    }
    int low = empty;
    if (low < 1) {
      low = 1;
      for (int st = 2; st < S(); ++st)
        if (stage_tp[static_cast<std::size_t>(st)] < stage_tp[static_cast<std::size_t>(low)])
          low = st;
    }
    int high = -1;
    for (int st = 1; st < S(); ++st)
      if (st != low && peers[static_cast<std::size_t>(st)].size() >= 2
          && (high < 0 || stage_tp[static_cast<std::size_t>(st)] > stage_tp[static_cast<std::size_t>(high)]))
        high = st;
    if (high < 0)
      return;
    double lo_tp = stage_tp[static_cast<std::size_t>(low)], hi_tp = stage_tp[static_cast<std::size_t>(high)];
    std::optional<std::size_t> mover;
    double best = empty >= 1 ? -1.0 : lo_tp; // a move must raise the slower of the two stages
    for (auto& [tp, h] : peers[static_cast<std::size_t>(high)]) {
      double after = std::min(lo_tp + tp, hi_tp - tp);
      if (after > best) {
        best = after;
        mover = h;
      }
    }
    if (!mover)
      return;
    auto p = *mover;
    ++res_.moves;
    crash(p, 0, false);
    moving_[p] = low;
    at(download(low, p), [this, p, low] {
      if (finished_ || moving_.count(p) == 0)
        return; // it crashed while downloading
      moving_.erase(p);
      hosts_[p].stage = low;
      alive_[p] = true;
      busy_until_[p] = now_; // what it queued for its old stage died with the move
      bound_hosts_.insert({p, low});
    });
  }

  // --- routers -------------------------------------------------------------------------

  std::vector<swarm_peer> live_relays() const {
    std::vector<swarm_peer> out;
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      if (alive_[h] && stage_of(h) > 0)
        out.push_back({hosts_[h].name, stage_of(h)});
    return out;
  }

  void setup_router() {
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      index_[hosts_[h].name] = h;
    switch (r_) {
      case sim_router::swarm:
      case sim_router::swarm_restart:
        for (auto h : holders_) {
          swarm_[h] = std::make_unique<swarm_router>(
            s_.swarm, S(), r_ == sim_router::swarm ? swarm_policy::stage_retry : swarm_policy::restart);
          swarm_[h]->refresh(0, live_relays());
        }
        break;
      case sim_router::centralized:
        recompute_optimum();
        break;
      case sim_router::gwtf: {
        balancers_.resize(hosts_.size());
        for (std::size_t i = 0; i < s_.hosts.size(); ++i)
          balancers_[i] = std::make_unique<flow_balancer>(hosts_[i].name, stage_of(i), S(),
                                                          hosts_[i].capacity, s_.gwtf, s_.seed);
        known_.resize(hosts_.size());
        for (std::size_t i = 0; i < s_.hosts.size(); ++i)
          meet(i);
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
      else // from the start too, as the runtime does: a holder that gets no ring does not wait forever
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
      double t = transfer(from, to, control_bytes); // queued behind activations on the same link
      auto msg = std::make_shared<wire::message>(std::move(o.msg));
      at(t, [this, from, to, msg] {
        if (alive_[to] && alive_[from])
          deliver(to, balancers_[to]->handle(hosts_[from].name, *msg, tick_));
      });
    }
  }

  std::vector<const held_flow*> gwtf_flows(std::size_t at, std::size_t holder) const {
    std::vector<const held_flow*> out;
    for (auto& [id, f] : balancers_[at]->flows())
      if (f.built && f.target == hosts_[holder].name && index_.count(f.next) && believed_alive(index_.at(f.next)))
        out.push_back(&f);
    return out;
  }

  void recompute_optimum() {
    std::vector<flow_node> nodes;
    std::vector<std::size_t> ids;
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      if (alive_[h]) {
        nodes.push_back({stage_of(h), hosts_[h].capacity});
        ids.push_back(h);
      }
    opt_paths_.clear();
    if (s_.gwtf.link_load) {
      // With link load (GWTF's cost model): rings per holder, congestion-priced, with global
      // knowledge of every link's load (routing/optimum.hpp congestion_rings).
      std::vector<std::size_t> hs;
      for (std::size_t n = 0; n < ids.size(); ++n)
        if (stage_of(ids[n]) == 0)
          hs.push_back(n);
      int per_holder = s_.microbatches_per_holder;
      for (auto n : hs)
        per_holder = std::min(per_holder, hosts_[ids[n]].capacity);
      auto rings = congestion_rings(
        nodes, S(), hs, per_holder, [&](std::size_t a, std::size_t b) { return cost(ids[a], ids[b]); },
        [&](std::size_t a, std::size_t b) { return link_s(ids[a], ids[b]); });
      for (std::size_t k = 0; k < hs.size(); ++k)
        for (auto& ring : rings[k]) {
          std::vector<std::size_t> path;
          for (auto n : ring)
            path.push_back(ids[n]);
          opt_paths_[ids[hs[k]]].push_back(std::move(path));
        }
      return;
    }
    auto mm = max_flow_min_max(nodes, S(), [&](std::size_t a, std::size_t b) { return cost(ids[a], ids[b]); });
    // The oracle is single-commodity (docs/routing.md): a unit path may leave one data holder
    // and return to another. Each path is given to the holder it costs least to close the
    // ring at (entry + return hop), every holder taking an equal share; the relay hops, the
    // flow count and the capacities stay the oracle's.
    std::vector<std::vector<std::size_t>> relays;
    for (auto& p : mm.paths) {
      std::vector<std::size_t> hosts;
      for (auto n : p)
        if (stage_of(ids[n]) != 0)
          hosts.push_back(ids[n]);
      if (!hosts.empty())
        relays.push_back(std::move(hosts));
    }
    if (relays.empty())
      return;
    auto quota = (relays.size() + holders_.size() - 1) / holders_.size();
    std::vector<std::tuple<double, std::size_t, std::size_t>> pairs; // cost, path, holder
    for (std::size_t k = 0; k < relays.size(); ++k)
      for (std::size_t hi = 0; hi < holders_.size(); ++hi) {
        auto h = holders_[hi];
        pairs.emplace_back(cost(h, relays[k].front()) + cost(relays[k].back(), h), k, hi);
      }
    std::sort(pairs.begin(), pairs.end());
    std::vector<bool> given(relays.size(), false);
    std::vector<std::size_t> taken(holders_.size(), 0);
    for (auto& [c, k, hi] : pairs) {
      if (given[k] || taken[hi] >= quota)
        continue;
      given[k] = true;
      ++taken[hi];
      auto h = holders_[hi];
      std::vector<std::size_t> ring{h};
      ring.insert(ring.end(), relays[k].begin(), relays[k].end());
      opt_paths_[h].push_back(std::move(ring));
    }
    // Fewer paths than holders: a holder left without one shares its cheapest (the capacity
    // queues serialise the sharers), so that no holder starves.
    for (auto& [c, k, hi] : pairs) {
      auto h = holders_[hi];
      if (!opt_paths_[h].empty())
        continue;
      std::vector<std::size_t> ring{h};
      ring.insert(ring.end(), relays[k].begin(), relays[k].end());
      opt_paths_[h].push_back(std::move(ring));
    }
  }

  bool routes_ready() const {
    if (swarm())
      return true;
    for (auto h : holders_)
      if (concurrency(h) == 0)
        return false;
    return true;
  }

  int concurrency(std::size_t holder) const {
    switch (r_) {
      case sim_router::swarm:
      case sim_router::swarm_restart: return s_.microbatches_per_holder;
      case sim_router::centralized: {
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
        for (std::size_t h = 0; h < hosts_.size(); ++h)
          live1 += known_[holder].count(h) > 0 && believed_alive(h) && stage_of(h) == 1 % S();
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
    if (swarm())
      return 0;
    int n = 0;
    for (auto h : holders_)
      n += concurrency(h);
    return n;
  }

  // A hop without a route: a host of stage s that `from` knows and believes alive (GWTF: its
  // introduced peers; when `from` is gone, the peers of the microbatch's other hosts; the
  // centralized router knows every host), the cheapest by the cost model, spread over the
  // candidates by microbatch index. Nobody knows other hosts' queues. Counted in
  // fallback_hops.
  std::optional<std::size_t> fallback(const microbatch& mb, int s, std::size_t from) {
    std::vector<std::pair<double, std::size_t>> cand;
    std::set<std::size_t> seen;
    auto consider = [&](std::size_t h) {
      if (stage_of(h) == s && believed_alive(h) && seen.insert(h).second)
        cand.emplace_back(cost(from, h), h);
    };
    if (r_ != sim_router::gwtf) {
      for (std::size_t h = 0; h < hosts_.size(); ++h)
        consider(h);
    } else {
      if (believed_alive(from))
        for (auto h : known_[from])
          consider(h);
      if (cand.empty())
        for (auto p : mb.path)
          if (believed_alive(p))
            for (auto h : known_[p])
              consider(h);
    }
    if (cand.empty())
      return std::nullopt;
    std::sort(cand.begin(), cand.end());
    ++res_.fallback_hops;
    return cand[static_cast<std::size_t>(mb.index) % cand.size()].second;
  }

  // SWARM: the trainer's queue picks a peer of stage s for the call.
  std::optional<std::size_t> swarm_choose(microbatch& mb, int s, swarm_task task) {
    auto& sw = *swarm_[mb.holder];
    if (sw.refresh_due(now_)) // the periodic peer-list refresh (SWARM's DHT lookup)
      sw.refresh(now_, live_relays());
    for (std::size_t tries = 0; tries < hosts_.size(); ++tries) {
      auto c = sw.choose(s, task);
      if (!c)
        break;
      auto h = index_.at(*c);
      if ((alive_[h] && stage_of(h) == s) || (!alive_[h] && now_ < detect_at_[h]))
        return h; // SWARM cannot know of a crash before its timeout
      sw.failed(*c, task, now_); // gone or serving another stage now: the call errs
    }
    return std::nullopt;
  }

  // The host of stage s for mb, arriving from `from`.
  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) {
    switch (r_) {
      case sim_router::swarm:
      case sim_router::swarm_restart:
        return swarm_choose(mb, s, swarm_task::forward);
      case sim_router::centralized: {
        auto it = opt_paths_.find(mb.holder);
        if (it != opt_paths_.end() && !it->second.empty()) {
          auto& p = it->second[mb.flow_slot % it->second.size()];
          auto st = static_cast<std::size_t>(s);
          if (st < p.size() && believed_alive(p[st]) && stage_of(p[st]) == s)
            return p[st];
        }
        return fallback(mb, s, from);
      }
      case sim_router::gwtf: {
        // A flow of this holder entering `from` from the hop before it, else any of its flows.
        const std::string& came_from = s >= 2 ? hosts_[mb.path[static_cast<std::size_t>(s - 2)]].name : std::string{};
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
        return fallback(mb, s, from);
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
  bool remat_ = false; // GWTF/centralized relays keep inputs only and recompute (gwtf.backward)
  std::vector<int> stash_capacity_; // per host: stashes its memory holds (the scenario's capacity)
  int iteration_ = 0;
  double iter_start_ = 0;
  int outstanding_ = 0, pending_repairs_ = 0;
  std::int64_t tick_ = 0;
  std::vector<std::size_t> holders_;
  std::vector<bool> alive_;
  std::vector<double> busy_until_, iter_work_, crash_time_;
  std::vector<int> inflight_;
  std::vector<std::uint64_t> life_; // bumped when a host dies or moves: its running work is void
  std::vector<std::deque<waiter>> waiting_;
  double last_progress_ = 0;
  std::map<std::size_t, std::vector<std::pair<double, double>>> running_;
  std::unordered_map<std::uint64_t, double> link_free_; // (from << 32 | to) -> when the link is free
  std::vector<sim_host> hosts_; // the scenario's, then the joiners (stage set when they join)
  network_matrix net_;          // degrades as links do
  std::vector<sim_event> trace_;
  std::multimap<int, sim_event> events_by_iteration_;
  std::vector<double> detect_at_; // when peers learn of a crash or leave
  std::vector<bool> entered_;     // joiners: download done
  std::vector<std::set<std::size_t>> known_; // GWTF: whom each host has been introduced to
  std::set<std::size_t> left_before_entering_;
  std::vector<std::unique_ptr<microbatch>> all_; // stable addresses for pending events
  std::vector<microbatch*> mbs_;                 // this iteration's
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::size_t, std::unique_ptr<swarm_router>> swarm_;
  std::vector<std::unique_ptr<flow_balancer>> balancers_;
  std::map<std::size_t, std::vector<std::vector<std::size_t>>> opt_paths_;
  std::map<std::size_t, double> no_flow_since_; // GWTF: holders without a ring, since
  std::map<std::size_t, int> moving_;            // SWARM: peers downloading their new stage's weights
  double next_rebalance_ = 0;                    // SWARM: when rebalancing is next due
  std::set<std::pair<std::size_t, int>> bound_hosts_; // (host, stage) that could work this iteration
  network_matrix iter_net_;                      // the links when this iteration started
};

} // namespace

sim_result simulate(const sim_scenario& s, sim_router router) {
  engine e{s, router};
  return e.run();
}

} // namespace gwtf::sim
