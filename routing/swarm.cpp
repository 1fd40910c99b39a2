#include "routing/swarm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace gwtf::routing {

namespace {
constexpr double default_throughput = 1.0; // task units per second before any sample
}

swarm_router::swarm_router(const swarm_config& cfg, int stages) : cfg_(cfg), stages_(stages) {}

bool swarm_router::refresh_due(double now_s) const {
  return now_s >= next_refresh_s_;
}

double swarm_router::task_size(swarm_task t) const {
  return t == swarm_task::forward ? 1.0 : cfg_.backward_factor;
}

swarm_recovery swarm_router::recovery_for(swarm_task t) {
  return t == swarm_task::forward ? swarm_recovery::retry_hop : swarm_recovery::restart_microbatch;
}

double swarm_router::stage_average_ema(int stage) const {
  double sum = 0;
  int n = 0;
  for (auto& [id, e] : peers_)
    if (e.stage == stage && e.measured) {
      sum += e.ema;
      ++n;
    }
  return n == 0 ? default_throughput : sum / n;
}

double swarm_router::stage_min_key(int stage, double now_s) const {
  double best = std::numeric_limits<double>::infinity();
  for (auto& [id, e] : peers_)
    if (e.stage == stage && !banned(id))
      best = std::min(best, std::max(e.key, now_s));
  return std::isinf(best) ? now_s : best;
}

void swarm_router::refresh(double now_s, const std::vector<swarm_peer>& live) {
  next_refresh_s_ = now_s + cfg_.refresh_ms / 1000.0;
  for (auto it = banned_until_.begin(); it != banned_until_.end();)
    it = it->second <= now_s ? banned_until_.erase(it) : std::next(it);
  std::set<std::string> seen;
  for (auto& p : live) {
    if (p.stage < 1 || p.stage >= stages_)
      continue; // data holders and unplaced hosts are not hop targets
    seen.insert(p.id);
    auto it = peers_.find(p.id);
    if (it != peers_.end() && it->second.stage == p.stage)
      continue;
    // New (or moved) peer: enters at the stage's current minimum so that it is probed next,
    // with the stage's average throughput as its first estimate.
    entry e;
    e.stage = p.stage;
    e.key = stage_min_key(p.stage, now_s);
    e.ema = stage_average_ema(p.stage);
    peers_[p.id] = e;
  }
  for (auto it = peers_.begin(); it != peers_.end();)
    it = seen.count(it->first) == 0 ? peers_.erase(it) : std::next(it);
}

std::optional<std::string> swarm_router::choose(int stage, swarm_task task, double now_s) {
  const std::string* best = nullptr;
  double best_key = 0;
  bool best_measured = true;
  for (auto& [id, e] : peers_) {
    if (e.stage != stage || banned(id))
      continue;
    double k = std::max(e.key, now_s); // an idle peer starts now, not in the past
    // Ties go to peers without a measurement yet (they must be probed), then to the id.
    if (best == nullptr || k < best_key || (k == best_key && !e.measured && best_measured)) {
      best = &id;
      best_key = k;
      best_measured = e.measured;
    }
  }
  if (best == nullptr)
    return std::nullopt;
  auto& e = peers_[*best];
  e.key = best_key + task_size(task) / e.ema;
  return *best;
}

void swarm_router::completed(const std::string& peer, swarm_task task, double seconds) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || !(seconds > 0))
    return;
  double sample = task_size(task) / seconds;
  auto& e = it->second;
  e.ema = e.measured ? cfg_.ema_alpha * sample + (1 - cfg_.ema_alpha) * e.ema : sample;
  e.measured = true;
}

swarm_recovery swarm_router::timed_out(const std::string&, swarm_task task) {
  return recovery_for(task);
}

swarm_recovery swarm_router::failed(const std::string& peer, swarm_task task, double now_s) {
  banned_until_[peer] = now_s + cfg_.refresh_ms / 1000.0;
  return recovery_for(task);
}

std::optional<double> swarm_router::throughput(const std::string& peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end())
    return std::nullopt;
  return it->second.ema;
}

bool swarm_router::banned(const std::string& peer) const {
  return banned_until_.count(peer) > 0;
}

} // namespace gwtf::routing
