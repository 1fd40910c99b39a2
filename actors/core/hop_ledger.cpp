#include "actors/core/hop_ledger.hpp"

#include <algorithm>

namespace gwtf::actors {

std::uint64_t key_of(const wire::microbatch_ref& mb) {
  return mb.iteration << 24 | std::uint64_t{mb.holder} << 12 | mb.index;
}

hop_ledger::hop_ledger(std::string self) : self_(std::move(self)) {}

forward_action hop_ledger::on_forward(const std::string& from, const wire::activation& a) {
  auto k = key_of(a.microbatch);
  auto it = records_.find(k);
  if (it == records_.end()) {
    hop_record r;
    r.mb = a.microbatch;
    r.attempt = a.attempt;
    r.path = a.path;
    r.path.push_back(self_);
    r.prev = from;
    records_.emplace(k, std::move(r));
    return forward_action::compute;
  }
  auto& r = it->second;
  if (a.microbatch.origin != r.mb.origin) {
    // The same microbatch from a newer run of its data holder (it restarted, or reloaded its
    // state, and sends the iteration again): the same data through the same weights, so what
    // this hop holds stands. Like a re-send: rebind to the new upstream, and what goes back
    // carries the new run. A frame of an older run is stale.
    if (a.microbatch.origin < r.mb.origin)
      return forward_action::ignore;
    r.mb.origin = a.microbatch.origin;
    r.attempt = a.attempt;
    r.prev = from;
    r.path = a.path;
    r.path.push_back(self_);
    return forward_action::rebind;
  }
  if (a.attempt <= r.attempt)
    return forward_action::ignore;
  r.attempt = a.attempt;
  r.prev = from;
  r.path = a.path;
  r.path.push_back(self_);
  return forward_action::rebind;
}

void hop_ledger::sent_forward(std::uint64_t key, const std::string& next) {
  if (auto it = records_.find(key); it != records_.end()) {
    it->second.next = next;
    it->second.forwarded = true;
  }
}

bool hop_ledger::on_backward(std::uint64_t key) const {
  auto it = records_.find(key);
  return it != records_.end() && !it->second.backward_done;
}

void hop_ledger::sent_backward(std::uint64_t key) {
  if (auto it = records_.find(key); it != records_.end())
    it->second.backward_done = true;
}

void hop_ledger::on_progress(const wire::hop_progress& p) {
  // path = [..., self, next, sender]
  if (p.path.size() < 3)
    return;
  auto it = records_.find(key_of(p.microbatch));
  if (it == records_.end())
    return;
  auto& r = it->second;
  const auto& via = p.path[p.path.size() - 2];
  if (p.path[p.path.size() - 3] == self_ && r.next == via)
    r.next_next = p.path.back();
}

std::vector<resend> hop_ledger::on_peer_down(const std::string& peer) {
  std::vector<resend> out;
  for (auto& [k, r] : records_) {
    if (r.forwarded && r.next == peer) {
      ++r.attempt;
      out.push_back({k, peer, r.attempt, r.next_next == peer ? std::string{} : r.next_next, false});
    }
  }
  return out;
}

void hop_ledger::redirect(std::uint64_t key, const std::string& next) {
  if (auto it = records_.find(key); it != records_.end()) {
    it->second.next = next;
    it->second.next_next.clear();
  }
}

std::vector<std::uint64_t> hop_ledger::finish(std::uint64_t iteration) {
  std::vector<std::uint64_t> out;
  for (auto it = records_.begin(); it != records_.end();) {
    if (it->second.mb.iteration <= iteration) {
      out.push_back(it->first);
      it = records_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

const hop_record* hop_ledger::find(std::uint64_t key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

std::optional<std::string> choose_replacement(const std::vector<candidate>& live,
                                              const std::string& dead) {
  const candidate* best = nullptr;
  for (auto& c : live) {
    if (c.id == dead)
      continue;
    if (!best || c.cost < best->cost || (c.cost == best->cost && c.id < best->id))
      best = &c;
  }
  if (!best)
    return std::nullopt;
  return best->id;
}

std::optional<std::string> next_hop(const std::vector<flow_hop>& flows, const std::string& from,
                                    const std::string& target, std::uint32_t index,
                                    const std::vector<candidate>& live_next) {
  auto alive = [&](const std::string& id) {
    return std::any_of(live_next.begin(), live_next.end(), [&](auto& c) { return c.id == id; });
  };
  std::vector<std::string> exact, any;
  for (auto& f : flows) {
    if (f.target != target || f.next.empty() || !alive(f.next))
      continue;
    any.push_back(f.next);
    if (f.prev == from)
      exact.push_back(f.next);
  }
  if (!exact.empty())
    return exact[index % exact.size()];
  if (!any.empty())
    return any[index % any.size()];
  return choose_replacement(live_next, std::string{});
}

} // namespace gwtf::actors
