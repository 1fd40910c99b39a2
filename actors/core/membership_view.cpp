#include "actors/core/membership_view.hpp"

#include <algorithm>
#include <cmath>

namespace gwtf::actors {

namespace {
constexpr double phi_z = 5.612;      // P(Z > z) = 1e-8 for a standard normal: phi = 8
constexpr std::int64_t cap_factor = 4;
constexpr std::size_t min_samples = 3;
} // namespace

void arrival_window::add(std::int64_t gap_ms) {
  auto g = static_cast<double>(gap_ms);
  if (gaps_.size() < window) {
    gaps_.push_back(gap_ms);
  } else {
    auto old = static_cast<double>(gaps_[next_]);
    sum_ -= old;
    sum_sq_ -= old * old;
    gaps_[next_] = gap_ms;
    next_ = (next_ + 1) % window;
  }
  sum_ += g;
  sum_sq_ += g * g;
}

double arrival_window::mean() const { return gaps_.empty() ? 0.0 : sum_ / static_cast<double>(gaps_.size()); }

double arrival_window::stddev() const {
  if (gaps_.empty())
    return 0.0;
  auto m = mean();
  return std::sqrt(std::max(0.0, sum_sq_ / static_cast<double>(gaps_.size()) - m * m));
}

std::int64_t membership_view::suspect_after_ms(const peer_state& p) const {
  if (p.gaps.size() < min_samples)
    return timeout_ms_;
  auto mean = p.gaps.mean();
  auto sd = std::max(p.gaps.stddev(), mean / 4);
  auto t = static_cast<std::int64_t>(std::ceil(mean + phi_z * sd));
  return std::clamp(t, timeout_ms_, cap_factor * timeout_ms_);
}

membership_view::membership_view(std::string self, std::int64_t timeout_ms)
  : self_(std::move(self)), timeout_ms_(timeout_ms) {}

std::vector<view_change> membership_view::heard(const wire::hello& h, std::int64_t now_ms) {
  std::vector<view_change> out;
  if (h.peer_id == self_)
    return out;
  if (auto d = departed_.find(h.peer_id); d != departed_.end() && h.incarnation <= d->second)
    return out; // a late heartbeat of an incarnation that already left
  auto it = peers_.find(h.peer_id);
  if (it == peers_.end()) {
    peers_[h.peer_id] = peer_state{h, now_ms, true, {}};
    out.push_back({h.peer_id, true});
    return out;
  }
  auto& p = it->second;
  if (h.incarnation < p.hello.incarnation)
    return out; // stale
  if (h.incarnation > p.hello.incarnation && p.alive)
    out.push_back({h.peer_id, false}); // it restarted: its old state is gone
  bool was_alive = p.alive && h.incarnation == p.hello.incarnation;
  bool moved = p.hello.stage != h.stage; // e.g. -1 -> its stage once its state is loaded
  if (was_alive)
    p.gaps.add(now_ms - p.last_heard_ms);
  else
    p.gaps = arrival_window{}; // back, or a new incarnation: its old rhythm says nothing
  p.hello = h;
  p.last_heard_ms = now_ms;
  p.alive = true;
  if (!was_alive || moved)
    out.push_back({h.peer_id, true});
  return out;
}

std::vector<view_change> membership_view::left(const wire::leave& l) {
  std::vector<view_change> out;
  departed_[l.peer_id] = l.incarnation;
  auto it = peers_.find(l.peer_id);
  if (it != peers_.end() && it->second.alive && it->second.hello.incarnation <= l.incarnation) {
    it->second.alive = false;
    out.push_back({l.peer_id, false});
  }
  return out;
}

std::vector<view_change> membership_view::tick(std::int64_t now_ms) {
  std::vector<view_change> out;
  for (auto& [id, p] : peers_)
    if (p.alive && now_ms - p.last_heard_ms > suspect_after_ms(p)) {
      p.alive = false;
      out.push_back({id, false});
    }
  return out;
}

std::vector<std::string> membership_view::live() const {
  std::vector<std::string> out;
  for (auto& [id, p] : peers_)
    if (p.alive)
      out.push_back(id);
  return out;
}

std::vector<std::string> membership_view::live_at(int stage) const {
  std::vector<std::string> out;
  for (auto& [id, p] : peers_)
    if (p.alive && p.hello.stage == stage)
      out.push_back(id);
  return out;
}

bool membership_view::alive(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.alive;
}

} // namespace gwtf::actors
