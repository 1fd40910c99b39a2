// The engine: set-up and the event loop, links and transfers, compute and capacity.
#include "sim/engine.hpp"

namespace gwtf::sim {

engine::engine(const sim_scenario& s, sim_router r) : s_(s), hosts_(s.hosts), net_(s.net) {
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
  up_free_.assign(n, 0.0);
  down_free_.assign(n, 0.0);
  up_busy_.resize(n);
  down_busy_.resize(n);
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

sim_result engine::run() {
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
    if (now_ - std::max(last_progress_, work_due_) > stall_s) {
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

// GWTF_SIM_DEBUG=1: the unfinished microbatches, for a stalled run.
void engine::dump() const {
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

// What one transfer a -> b can reach: the link, capped by a's uplink and b's downlink.
link_estimate engine::est(std::size_t a, std::size_t b) const {
  auto e = to_estimate(net_.link(hosts_[a].region, hosts_[b].region));
  e.bandwidth_bytes_s = std::min({e.bandwidth_bytes_s, hosts_[a].uplink_bytes_s, hosts_[b].downlink_bytes_s});
  return e;
}

double engine::cost(std::size_t a, std::size_t b) const {
  return edge_cost(hosts_[a].compute_s, hosts_[b].compute_s, est(a, b), est(b, a), s_.activation_bytes);
}

// How long one microbatch occupies the link a <-> b (the balancer's load term).
double engine::link_s(std::size_t a, std::size_t b) const {
  return link_occupancy_s(est(a, b), est(b, a), s_.activation_bytes);
}

// A transfer of `bytes` a -> b that starts at `ready` (default: now): FIFO per directed link.
double engine::transfer(std::size_t a, std::size_t b, double bytes, std::optional<double> ready) {
  if (a == b)
    return ready.value_or(now_);
  auto e = to_estimate(net_.link(hosts_[a].region, hosts_[b].region)); // the link's own pipe
  auto& free = link_free_[(static_cast<std::uint64_t>(a) << 32) | b];
  double t0 = ready.value_or(now_);
  free = std::max(t0, free) + bytes / e.bandwidth_bytes_s;
  double end = free;
  auto card = [&](double& free, std::deque<std::pair<double, double>>& log, double rate) {
    double from = std::max(t0, free);
    free = from + bytes / rate;
    busy(log, from, free);
    end = std::max(end, free);
  };
  if (std::isfinite(hosts_[a].uplink_bytes_s))
    card(up_free_[a], up_busy_[a], hosts_[a].uplink_bytes_s);
  if (std::isfinite(hosts_[b].downlink_bytes_s))
    card(down_free_[b], down_busy_[b], hosts_[b].downlink_bytes_s);
  return end + e.latency_s;
}

void engine::busy(std::deque<std::pair<double, double>>& b, double from, double to) {
  if (!b.empty() && from <= b.back().second) // FIFO: it starts where the last one ended
    b.back().second = std::max(b.back().second, to);
  else
    b.emplace_back(from, to);
}

double engine::idle_end(const std::deque<std::pair<double, double>>& b, double from, double need) {
  double t = from;
  for (auto& [s, e] : b) {
    if (e <= t)
      continue;
    if (s > t) {
      if (s - t >= need)
        return t + need;
      need -= s - t;
    }
    t = e;
  }
  return t + need;
}

// One activation or activation gradient a -> b. With adaptive compression the link carries
// what routing/compression.hpp plans for it (its bandwidth, b's compute per call), and a
// sparse tensor first costs a its top-k and b the scatter back (compress_s_per_value per
// value of the dense tensor): a computes it right after the output it compresses (now),
// the transfer starts when it is done, and a's queued work waits that much longer.
double engine::transfer_activation(std::size_t a, std::size_t b) {
  return expect(send_activation(a, b));
}

double engine::send_activation(std::size_t a, std::size_t b) {
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
void engine::compute(std::size_t h, microbatch& mb, int stage, double seconds, std::function<void()> then,
             std::function<void()> on_crash, bool check_epoch) {
  double start = std::max(now_, busy_until_[h]);
  double end = expect(start + seconds);
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
void engine::admit(std::size_t h, microbatch& mb, bool backward, std::function<void()> then) {
  if (inflight_[h] < hosts_[h].capacity) {
    ++inflight_[h];
    mb.holds[static_cast<std::size_t>(stage_of(h))] = true;
    then();
    return;
  }
  waiting_[h].push_back({&mb, mb.epoch, backward, std::move(then), {}});
}

void engine::release(microbatch& mb, int stage) {
  auto st = static_cast<std::size_t>(stage);
  if (!mb.holds[st])
    return;
  mb.holds[st] = false;
  auto h = mb.path[st];
  --inflight_[h];
  drain(h);
}

// Hands freed slots of h to the queue.
void engine::drain(std::size_t h) {
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
void engine::admit_job(std::size_t h, std::function<void()> then, std::function<void()> lost) {
  if (inflight_[h] < hosts_[h].capacity) {
    ++inflight_[h];
    then();
    return;
  }
  waiting_[h].push_back({nullptr, 0, true, std::move(then), std::move(lost)});
}

void engine::free_job(std::size_t h) {
  --inflight_[h];
  drain(h);
}

// What a host's peers believe: entered, and not yet known dead (a crash is learnt
// detect_s after it happens).
bool engine::believed_alive(std::size_t h) const {
  return entered_[h] && (alive_[h] || now_ < detect_at_[h]);
}

std::unique_ptr<engine::router> engine::make_router(sim_router r) {
  switch (r) {
    case sim_router::gwtf: return make_gwtf_router(*this);
    case sim_router::centralized: return make_centralized_router(*this);
    case sim_router::swarm: return make_swarm_router(*this, swarm_policy::stage_retry);
    case sim_router::swarm_restart: return make_swarm_router(*this, swarm_policy::restart);
    case sim_router::atom: break; // no router of the pipeline: simulate() runs sim/atom.cpp
  }
  throw std::invalid_argument{std::string{"the engine has no router '"} + to_string(r) + "'"};
}

bool engine::routes_ready() const {
  if (!router_->has_routes())
    return true;
  for (auto h : holders_)
    if (router_->concurrency(h) == 0)
      return false;
  return true;
}

int engine::route_count() const {
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
std::optional<std::size_t> engine::fallback(const microbatch& mb, int s, std::size_t from) {
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

} // namespace gwtf::sim
