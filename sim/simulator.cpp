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

// When each directed link is next free, by (from << 32 | to): an open-addressing table
// (linear probing, insert-only, keys < 2^64 - 1). It is looked up for every message the
// simulated hosts send; std::unordered_map's node per entry and modulo cost ~9% of a
// 256-host run.
//
// A stage's all-reduce sends a share over every pair of its replicas (1.5 million pairs per
// stage at 10,000 hosts): it is recorded as a round and applied to a pair's clock when the
// pair is next looked up (or at the next round, for the pairs in the table), in order, as if
// applied at once. Between two rounds no pair still waits for an earlier one (an iteration
// ends after its all-reduce's last share arrived), so a pair not in the table is free when
// a round starts.
class link_clock {
public:
  /// One all-reduce: at `at`, every two hosts with the same stage >= 0 in `stage` send each
  /// other `bytes[stage]` at `bandwidth[region][region]` bytes/s.
  struct round {
    double at = 0;
    std::vector<std::int16_t> stage;               ///< per host; -1: not in this all-reduce
    std::vector<double> bytes;                     ///< per stage
    std::vector<std::vector<double>> bandwidth;    ///< region x region, bytes/s
    std::vector<std::vector<double>> latency;      ///< region x region, s
  };

  explicit link_clock(std::vector<std::size_t> region = {}) : region_(std::move(region)) {}

  /// When a -> b is next free, all-reduces included.
  double& operator[](std::uint64_t key) {
    if (2 * (size_ + 1) > slots_.size())
      grow();
    auto& s = find(key);
    if (s.key == empty) {
      s.key = key;
      s.free = 0;
      s.rounds = 0;
      ++size_;
    }
    catch_up(s);
    return s.free;
  }

  /// Records round `r` and applies it to the pairs in the table; returns when the last of
  /// their shares arrives (-inf if none of them takes part). The pairs not in the table are
  /// the caller's: each starts at `r.at`.
  double add(round r) {
    rounds_.push_back(std::move(r));
    auto& now = rounds_.back();
    double last = -std::numeric_limits<double>::infinity();
    for (auto& s : slots_) {
      if (s.key == empty)
        continue;
      catch_up(s, rounds_.size() - 1);
      auto a = static_cast<std::size_t>(s.key >> 32), b = static_cast<std::size_t>(s.key & 0xffffffffu);
      s.rounds = rounds_.size();
      auto st = now.stage[a];
      if (st < 0 || st != now.stage[b])
        continue;
      auto ra = region_[a], rb = region_[b];
      s.free = std::max(now.at, s.free) + now.bytes[static_cast<std::size_t>(st)] / now.bandwidth[ra][rb];
      last = std::max(last, s.free + now.latency[ra][rb]);
    }
    return last;
  }

private:
  static constexpr std::uint64_t empty = ~std::uint64_t{0};
  struct slot {
    std::uint64_t key = empty;
    double free = 0;
    std::size_t rounds = 0; ///< all-reduce rounds applied
  };
  void catch_up(slot& s, std::size_t upto = std::numeric_limits<std::size_t>::max()) {
    upto = std::min(upto, rounds_.size());
    if (s.rounds >= upto)
      return;
    auto a = static_cast<std::size_t>(s.key >> 32), b = static_cast<std::size_t>(s.key & 0xffffffffu);
    for (; s.rounds < upto; ++s.rounds) {
      auto& r = rounds_[s.rounds];
      auto st = r.stage[a];
      if (st >= 0 && st == r.stage[b])
        s.free = std::max(r.at, s.free) + r.bytes[static_cast<std::size_t>(st)] / r.bandwidth[region_[a]][region_[b]];
    }
  }
  slot& find(std::uint64_t key) {
    auto mask = slots_.size() - 1;
    for (auto i = (key * 0x9E3779B97F4A7C15ull) >> shift_;; i = (i + 1) & mask)
      if (slots_[i].key == key || slots_[i].key == empty)
        return slots_[i];
  }
  void grow() {
    std::vector<slot> old(slots_.empty() ? 1024 : 2 * slots_.size());
    old.swap(slots_);
    shift_ = 64;
    for (auto n = slots_.size(); n > 1; n >>= 1)
      --shift_;
    for (auto& s : old)
      if (s.key != empty)
        find(s.key) = s;
  }
  std::vector<slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;
  std::vector<std::size_t> region_; ///< per host
  std::vector<round> rounds_;
};

class engine {
public:
  engine(const sim_scenario& s, sim_router r) : s_(s), hosts_(s.hosts), net_(s.net) {
    router_ = make_router(r);
    trace_ = churn_trace(s);
    for (auto& e : trace_)
      if (e.kind == sim_event_kind::join)
        hosts_.push_back(e.joiner); // at index e.host: the trace numbers joiners in order
    // GWTF (and the centralized router, its comparison point) with rematerialisation: a relay
    // keeps only a microbatch's stage input between forward and backward, so the memory of
    // `capacity` stashes holds one stash being recomputed plus (capacity - 1) stashes' worth
    // of inputs.
    remat_ = router_->rematerialises();
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
    std::vector<std::size_t> regions;
    for (auto& h : hosts_)
      regions.push_back(h.region);
    link_free_ = link_clock(std::move(regions));
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
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      index_[hosts_[h].name] = h;
    router_->start();
    for (auto& e : trace_)
      events_by_iteration_.emplace(e.iteration, e);
    at(0, [this] { try_start_iteration(); });
    while (!pq_.empty() && !finished_) {
      // Moved out, not copied: the handler (a std::function, often with a message inside)
      // would be copied for every event. The heap's order does not look at it.
      auto e = std::move(const_cast<event&>(pq_.top()));
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
    router_->finish(res_);
    return res_;
  }

private:
  static constexpr double stall_s = 3600;
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
      std::fprintf(stderr, "%s mb h%zu i%d launched %d epoch %llu path", to_string(router_->kind()), mb->holder, mb->index,
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
    mb.remat.assign(static_cast<std::size_t>(S()), router_->backward_calls());
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
    return router_->trainer() && !alive_[prev] ? mb.holder : prev;
  }

  // Who sends stage s its output gradient: the host that ran stage s+1's backward (the data
  // holder for the last stage); SWARM's trainer again keeps a copy.
  std::size_t gradient_source(const microbatch& mb, int s) const {
    if (s + 1 >= S())
      return mb.holder;
    auto from = backward_host(mb, s + 1);
    return router_->trainer() && !alive_[from] ? mb.holder : from;
  }

  std::size_t backward_host(const microbatch& mb, int s) const {
    auto st = static_cast<std::size_t>(s);
    return mb.remat[st] ? mb.bwd_host[st] : mb.path[st];
  }

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
        router_->call_done(mb, h, s, swarm_task::forward);
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
    if (s > 0)
      router_->backward_sent(mb, s);
    ship(mb, gradient_source(mb, s), mb.path[st], &engine::arrive_backward, s);
  }

  // SWARM's backward call: a peer of stage s chosen by the queue gets the stage's saved input
  // and the output gradient, recomputes the forward and runs the backward.
  void swarm_backward_call(microbatch& mb, int s) {
    auto st = static_cast<std::size_t>(s);
    auto y = router_->backward_peer(mb, s);
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
      router_->call_done(mb, h, s, swarm_task::backward);
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
    switch (router_->call_failed(mb, dead, backward)) {
      case recovery::restart:
        restart(mb);
        return;
      case recovery::retry_stage: // SWARM's stage-level retry: another peer, from the saved input and gradient
        release(mb, s); // a stash left on a live forward peer is of no use any more
        ++mb.epoch;
        swarm_backward_call(mb, s);
        return;
      case recovery::resend:
        break;
    }
    ++mb.epoch;
    // The hop that re-sends is the last live one before s: when the hosts between died too,
    // their stashes and buffered outputs went with them, and each of their stages is
    // recomputed on a replacement (as the runtime's chain of re-sends does). SWARM's trainer
    // keeps every stage's input: it retries stage s itself (input_source).
    int k = s - 1;
    while (!router_->trainer() && k >= 1 && !alive_[mb.path[static_cast<std::size_t>(k)]])
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
    router_->entered(j);
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
    router_->links_degraded(e.region_a, e.region_b);
  }

  // Failure detection fired: routers learn of it; microbatches whose gradients at h were
  // already accumulated are repaired (GWTF, optimal) or restarted (SWARM).
  void detected(std::size_t h) {
    router_->detected(h);
    if (ending_)
      return; // the iteration is being aggregated: every share was computed before the crash
    auto st = static_cast<std::size_t>(stage_of(h));
    for (auto* mb : mbs_) {
      if (!mb->launched || mb->path.size() <= st || backward_host(*mb, static_cast<int>(st)) != h
          || !mb->bwd_done[st])
        continue;
      if (router_->trainer()) { // its accumulated gradients died with it: another microbatch must replace it
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
    router_->before_iteration();
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
    router_->iteration_started();
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
    int limit = router_->concurrency(holder);
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
    // Stage aggregation: every live replica sends its gradient share to the others, over
    // every pair's link (link_clock applies the round to each pair when it is next used).
    // The last share to arrive: the pairs in the link table report theirs; any other pair's
    // link is free now, so its share arrives now + its transfer, which depends on its two
    // regions only.
    auto R = net_.regions.size();
    link_clock::round round;
    round.at = now_;
    round.stage.assign(hosts_.size(), -1);
    round.bytes.assign(static_cast<std::size_t>(S()), 0.0);
    round.bandwidth.assign(R, std::vector<double>(R, 0.0));
    round.latency.assign(R, std::vector<double>(R, 0.0));
    for (std::size_t a = 0; a < R; ++a)
      for (std::size_t b = 0; b < R; ++b) {
        auto e = to_estimate(net_.link(a, b));
        round.bandwidth[a][b] = e.bandwidth_bytes_s;
        round.latency[a][b] = e.latency_s;
      }
    double end = now_;
    double allreduce = 0; // its least possible time, for the bound
    for (int st = 0; st < S(); ++st) {
      std::vector<std::size_t> per_region(R, 0);
      std::vector<std::size_t> some; // up to two replicas per region: every pair of regions
      std::size_t reps = 0;
      for (std::size_t h = 0; h < hosts_.size(); ++h)
        if (alive_[h] && stage_of(h) == st) {
          round.stage[h] = static_cast<std::int16_t>(st);
          ++reps;
          if (per_region[hosts_[h].region]++ < 2)
            some.push_back(h);
        }
      // All-reduce volume: each replica sends 2 (R-1)/R of the stage's gradient, 2/R to each peer.
      double full = st == 0 && s_.holder_gradient_bytes > 0 ? s_.holder_gradient_bytes : s_.stage_gradient_bytes;
      double share = reps == 0 ? 0 : 2 * full / static_cast<double>(reps);
      round.bytes[static_cast<std::size_t>(st)] = share;
      for (std::size_t a = 0; a < R; ++a)
        for (std::size_t b = 0; b < R; ++b)
          if (per_region[a] > 0 && per_region[b] > (a == b ? 1u : 0u))
            end = std::max(end, now_ + share / round.bandwidth[a][b] + round.latency[a][b]);
      allreduce = std::max(allreduce, allreduce_lower_bound(some, full, [this](std::size_t a, std::size_t b) {
                                                              return est(a, b);
                                                            }, reps));
    }
    end = std::max(end, link_free_.add(std::move(round)));
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
      hosts.push_back({st, stash_capacity_[h], hosts_[h].compute_s, static_cast<std::int64_t>(hosts_[h].region)});
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

  // --- routers -------------------------------------------------------------------------
  //
  // What differs between the routers is behind one interface; everything else above (hosts,
  // links, compute, capacity, churn, detection, aggregation, the bound) is common to all.
  // A router sees the engine's state only through what its hosts could know (believed
  // liveness, measured links after the detection delay).

  /// What the pipeline does after a call on a dead host failed.
  enum class recovery {
    resend,      ///< the last live hop before it re-sends (GWTF, centralized; SWARM's forward)
    retry_stage, ///< SWARM's stage-level retry of a backward on another peer
    restart,     ///< the whole microbatch again from its data holder (swarm-restart)
  };

  class router {
  public:
    explicit router(engine& e) : e_(e) {}
    virtual ~router() = default;
    virtual sim_router kind() const = 0;

    /// Relays keep only a microbatch's stage input and recompute the forward for the backward.
    virtual bool rematerialises() const { return false; }
    /// The routes exist before the first iteration (index_ is filled).
    virtual void start() = 0;
    /// Microbatches a data holder may have in flight (its routes).
    virtual int concurrency(std::size_t holder) const = 0;
    /// False: no routes to wait for or count (SWARM chooses a peer per call).
    virtual bool has_routes() const { return true; }
    /// The host of stage s for mb, arriving from `from`; nullopt: none now (retried later).
    virtual std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) = 0;
    /// Hosts `from` knows, offered to `consider` for a hop without a route (default: all).
    /// `consider` says whether it took the host as a candidate.
    virtual void fallback_candidates(const microbatch&, std::size_t, const std::function<bool(std::size_t)>& consider) {
      for (std::size_t h = 0; h < e_.hosts_.size(); ++h)
        consider(h);
    }
    /// A joiner finished its download and entered.
    virtual void entered(std::size_t) {}
    /// The links between regions a and b degraded (routers learn it by measuring).
    virtual void links_degraded(std::size_t, std::size_t) {}
    /// The peers learnt that h is gone (crash or leave).
    virtual void detected(std::size_t) {}
    /// An iteration is about to start (its microbatches are not made yet).
    virtual void before_iteration() {}
    /// An iteration's microbatches are made and its route count recorded.
    virtual void iteration_started() {}
    /// The run ended: router-specific counters into `res`.
    virtual void finish(sim_result&) {}

    // SWARM's trainer: a trainer per data holder calls peers and keeps every stage's input
    // and output gradient, so a stage's input comes from the holder when its sender is gone,
    // and a lost accumulated gradient restarts the microbatch. Off for the others.
    virtual bool trainer() const { return false; }
    /// Backward calls go to any peer of the stage, which recomputes the forward.
    virtual bool backward_calls() const { return false; }
    virtual std::optional<std::size_t> backward_peer(microbatch&, int) { return std::nullopt; }
    /// A backward is sent to stage s > 0 (stash mode: the forward's host).
    virtual void backward_sent(microbatch&, int) {}
    /// Host h finished mb's call of stage s.
    virtual void call_done(const microbatch&, std::size_t, int, swarm_task) {}
    /// mb's call on `dead` failed (its sender knows it now).
    virtual recovery call_failed(const microbatch&, std::size_t, bool) { return recovery::resend; }

  protected:
    engine& e_;
  };

  // GWTF: one flow_balancer per host, wired through the simulated links; microbatches follow
  // the built flows of their holder.
  class gwtf_router final : public router {
  public:
    using router::router;
    sim_router kind() const override { return sim_router::gwtf; }
    bool rematerialises() const override { return e_.s_.gwtf.backward == gwtf_backward::rematerialize; }

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

  // The centralized router: global knowledge, rings rebuilt at every change it can observe.
  class centralized_router final : public router {
  public:
    using router::router;
    sim_router kind() const override { return sim_router::centralized; }
    bool rematerialises() const override { return e_.s_.gwtf.backward == gwtf_backward::rematerialize; }
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

  // SWARM: a router (trainer) per data holder chooses a peer per call (routing/swarm.hpp).
  class swarm_sim_router final : public router {
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
      auto& e = e_;
      if (e.s_.swarm.rebalance_ms > 0 && e.stage_of(h) > 0 && live_at(e.stage_of(h)) == 0)
        rebalance(e.stage_of(h)); // SWARM's peers notice an empty stage and one moves there at once
    }

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

    recovery call_failed(const microbatch& mb, std::size_t dead, bool backward) override {
      auto rec = swarm_[mb.holder]->failed(e_.hosts_[dead].name, backward ? swarm_task::backward : swarm_task::forward,
                                           e_.now_);
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
        if ((e.alive_[h] && e.stage_of(h) == s) || (!e.alive_[h] && e.now_ < e.detect_at_[h]))
          return h; // SWARM cannot know of a crash before its timeout
        sw.failed(*c, task, e.now_); // gone or serving another stage now: the call errs
      }
      return std::nullopt;
    }

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
      std::vector<double> stage_tp(static_cast<std::size_t>(e.S()), 0.0);
      std::vector<std::vector<std::pair<double, std::size_t>>> peers(static_cast<std::size_t>(e.S()));
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
        double tp = n > 0 ? sum / n : 0.0; // unmeasured: counts for nothing yet
        stage_tp[static_cast<std::size_t>(e.stage_of(h))] += tp;
        peers[static_cast<std::size_t>(e.stage_of(h))].emplace_back(tp, h);
      }
      int low = empty;
      if (low < 1) {
        low = 1;
        for (int st = 2; st < e.S(); ++st)
          if (stage_tp[static_cast<std::size_t>(st)] < stage_tp[static_cast<std::size_t>(low)])
            low = st;
      }
      int high = -1;
      for (int st = 1; st < e.S(); ++st)
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
  };

  std::unique_ptr<router> make_router(sim_router r) {
    switch (r) {
      case sim_router::gwtf: return std::make_unique<gwtf_router>(*this);
      case sim_router::centralized: return std::make_unique<centralized_router>(*this);
      case sim_router::swarm: return std::make_unique<swarm_sim_router>(*this, swarm_policy::stage_retry);
      case sim_router::swarm_restart: return std::make_unique<swarm_sim_router>(*this, swarm_policy::restart);
    }
    return nullptr;
  }

  bool routes_ready() const {
    if (!router_->has_routes())
      return true;
    for (auto h : holders_)
      if (router_->concurrency(h) == 0)
        return false;
    return true;
  }

  int route_count() const {
    if (!router_->has_routes())
      return 0;
    int n = 0;
    for (auto h : holders_)
      n += router_->concurrency(h);
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
    router_->fallback_candidates(mb, from, [&](std::size_t h) {
      if (stage_of(h) != s || !believed_alive(h) || !seen.insert(h).second)
        return false;
      cand.emplace_back(cost(from, h), h);
      return true;
    });
    if (cand.empty())
      return std::nullopt;
    std::sort(cand.begin(), cand.end());
    ++res_.fallback_hops;
    return cand[static_cast<std::size_t>(mb.index) % cand.size()].second;
  }

  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) { return router_->route(mb, s, from); }

  const sim_scenario& s_;
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
  std::vector<std::size_t> holders_;
  std::vector<bool> alive_;
  std::vector<double> busy_until_, iter_work_, crash_time_;
  std::vector<int> inflight_;
  std::vector<std::uint64_t> life_; // bumped when a host dies or moves: its running work is void
  std::vector<std::deque<waiter>> waiting_;
  double last_progress_ = 0;
  std::map<std::size_t, std::vector<std::pair<double, double>>> running_;
  link_clock link_free_; // (from << 32 | to) -> when the link is free
  std::vector<sim_host> hosts_; // the scenario's, then the joiners (stage set when they join)
  network_matrix net_;          // degrades as links do
  std::vector<sim_event> trace_;
  std::multimap<int, sim_event> events_by_iteration_;
  std::vector<double> detect_at_; // when peers learn of a crash or leave
  std::vector<bool> entered_;     // joiners: download done
  std::set<std::size_t> left_before_entering_;
  std::vector<std::unique_ptr<microbatch>> all_; // stable addresses for pending events
  std::vector<microbatch*> mbs_;                 // this iteration's
  std::unordered_map<std::string, std::size_t> index_;
  std::unique_ptr<router> router_; // what differs between the routers
  std::map<std::size_t, int> moving_;            // SWARM: peers downloading their new stage's weights
  std::set<std::pair<std::size_t, int>> bound_hosts_; // (host, stage) that could work this iteration
  network_matrix iter_net_;                      // the links when this iteration started
};

} // namespace

sim_result simulate(const sim_scenario& s, sim_router router) {
  engine e{s, router};
  return e.run();
}

} // namespace gwtf::sim
