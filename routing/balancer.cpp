#include "routing/balancer.hpp"

#include <cmath>
#include <limits>

namespace gwtf::routing {

namespace {

// A requester's belief within this margin of the current cost is not stale.
bool stale(double current, double believed) {
  return current > believed * (1 + 1e-9) + 1e-12;
}

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ULL;
  return h;
}

} // namespace

flow_balancer::flow_balancer(std::string self, int stage, int stages, int capacity,
                             const gwtf_config& cfg)
  : self_(std::move(self)), stage_(stage), stages_(stages), capacity_(capacity), cfg_(cfg) {}

void flow_balancer::add_peer(const std::string& id, int stage, double edge_cost) {
  auto& p = peers_[id];
  p.stage = stage;
  p.edge = edge_cost;
  // The data holders closing a ring always take their own flows back.
  if (stage == 0 && next_stage() == 0)
    p.heard = true;
}

std::optional<double> flow_balancer::cost_to(const std::string& target) const {
  auto best = best_next(target, {});
  if (!best)
    return std::nullopt;
  return best->second;
}

std::optional<std::pair<std::string, double>>
flow_balancer::best_next(const std::string& target, const std::set<std::string>& exclude) const {
  std::optional<std::pair<std::string, double>> best;
  for (auto& [id, p] : peers_) {
    if (p.stage != next_stage() || exclude.count(id) > 0)
      continue;
    double c = 0;
    if (next_stage() == 0) {
      if (id != target)
        continue; // the ring closes at its own data holder
      c = p.edge;
    } else {
      auto it = p.costs.find(target);
      if (!p.heard || p.demand >= 0 || it == p.costs.end())
        continue;
      c = p.edge + it->second;
    }
    if (!best || c < best->second)
      best = std::make_pair(id, c); // ties: the smallest id (map order)
  }
  return best;
}

std::vector<wire::target_cost> flow_balancer::advert() const {
  std::vector<wire::target_cost> out;
  if (holder() || spare() <= 0)
    return out;
  std::set<std::string> targets;
  for (auto& [id, p] : peers_) {
    if (p.stage == 0)
      targets.insert(id);
    for (auto& [t, c] : p.costs)
      targets.insert(t);
  }
  for (auto& t : targets)
    if (auto c = cost_to(t))
      out.push_back(wire::target_cost{t, *c, -spare()});
  return out;
}

wire::flow_response flow_balancer::response(std::uint64_t id, bool accepted, wire::reject_reason why,
                                            const std::string& target) const {
  auto c = cost_to(target);
  return wire::flow_response{id, accepted, accepted ? wire::reject_reason::none : why,
                             c ? *c : 0.0, c ? -spare() : 0};
}

std::vector<outgoing> flow_balancer::tick(std::int64_t now) {
  std::vector<outgoing> out;
  // Introductions once, then cost adverts every tick to the previous stage (one advert,
  // computed once: it is the same for every receiver).
  std::optional<std::vector<wire::target_cost>> ad;
  for (auto& [id, p] : peers_) {
    if (p.stage != prev_stage() || holder())
      continue;
    if (!ad)
      ad = advert();
    if (!introduced_)
      out.push_back({id, wire::introduction{self_, stage_, static_cast<std::uint32_t>(capacity_), *ad}});
    else
      out.push_back({id, wire::cost_advert{*ad}});
  }
  introduced_ = true;

  // Half-built flows past their time-to-live are given up (their hops release them too).
  std::vector<std::uint64_t> expired;
  for (auto& [fid, f] : flows_)
    if (!f.built && now - f.since_tick > cfg_.half_built_ttl_ticks)
      expired.push_back(fid);
  for (auto fid : expired)
    release(fid, out, wire::reject_reason::no_spare_path);

  // A data holder's ring that lost its closing hop and was not re-closed is rebuilt.
  if (holder()) {
    std::vector<std::uint64_t> unclosed;
    for (auto& [fid, f] : flows_)
      if (f.built && f.prev.empty() && f.unclosed_since >= 0
          && now - f.unclosed_since > cfg_.half_built_ttl_ticks)
        unclosed.push_back(fid);
    for (auto fid : unclosed)
      release(fid, out, wire::reject_reason::no_spare_path);
  }

  // Anti-entropy: every few ticks each relay asks its upstream whether it still feeds it.
  if (!holder() && now % cfg_.anti_entropy_ticks == 0)
    for (auto& [fid, f] : flows_)
      if (f.built && !f.prev.empty())
        out.push_back({f.prev, wire::flow_sync{wire::sync_kind::check, fid, f.target}});

  // A data holder starts as many flows as its capacity allows and a first hop can take.
  if (holder()) {
    while (spare() > 0) {
      auto first = best_next(self_, {});
      if (!first)
        break;
      std::uint64_t fid = (name_hash(self_) << 24) ^ next_flow_++;
      held_flow f;
      f.id = fid;
      f.target = self_;
      f.since_tick = now;
      auto& slot = flows_[fid] = f;
      forward_request(slot, out);
    }
  }
  return out;
}

void flow_balancer::forward_request(held_flow& f, std::vector<outgoing>& out) {
  auto next = best_next(f.target, f.tried);
  if (!next) {
    release(f.id, out, wire::reject_reason::no_spare_path);
    return;
  }
  f.next = next->first;
  auto& p = peers_[next->first];
  double believed = next_stage() == 0 ? 0.0 : p.costs[f.target];
  if (next_stage() != 0)
    ++p.demand; // one slot of it is now spoken for, until its next advert
  out.push_back({f.next, wire::flow_request{f.id, f.target, believed}});
}

void flow_balancer::release(std::uint64_t id, std::vector<outgoing>& out, wire::reject_reason why) {
  auto it = flows_.find(id);
  if (it == flows_.end())
    return;
  auto f = it->second;
  flows_.erase(it);
  if (!holder() && !f.prev.empty())
    out.push_back({f.prev, response(id, false, why, f.target)});
  // Downstream hops of a flow we give up must drop it as well.
  if (!f.next.empty() && !(holder() && f.next == f.prev))
    out.push_back({f.next, wire::flow_sync{wire::sync_kind::cancel, id, f.target}});
}

std::vector<outgoing> flow_balancer::on_request(const std::string& from, const wire::flow_request& r,
                                                std::int64_t now) {
  std::vector<outgoing> out;
  auto it = flows_.find(r.flow_id);
  if (holder()) {
    // The closing hop of one of our own flows: remember the last relay. After a re-route
    // upstream, a new last relay closes the same flow: the newest closing wins.
    if (r.target == self_ && it != flows_.end()) {
      it->second.prev = from;
      it->second.unclosed_since = -1;
      out.push_back({from, wire::flow_response{r.flow_id, true, wire::reject_reason::none, 0.0, 0}});
    } else {
      out.push_back({from, wire::flow_response{r.flow_id, false, wire::reject_reason::duplicate, 0.0, 0}});
    }
    return out;
  }
  if (it != flows_.end()) {
    // The flow was re-routed upstream and reaches us again: splice the new upstream onto
    // the path we still hold. (A cancel from the old upstream is then ignored.)
    if (it->second.target != r.target) {
      out.push_back({from, response(r.flow_id, false, wire::reject_reason::duplicate, r.target)});
      return out;
    }
    it->second.prev = from;
    if (it->second.built)
      out.push_back({from, response(r.flow_id, true, wire::reject_reason::none, r.target)});
    return out;
  }
  if (spare() <= 0) {
    out.push_back({from, response(r.flow_id, false, wire::reject_reason::over_capacity, r.target)});
    return out;
  }
  auto c = cost_to(r.target);
  if (!c) {
    out.push_back({from, response(r.flow_id, false, wire::reject_reason::no_spare_path, r.target)});
    return out;
  }
  if (stale(*c, r.advertised_cost)) {
    out.push_back({from, response(r.flow_id, false, wire::reject_reason::stale_cost, r.target)});
    return out;
  }
  held_flow f;
  f.id = r.flow_id;
  f.target = r.target;
  f.prev = from;
  f.since_tick = now;
  auto& slot = flows_[f.id] = f;
  forward_request(slot, out);
  return out;
}

std::vector<outgoing> flow_balancer::on_response(const std::string& from, const wire::flow_response& r,
                                                 std::int64_t now) {
  std::vector<outgoing> out;
  auto it = flows_.find(r.flow_id);
  if (it == flows_.end() || it->second.next != from)
    return out; // late or foreign: nothing to do
  auto& f = it->second;
  if (r.accepted) {
    if (f.built)
      return out;
    f.built = true;
    if (!holder())
      out.push_back({f.prev, response(f.id, true, wire::reject_reason::none, f.target)});
    return out;
  }
  // Refresh our view of the rejecting peer, then try another next hop.
  auto& p = peers_[from];
  if (p.stage != 0) {
    p.demand = r.demand;
    if (r.reason == wire::reject_reason::no_spare_path || r.demand >= 0)
      p.costs.erase(f.target);
    else
      p.costs[f.target] = r.current_cost;
  }
  // The next hop will not (or no longer) carry it: re-route from here. For a flow that was
  // built this is the push-back after a failure downstream.
  if (r.reason != wire::reject_reason::stale_cost)
    f.tried.insert(from);
  f.built = false;
  f.since_tick = now;
  forward_request(f, out);
  return out;
}

std::vector<outgoing> flow_balancer::handle(const std::string& from, const wire::message& msg,
                                            std::int64_t now) {
  if (auto* a = std::get_if<wire::cost_advert>(&msg)) {
    auto& p = peers_[from];
    p.heard = true;
    p.costs.clear();
    p.demand = 0;
    for (auto& c : a->costs) {
      p.costs[c.target] = c.cost;
      p.demand = c.demand;
    }
    return {};
  }
  if (auto* i = std::get_if<wire::introduction>(&msg))
    return handle(from, wire::message{wire::cost_advert{i->costs}}, now);
  if (auto* r = std::get_if<wire::flow_request>(&msg))
    return on_request(from, *r, now);
  if (auto* r = std::get_if<wire::flow_response>(&msg))
    return on_response(from, *r, now);
  if (auto* s = std::get_if<wire::flow_sync>(&msg)) {
    std::vector<outgoing> out;
    auto it = flows_.find(s->flow_id);
    // Anti-entropy: a downstream hop asks whether we still feed it this flow.
    if (s->kind == wire::sync_kind::check) {
      if (it == flows_.end() || it->second.next != from)
        out.push_back({from, wire::flow_sync{wire::sync_kind::cancel, s->flow_id, s->target}});
      return out;
    }
    // Only the upstream hop of a flow may cancel it here.
    if (s->kind != wire::sync_kind::cancel || it == flows_.end() || it->second.prev != from)
      return out;
    if (holder()) {
      it->second.prev.clear(); // the old tail is gone; a re-routed flow closes anew
      it->second.unclosed_since = now;
      return out;
    }
    auto f = it->second;
    flows_.erase(it);
    if (!f.next.empty())
      out.push_back({f.next, wire::flow_sync{wire::sync_kind::cancel, f.id, f.target}});
    return out;
  }
  return {};
}

std::vector<outgoing> flow_balancer::remove_peer(const std::string& id, std::int64_t now) {
  std::vector<outgoing> out;
  peers_.erase(id);
  std::vector<std::uint64_t> affected;
  for (auto& [fid, f] : flows_)
    if (f.next == id || f.prev == id)
      affected.push_back(fid);
  for (auto fid : affected) {
    auto it = flows_.find(fid);
    if (it == flows_.end())
      continue;
    auto& f = it->second;
    if (holder()) {
      if (f.prev == id) {
        f.prev.clear(); // the last relay is gone; the hop before it re-routes and re-closes
        f.unclosed_since = now;
      }
      if (f.next == id) {
        // The first relay is gone: rebuild from here; its old tail is cancelled by the
        // relay after the dead one.
        f.tried.insert(id);
        f.built = false;
        f.since_tick = now;
        forward_request(f, out);
      }
      continue;
    }
    if (f.prev == id) {
      // Upstream is gone: nobody feeds this flow any more. Drop it downstream.
      auto next = f.next;
      auto target = f.target;
      flows_.erase(it);
      if (!next.empty() && next != id)
        out.push_back({next, wire::flow_sync{wire::sync_kind::cancel, fid, target}});
      continue;
    }
    // Downstream is gone: the flow becomes half-built here and is re-routed (GWTF: a crash
    // in the middle of a path costs only the hops after it).
    f.tried.insert(id);
    f.built = false;
    f.since_tick = now;
    forward_request(f, out);
  }
  return out;
}

} // namespace gwtf::routing
