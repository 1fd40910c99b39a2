#include "actors/core/membership_view.hpp"

namespace gwtf::actors {

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
    peers_[h.peer_id] = peer_state{h, now_ms, true};
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
    if (p.alive && now_ms - p.last_heard_ms > timeout_ms_) {
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
