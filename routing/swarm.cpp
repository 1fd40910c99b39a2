#include "routing/swarm.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace gwtf::routing {

swarm_router::swarm_router(const swarm_config& cfg, int stages, swarm_policy policy)
  : cfg_(cfg), stages_(stages), policy_(policy), queue_(static_cast<std::size_t>(std::max(stages, 1))) {}

bool swarm_router::refresh_due(double now_s) const {
  return now_s >= next_refresh_s_;
}

double swarm_router::task_size(swarm_task t) const {
  return t == swarm_task::forward ? 1.0 : cfg_.backward_factor;
}

swarm_recovery swarm_router::recovery_for(swarm_task t) const {
  if (t == swarm_task::backward && policy_ == swarm_policy::restart)
    return swarm_recovery::restart_microbatch;
  return swarm_recovery::retry_call;
}

// PerformanceEMA's adjusted estimate: the EMA divided by 1 - (1 - alpha)^n, so that the
// first samples are not pulled towards the zero it starts from.
double swarm_router::throughput_of(const entry& e) const {
  double adjusted = e.ema_spt / (1 - std::pow(1 - cfg_.ema_alpha, static_cast<double>(e.samples)));
  return 1 / std::max(adjusted, 1e-20);
}

double swarm_router::expected_s(const entry& e, swarm_task t) const {
  if (e.samples == 0)
    return cfg_.initial_seconds_per_task * task_size(t);
  return task_size(t) / throughput_of(e);
}

double swarm_router::stage_min_key(int stage) const {
  auto& q = queue_[static_cast<std::size_t>(stage)];
  return q.empty() ? 0.0 : q.begin()->first;
}

void swarm_router::set_key(const std::string& id, entry& e, double key) {
  auto& q = queue_[static_cast<std::size_t>(e.stage)];
  q.erase({e.key, id});
  e.key = key;
  q.insert({e.key, id});
}

void swarm_router::refresh(double now_s, const std::vector<swarm_peer>& live) {
  next_refresh_s_ = now_s + cfg_.refresh_ms / 1000.0;
  for (auto it = banned_until_.begin(); it != banned_until_.end();)
    it = it->second <= now_s ? banned_until_.erase(it) : std::next(it);
  std::set<std::string> seen;
  for (auto& p : live) {
    if (p.stage < 1 || p.stage >= stages_ || banned(p.id))
      continue; // data holders, unplaced and banned hosts are not call targets
    seen.insert(p.id);
    auto it = peers_.find(p.id);
    if (it != peers_.end() && it->second.stage == p.stage)
      continue;
    if (it != peers_.end()) // moved: out of its old stage's queue
      queue_[static_cast<std::size_t>(it->second.stage)].erase({it->second.key, p.id});
    entry e; // new (or moved) peer: unmeasured, at the head of its stage's queue
    e.stage = p.stage;
    e.key = stage_min_key(p.stage);
    peers_[p.id] = e;
    queue_[static_cast<std::size_t>(e.stage)].insert({e.key, p.id});
  }
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (seen.count(it->first) == 0) {
      queue_[static_cast<std::size_t>(it->second.stage)].erase({it->second.key, it->first});
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<std::string> swarm_router::choose(int stage, swarm_task task) {
  if (stage < 0 || stage >= stages_ || queue_[static_cast<std::size_t>(stage)].empty())
    return std::nullopt;
  auto best = queue_[static_cast<std::size_t>(stage)].begin()->second; // least key, then smallest id
  auto& e = peers_.at(best);
  set_key(best, e, e.key + expected_s(e, task));
  return best;
}

void swarm_router::charge(const std::string& peer, swarm_task task) {
  auto it = peers_.find(peer);
  if (it != peers_.end())
    set_key(peer, it->second, it->second.key + expected_s(it->second, task));
}

void swarm_router::completed(const std::string& peer, swarm_task task, double wall_s) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || !(wall_s >= 0))
    return;
  auto& e = it->second;
  e.ema_spt = cfg_.ema_alpha * wall_s / task_size(task) + (1 - cfg_.ema_alpha) * e.ema_spt;
  ++e.samples;
}

swarm_recovery swarm_router::timed_out(const std::string&, swarm_task task) const {
  return recovery_for(task);
}

swarm_recovery swarm_router::failed(const std::string& peer, swarm_task task, double now_s) {
  banned_until_[peer] = now_s + cfg_.refresh_ms / 1000.0;
  if (auto it = peers_.find(peer); it != peers_.end()) {
    queue_[static_cast<std::size_t>(it->second.stage)].erase({it->second.key, peer});
    peers_.erase(it);
  }
  return recovery_for(task);
}

std::optional<double> swarm_router::throughput(const std::string& peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.samples == 0)
    return std::nullopt;
  return throughput_of(it->second);
}

bool swarm_router::banned(const std::string& peer) const {
  return banned_until_.count(peer) > 0;
}

std::vector<swarm_router::peer_view> swarm_router::queue() const {
  std::vector<peer_view> out;
  for (std::size_t s = 0; s < queue_.size(); ++s)
    for (auto& [key, id] : queue_[s]) {
      auto& e = peers_.at(id);
      out.push_back({id, e.stage, key, e.samples,
                     e.samples > 0 ? std::optional<double>(throughput_of(e)) : std::nullopt});
    }
  return out;
}

std::vector<std::string> swarm_router::banned_peers() const {
  std::vector<std::string> out;
  for (auto& [id, until] : banned_until_)
    out.push_back(id);
  return out;
}

std::optional<swarm_move> swarm_rebalance(const std::vector<swarm_load>& relays, int stages, int empty) {
  if (stages < 2)
    return std::nullopt;
  auto S = static_cast<std::size_t>(stages);
  std::vector<double> stage_tp(S, 0.0);
  std::vector<std::vector<std::size_t>> peers(S);
  for (std::size_t i = 0; i < relays.size(); ++i) {
    auto st = relays[i].stage;
    if (st < 1 || st >= stages)
      continue;
    stage_tp[static_cast<std::size_t>(st)] += relays[i].throughput;
    peers[static_cast<std::size_t>(st)].push_back(i);
  }
  int low = empty;
  if (low < 1 || low >= stages) {
    low = 1;
    for (int st = 2; st < stages; ++st)
      if (stage_tp[static_cast<std::size_t>(st)] < stage_tp[static_cast<std::size_t>(low)])
        low = st;
    empty = -1;
  }
  int high = -1;
  for (int st = 1; st < stages; ++st)
    if (st != low && peers[static_cast<std::size_t>(st)].size() >= 2
        && (high < 0 || stage_tp[static_cast<std::size_t>(st)] > stage_tp[static_cast<std::size_t>(high)]))
      high = st;
  if (high < 0)
    return std::nullopt;
  double lo_tp = stage_tp[static_cast<std::size_t>(low)], hi_tp = stage_tp[static_cast<std::size_t>(high)];
  std::optional<swarm_move> out;
  double best = empty >= 1 ? -1.0 : lo_tp; // a move must raise the slower of the two stages
  for (auto i : peers[static_cast<std::size_t>(high)]) {
    double tp = relays[i].throughput;
    double after = std::min(lo_tp + tp, hi_tp - tp);
    if (after > best) {
      best = after;
      out = swarm_move{i, high, low};
    }
  }
  return out;
}

} // namespace gwtf::routing
