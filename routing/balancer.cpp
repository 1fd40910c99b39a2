#include "routing/balancer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <limits>

namespace gwtf::routing {

namespace {

// A requester's belief within this margin of the current cost is not stale.
bool stale(double current, double believed) {
  return current > believed * (1 + 1e-9) + 1e-12;
}

bool differs(double a, double b) {
  return std::abs(a - b) > 1e-9 * (1 + std::abs(a));
}

// Where peer `id` is, or would go, in a name-ordered list of (name, peer) pairs.
template <class List>
auto roster_at(List& all, const std::string& id) {
  return std::lower_bound(all.begin(), all.end(), id, [](auto& e, const std::string& n) { return *e.first < n; });
}

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ULL;
  return h;
}

} // namespace

flow_balancer::flow_balancer(std::string self, int stage, int stages, int capacity,
                             const gwtf_config& cfg, std::uint64_t seed)
  : self_(std::move(self)), stage_(stage), stages_(stages), capacity_(capacity), cfg_(cfg),
    temperature_(cfg.initial_temperature), rng_(seed ^ name_hash(self_)) {}

int flow_balancer::spare() const {
  // A SWAP's incoming flow holds its slot once agreed (ours has left); a REDIRECT's does not,
  // so that proposing never hides spare capacity from flow building: the handed flow is
  // admitted on arrival only if a slot is still free.
  int taken = static_cast<int>(flows_.size());
  for (auto& [id, e] : expected_)
    taken += e.agreed && e.swap ? 1 : 0;
  return capacity_ - taken;
}

double flow_balancer::edge(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it == nullptr ? 0.0 : it->second.edge;
}

bool flow_balancer::is_peer(const std::string& id, int stage) const {
  auto it = peers_.find(id);
  return it != nullptr && it->second.stage == stage;
}

double flow_balancer::down_cost(const held_flow& f) const {
  return edge(f.next) + f.tail;
}

std::optional<double> flow_balancer::ring_cost(const held_flow& f) const {
  if (!f.built || !f.tail_known || f.next.empty())
    return std::nullopt;
  if (holder())
    return down_cost(f);
  if (!f.head_known || f.prev.empty())
    return std::nullopt;
  return f.head + edge(f.prev) + down_cost(f);
}

std::optional<wire::flow_entry> flow_balancer::entry(const held_flow& f) const {
  // ring_cost(f) known, prev and next peers of the neighbouring stages (one lookup each).
  if (holder() || !f.built || !f.tail_known || f.next.empty() || !f.head_known || f.prev.empty())
    return std::nullopt;
  auto prev = peers_.find(f.prev), next = peers_.find(f.next);
  if (prev == nullptr || prev->second.stage != prev_stage() || next == nullptr
      || next->second.stage != next_stage())
    return std::nullopt;
  return wire::flow_entry{f.id, f.target, f.prev, f.next, f.head, prev->second.edge, next->second.edge, f.tail};
}

// The cost from here back to the data holder changed: tell the upstream hop (it answers
// with a CONFIRM carrying the cost from the data holder, or a CANCEL).
void flow_balancer::send_down_cost(const held_flow& f, std::vector<outgoing>& out) const {
  if (!holder() && f.built && f.tail_known && !f.prev.empty())
    out.push_back({f.prev, wire::flow_sync{wire::sync_kind::check, f.id, f.target, down_cost(f), {}, 0}});
}

std::optional<double> flow_balancer::up_cost(const held_flow& f) const {
  if (holder())
    return 0.0;
  if (!f.head_known || f.prev.empty())
    return std::nullopt;
  return f.head + edge(f.prev);
}

// The cost from the data holder up to here: tell `to` (the next hop).
void flow_balancer::confirm_to(const held_flow& f, const std::string& to, std::vector<outgoing>& out) const {
  // With the data holder's flow count and slowest other ring (fair shares, move objective):
  // a data holder's own, a relay's as the hop before it said.
  if (auto up = up_cost(f))
    out.push_back({to, wire::flow_sync{wire::sync_kind::confirm, f.id, f.target, *up, {},
                                       holder() ? built_flows() : f.holder_flows,
                                       holder() ? others_than(f.id) : f.others}});
}

double flow_balancer::others_than(std::uint64_t id) const {
  double slowest = 0;
  for (auto& [fid, f] : flows_)
    if (fid != id)
      if (auto c = ring_cost(f))
        slowest = std::max(slowest, *c);
  return slowest;
}

void flow_balancer::send_up_cost(const held_flow& f, std::vector<outgoing>& out) const {
  if (f.built && !f.next.empty() && next_stage() != 0)
    confirm_to(f, f.next, out);
}

template <class T>
bool flow_balancer::due(sent<T>& log, const std::shared_ptr<const T>& what, std::int64_t now) {
  if (log.what && (log.what == what || *log.what == *what) && now - log.at < cfg_.refresh_ticks)
    return false;
  log = sent<T>{what, now};
  return true;
}

template <class T>
const std::shared_ptr<const T>& flow_balancer::remember(std::shared_ptr<const T>& latest, T&& fresh) {
  if (!latest || *latest != fresh)
    latest = std::make_shared<const T>(std::move(fresh));
  return latest;
}

void flow_balancer::add_peer(const std::string& id, int stage, double edge_cost, double link_s) {
  // (Re-)added, maybe a new incarnation that knows nothing: it gets the next advert and listing.
  auto& p = peer_at(id);
  p.advert_sent = {};
  p.listing_sent = {};
  roster_changed(); // maybe at another stage, and owed the next advert and listing
  view_changed();   // new, or maybe at another stage
  p.stage = stage;
  p.edge = stage == next_stage() || stage == prev_stage() ? edge_cost : 0.0;
  p.link_s = stage == next_stage() && std::isfinite(link_s) && link_s > 0 ? link_s : 0.0;
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
flow_balancer::best_next(const std::string& target, const std::set<std::string>& exclude, bool loaded) const {
  return pick_next(target, exclude, loaded ? load_now() : std::vector<double>{});
}

// Link load (docs/routing.md, "Link load"): the flows this node already sends to each next
// hop, which queue ahead of one more on that link.
std::map<std::string, int> flow_balancer::flows_by_next() const {
  std::map<std::string, int> on_link;
  for (auto& [fid, f] : flows_)
    if (!f.next.empty())
      ++on_link[f.next];
  return on_link;
}

flow_balancer::peer& flow_balancer::peer_at(const std::string& id) {
  auto [it, added] = peers_.try_emplace(id);
  if (added) {
    view_changed();
    roster_changed();
    if (!roster_.stale) { // in name order without sorting them all again
      auto& all = roster_.peers;
      auto at = roster_at(all, id);
      all.insert(at, {&it->first, &it->second});
    }
  }
  return it->second;
}

const flow_balancer::roster_cache& flow_balancer::roster() const {
  auto& r = roster_;
  if (r.stale) {
    r.peers.clear();
    peers_.each([&r](const std::string& id, const peer& p) { r.peers.emplace_back(&id, const_cast<peer*>(&p)); });
    std::sort(r.peers.begin(), r.peers.end(), [](auto& a, auto& b) { return *a.first < *b.first; });
    r.stale = false;
    r.lists_stale = true;
  }
  if (r.lists_stale) {
    r.prev.clear();
    r.same.clear();
    r.listed.clear();
    for (auto& e : r.peers) {
      if (e.second->stage == prev_stage())
        r.prev.push_back(e);
      if (e.second->stage == stage_)
        r.same.push_back(e);
      if (e.second->listing)
        r.listed.push_back(e);
    }
    r.lists_stale = false;
  }
  return r;
}

template <class T, class Make>
void flow_balancer::send_due(const std::vector<std::pair<const std::string*, peer*>>& to, sent<T> peer::*log,
                             const std::shared_ptr<const T>& what, broadcast& b, std::int64_t now,
                             std::vector<outgoing>& out, Make make) {
  if (b.sent == what.get() && now < b.next)
    return; // every receiver has this very content, none is due for a refresh yet
  bool all = true;
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  for (auto [id, p] : to) {
    if (due(p->*log, what, now))
      out.push_back({*id, make(*what)});
    all = all && (p->*log).what == what;
    next = std::min(next, (p->*log).at + cfg_.refresh_ticks);
  }
  b = broadcast{all ? what.get() : nullptr, next};
}

const flow_balancer::view_cache& flow_balancer::view() const {
  auto& v = view_;
  if (!v.stale)
    return v;
  bool closing = next_stage() == 0; // the next hops are the data holders: a ring closes at its own
  v.graph.reset(closing);
  v.next.clear();
  v.next_peer.clear();
  v.link_s.clear();
  v.target.clear();
  v.paths.clear();
  for (auto [name, q] : roster().peers) {
    auto& id = *name;
    auto& p = *q;
    if (p.stage != next_stage())
      continue;
    auto n = v.graph.add_next(p.edge);
    q->view_slot = v.next.size();
    v.next.push_back(&id);
    v.next_peer.push_back(q);
    v.link_s.push_back(p.link_s);
    v.paths.emplace_back();
    if (closing) {
      v.target.emplace(id, n);
    } else if (p.heard && p.demand < 0) { // it has room: the holders it advertised a path to
      for (auto& [t, c] : p.costs) {
        auto [it, added] = v.target.try_emplace(t, 0);
        if (added)
          it->second = v.graph.add_target();
        v.paths.back().push_back(v.graph.add_path(n, it->second, c));
      }
    }
  }
  v.stale = false;
  return v;
}

bool flow_balancer::view_costs_changed(const peer& p) {
  auto& v = view_;
  if (v.stale || p.stage != next_stage() || next_stage() == 0 || !p.heard || p.demand >= 0)
    return v.stale || p.stage != next_stage() || next_stage() == 0; // not in the view as paths
  if (p.view_slot >= v.next_peer.size() || v.next_peer[p.view_slot] != &p)
    return false;
  auto& ids = v.paths[p.view_slot];
  if (ids.size() != p.costs.size())
    return false;
  std::size_t k = 0;
  for (auto& [t, c] : p.costs)
    v.graph.set_cost(ids[k++], c);
  return true;
}

std::vector<double> flow_balancer::load_now() const {
  if (!cfg_.link_load)
    return {};
  auto& v = view();
  std::vector<int> on(v.next.size(), 0);
  bool any = false; // no flow goes anywhere: no load at all (an empty vector)
  for (auto& [fid, f] : flows_) {
    if (f.next.empty())
      continue;
    any = true;
    if (auto p = peers_.find(f.next); p != nullptr && p->second.view_slot < v.next_peer.size()
                                      && v.next_peer[p->second.view_slot] == &p->second)
      ++on[p->second.view_slot];
  }
  std::vector<double> load;
  if (any) {
    load.assign(v.next.size(), 0.0);
    for (std::size_t n = 0; n < v.next.size(); ++n)
      if (on[n] > 0)
        load[n] = on[n] * v.link_s[n];
  }
  return load;
}

// Every next-hop choice is a shortest path on the local view (routing/view_graph.hpp): one
// Dijkstra from this node gives the cheapest ring through a next hop to every data holder.
std::vector<std::optional<view_graph::choice>>
flow_balancer::cheapest(const std::set<std::string>& exclude, const std::vector<double>& load) const {
  auto& v = view();
  std::vector<char> excluded;
  if (!exclude.empty()) {
    excluded.assign(v.next.size(), 0);
    for (std::size_t n = 0; n < v.next.size(); ++n)
      excluded[n] = exclude.count(*v.next[n]) > 0 ? 1 : 0;
  }
  return v.graph.cheapest(load, excluded);
}

std::optional<std::pair<std::string, double>>
flow_balancer::pick_next(const std::string& target, const std::set<std::string>& exclude,
                         const std::vector<double>& load) const {
  auto& v = view();
  auto t = v.target.find(target);
  if (t == v.target.end())
    return std::nullopt;
  auto best = cheapest(exclude, load)[t->second];
  if (!best)
    return std::nullopt;
  return std::make_pair(*v.next[best->next], best->cost);
}

std::vector<wire::target_cost> flow_balancer::advert(const std::vector<double>& load) const {
  std::vector<wire::target_cost> out;
  if (holder() || spare() <= 0)
    return out;
  // Every data holder the view reaches through a next hop with room, in name order (a holder
  // known only otherwise has no path from here).
  auto best = cheapest({}, load); // every data holder at once
  for (auto& [t, i] : view().target)
    if (best[i])
      out.push_back(wire::target_cost{t, best[i]->cost, -spare()});
  return out;
}

const std::shared_ptr<const std::vector<wire::target_cost>>& flow_balancer::current_advert() {
  // The advert is a function of the view's answers, the load on its links and the spare
  // room: with all three as at the last advert, it is that one.
  auto load = load_now();
  auto& v = view();
  if (last_advert_ && advert_key_.version == v.graph.version() && advert_key_.spare == spare()
      && advert_key_.load == load)
    return last_advert_;
  auto& ad = remember(last_advert_, advert(load));
  advert_key_.version = v.graph.version();
  advert_key_.spare = spare();
  advert_key_.load = std::move(load);
  return ad;
}

wire::flow_response flow_balancer::response(std::uint64_t id, bool accepted, wire::reject_reason why,
                                            const std::string& target) const {
  if (accepted) {
    // An accept carries this flow's cost from here back to its data holder.
    auto it = flows_.find(id);
    double down = it != flows_.end() && it->second.tail_known ? down_cost(it->second) : 0.0;
    return wire::flow_response{id, true, wire::reject_reason::none, down, -spare()};
  }
  auto c = cost_to(target);
  return wire::flow_response{id, false, why, c ? *c : 0.0, c ? -spare() : 0};
}

std::vector<outgoing> flow_balancer::tick(std::int64_t now) {
  std::vector<outgoing> out;
  // Introductions once, then cost adverts to the previous stage (one advert, computed once:
  // it is the same for every receiver): when it changed, else every refresh_ticks.
  if (auto& r = roster(); !holder() && !r.prev.empty()) {
    auto& ad = current_advert();
    if (!introduced_) {
      for (auto [id, p] : r.prev) {
        out.push_back({*id, wire::introduction{self_, stage_, static_cast<std::uint32_t>(capacity_), *ad}});
        p->advert_sent = {ad, now};
      }
      roster_.adverts = {};
    } else {
      send_due(r.prev, &peer::advert_sent, ad, roster_.adverts, now, out,
               [](const std::vector<wire::target_cost>& c) { return wire::message{wire::cost_advert{c}}; });
    }
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

  // Anti-entropy: every few ticks each relay asks its upstream whether it still feeds it,
  // telling it the flow's cost back to the data holder (the answer carries the cost from it).
  // A data holder, which nobody downstream checks, asks the relay closing each ring.
  if (now % cfg_.anti_entropy_ticks == 0)
    for (auto& [fid, f] : flows_)
      if (f.built && !f.prev.empty())
        out.push_back({f.prev, wire::flow_sync{wire::sync_kind::check, fid, f.target,
                                               holder() ? 0.0 : down_cost(f), {}, 0}});

  if (!holder())
    anneal_tick(now, out);
  // Re-routing off dear or loaded next hops, between two anti-entropy rounds.
  // One put off because its flow's holder had a microbatch in flight is tried every tick.
  if (moves_enabled_ && cfg_.reroute_gain > 0
      && (reroute_waits_ || now % cfg_.anti_entropy_ticks == cfg_.anti_entropy_ticks / 2))
    reroute_tick(now, out);

  // A data holder starts as many flows as its capacity allows and a first hop can take.
  if (holder()) {
    bool started = false;
    while (spare() > 0) {
      auto first = best_next(self_, {});
      if (!first)
        break;
      start_flow(now, first->first, out);
      started = true;
    }
    // Room left but no first-stage relay advertises a path: every anti-entropy period ask one
    // anyway, in turn, telling it how many flows this holder has. A relay that carries a flow
    // of a holder with at least two more gives that flow up for this one (fair shares);
    // otherwise it turns the request away at once, reserving nothing.
    if (!started && spare() > 0 && moves_enabled_ && now % cfg_.anti_entropy_ticks == 0) {
      std::vector<std::string> firsts;
      for (auto [id, p] : roster().peers)
        if (p->stage == next_stage())
          firsts.push_back(*id);
      if (!firsts.empty())
        start_flow(now, firsts[probe_++ % firsts.size()], out);
    }
  }
  // Paths given up for another flow are only reserved for a short while.
  for (auto it = freed_.begin(); it != freed_.end();)
    it = now - it->second.since > cfg_.half_built_ttl_ticks ? freed_.erase(it) : std::next(it);
  return out;
}

// Re-routing (docs/routing.md, "Re-routing built flows"): at most one built flow per call
// moves its next hop to the peer where it would cost at least `reroute_gain` less. Staying
// costs the flow's own path as its next hop reported it (its tail, without the load
// downstream) plus the load of the other flows on this link; moving costs what the new next
// hop advertises for one more flow, its link's load included. The comparison leans towards
// staying, so that moves settle. The move is the re-route after a loss downstream: the old
// next hop is cancelled (and cancels onwards), the flow is requested from the new one.
void flow_balancer::reroute_tick(std::int64_t now, std::vector<outgoing>& out) {
  if (next_stage() == 0)
    return; // the ring closes at its own data holder: nothing to choose
  auto on_link = flows_by_next();
  held_flow* best = nullptr;
  std::string to;
  double best_gain = 0;
  reroute_waits_ = false;
  // The cheapest alternatives avoiding each next hop, for every data holder at once (nothing
  // changes during the loop): one walk over the view's graph.
  auto& v = view();
  auto alternatives = v.graph.cheapest_two(load_now());
  for (auto& [fid, f] : flows_) {
    if (!f.built || f.next.empty() || !f.tail_known)
      continue;
    auto p = peers_.find(f.next);
    if (p == nullptr)
      continue;
    double others = cfg_.link_load ? (on_link[f.next] - 1) * p->second.link_s : 0.0;
    double stay = p->second.edge + f.tail + others;
    auto t = v.target.find(f.target);
    if (t == v.target.end())
      continue;
    // Its current next hop's index in the view (none: not there, nothing to avoid).
    auto& q = p->second;
    auto slot = q.view_slot < v.next_peer.size() && v.next_peer[q.view_slot] == &q ? q.view_slot : v.next.size();
    auto& alt = alternatives[t->second].avoiding(slot);
    if (!alt)
      continue;
    double gain = stay - alt->cost;
    if (gain >= cfg_.reroute_gain * stay && busy(f)) {
      ++stats_.deferred; // a microbatch of its holder is in flight: again at the next tick
      reroute_waits_ = true;
      continue;
    }
    if (gain >= cfg_.reroute_gain * stay && gain > best_gain) {
      best_gain = gain;
      best = &f;
      to = *v.next[alt->next];
    }
  }
  if (best == nullptr)
    return;
  ++stats_.reroutes;
  out.push_back({best->next, wire::flow_sync{wire::sync_kind::cancel, best->id, best->target, 0.0, {}, 0}});
  best->built = false;
  best->since_tick = now;
  request_to(*best, to, out);
}

// Reserves a slot for the flow `r` asks for, fed by `from`.
held_flow& flow_balancer::hold(const std::string& from, const wire::flow_request& r, std::int64_t now) {
  held_flow f;
  f.id = r.flow_id;
  f.target = r.target;
  f.prev = from;
  f.since_tick = now;
  handed_.erase(f.id); // ours again: requests for it are no longer sent on
  return flows_[f.id] = f;
}

std::uint32_t flow_balancer::built_flows() const {
  std::uint32_t n = 0;
  for (auto& [fid, f] : flows_)
    n += f.built ? 1 : 0;
  return n;
}

void flow_balancer::start_flow(std::int64_t now, const std::string& first, std::vector<outgoing>& out) {
  std::uint64_t fid = (name_hash(self_) << 24) ^ next_flow_++;
  held_flow f;
  f.id = fid;
  f.target = self_;
  f.since_tick = now;
  auto& slot = flows_[fid] = f;
  request_to(slot, first, out);
}

// A first-stage relay that cannot admit a request from a data holder (full, or no room further
// down) while it carries a flow of a holder with at least two flows more: that flow (built, the
// richest holder's) is given up, and the new one takes its path hop by hop (`replaces`): each
// hop sees the cancel first (one FIFO channel per pair of nodes) and hands the freed slot to the
// request.
bool flow_balancer::preempt_for(const std::string& from, const wire::flow_request& r, std::int64_t now,
                                std::vector<outgoing>& out) {
  if (holder() || prev_stage() != 0 || from != r.target || !moves_enabled_)
    return false;
  if (proposal_ || !expected_.empty())
    return false; // a move in progress counts on this node's slots: not now
  std::optional<std::uint64_t> victim;
  std::uint32_t richest = 0;
  for (auto& [fid, f] : flows_) {
    if (!f.built || f.target == r.target || f.next.empty())
      continue;
    auto it = holder_flows_.find(f.target);
    if (it == holder_flows_.end() || it->second < r.holder_flows + 2)
      continue;
    if (busy(f)) { // its holder's microbatch would lose its path: a later probe
      ++stats_.deferred;
      continue;
    }
    if (!victim || it->second > richest) {
      victim = fid;
      richest = it->second;
    }
  }
  if (!victim)
    return false;
  auto gone = flows_.at(*victim);
  release(*victim, out, wire::reject_reason::over_capacity); // tells its holder, cancels downstream
  --holder_flows_[gone.target];
  auto& slot = hold(from, r, now);
  request_to(slot, gone.next, out, *victim);
  return true;
}

// A request that `replaces` a flow this hop just cancelled takes that flow's slot and path
// (at the last relay stage the ring closes at the request's own holder).
bool flow_balancer::take_freed_path(const std::string& from, const wire::flow_request& r, std::int64_t now,
                                    std::vector<outgoing>& out) {
  if (r.replaces == 0 || holder())
    return false;
  auto fr = freed_.find(r.replaces);
  if (fr == freed_.end() || fr->second.prev != from || spare() <= 0)
    return false; // only the hop that cancelled the flow may hand its path on
  auto next = next_stage() == 0 ? r.target : fr->second.next;
  freed_.erase(fr);
  if (!is_peer(next, next_stage()))
    return false;
  auto& slot = hold(from, r, now);
  request_to(slot, next, out, next_stage() == 0 ? 0 : r.replaces);
  return true;
}

void flow_balancer::forward_request(held_flow& f, std::vector<outgoing>& out) {
  auto next = best_next(f.target, f.tried);
  if (!next) {
    release(f.id, out, wire::reject_reason::no_spare_path);
    return;
  }
  request_to(f, next->first, out);
}

void flow_balancer::request_to(held_flow& f, const std::string& next, std::vector<outgoing>& out,
                               std::uint64_t replaces) {
  f.next = next;
  f.tail_known = false;
  auto& p = peer_at(next);
  double believed = 0.0;
  if (next_stage() != 0) {
    if (auto it = p.costs.find(f.target); it != p.costs.end())
      believed = it->second;
    if (++p.demand == 0) // one slot of it is now spoken for, until its next advert
      view_changed();     // (its last: the view no longer routes through it)
  }
  // A data holder tells how many built flows it has (fair shares): requests still on their way
  // do not count, so that a holder probing for more does not look richer than it is.
  auto mine = holder() ? built_flows() : 0U;
  out.push_back({f.next, wire::flow_request{f.id, f.target, believed, mine, replaces}});
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
    out.push_back({f.next, wire::flow_sync{wire::sync_kind::cancel, id, f.target, 0.0, {}, 0}});
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
    if (it->second.prev != from)
      it->second.head_known = false; // the new upstream's CONFIRM will tell
    it->second.prev = from;
    if (it->second.built)
      out.push_back({from, response(r.flow_id, true, wire::reject_reason::none, r.target)});
    return out;
  }
  // A flow we handed to a same-stage peer: the sender (a hop that moved concurrently) must
  // send it there. Unless it is being handed back to us: the peer then points here, and the
  // two would bounce the sender between them until the older handover expired.
  if (auto h = handed_.find(r.flow_id);
      h != handed_.end() && h->second.to != from && expected_.count(r.flow_id) == 0) {
    out.push_back({from, wire::flow_sync{wire::sync_kind::redirect, r.flow_id, r.target, 0.0, h->second.to, 0}});
    return out;
  }
  // A flow a same-stage peer handed to us (an agreed move), sent by its upstream hop (not
  // necessarily the one listed: that hop may have moved it on concurrently): carry it on to
  // the hop it had, whatever our current costs. A SWAP's flow has its slot: agreed, or ours
  // to free by handing over our half (unless that is gone meanwhile: then only a free slot).
  if (auto e = expected_.find(r.flow_id); e != expected_.end() && e->second.target == r.target
      && is_peer(e->second.next, next_stage())
      && ((e->second.swap
           && (e->second.agreed
               || (proposal_ && proposal_->kind == wire::move_kind::swap && flows_.count(proposal_->gives) > 0)))
          || spare() > 0)) {
    auto next = e->second.next;
    expected_.erase(e);
    auto& slot = hold(from, r, now);
    request_to(slot, next, out);
    // It overtook (or replaced a lost) acceptance of our proposal: that is the answer.
    if (proposal_
        && std::find(proposal_->candidates.begin(), proposal_->candidates.end(), r.flow_id)
             != proposal_->candidates.end())
      conclude(true, r.flow_id, now, out);
    return out;
  }
  if (!holder() && prev_stage() == 0 && from == r.target) {
    holder_flows_[r.target] = r.holder_flows; // what the holder says it has besides this one
    reported_[r.flow_id] = r.holder_flows;
    if (reported_.size() > 4096)
      reported_.erase(reported_.begin()); // requests that never got an answer
  }
  if (take_freed_path(from, r, now, out))
    return out;
  // Full here, or no room further down: a poorer data holder may still take a richer one's ring.
  if ((spare() <= 0 || !cost_to(r.target)) && preempt_for(from, r, now, out))
    return out;
  if (spare() <= 0) {
    out.push_back({from, response(r.flow_id, false, wire::reject_reason::over_capacity, r.target)});
    return out;
  }
  auto c = cost_to(r.target);
  if (!c) {
    out.push_back({from, response(r.flow_id, false, wire::reject_reason::no_spare_path, r.target)});
    return out;
  }
  // Stale: the path got dearer than the requester believed. Judged on the bare path cost: the
  // load part grows with every flow admitted, and a burst of requests on one advert would
  // otherwise be turned away one by one.
  if (auto bare = best_next(r.target, {}, false); !bare || stale(bare->second, r.advertised_cost)) {
    out.push_back({from, response(r.flow_id, false, wire::reject_reason::stale_cost, r.target)});
    return out;
  }
  auto& slot = hold(from, r, now);
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
    bool changed = !f.tail_known || differs(f.tail, r.current_cost);
    f.tail = r.current_cost;
    f.tail_known = true;
    if (f.built) {
      if (changed)
        send_down_cost(f, out); // a re-route downstream changed the ring: tell upstream
      send_up_cost(f, out);     // and the (possibly new) next hop its head
      return out;
    }
    f.built = true;
    // Built for a data holder that said it had n others: it has n + 1 now (as far as we know).
    if (auto rep = reported_.find(f.id); rep != reported_.end()) {
      auto& n = holder_flows_[f.target];
      n = std::max(n, rep->second + 1);
      reported_.erase(rep);
    }
    if (!holder())
      out.push_back({f.prev, response(f.id, true, wire::reject_reason::none, f.target)});
    send_up_cost(f, out);
    return out;
  }
  // Refresh our view of the rejecting peer, then try another next hop.
  auto& p = peer_at(from);
  if (p.stage != 0) {
    auto cost_of = [&]() -> std::optional<double> {
      if (!p.heard || p.demand >= 0)
        return std::nullopt; // not in the view
      auto it = p.costs.find(f.target);
      return it == p.costs.end() ? std::nullopt : std::optional<double>{it->second};
    };
    bool eligible = p.heard && p.demand < 0;
    auto before = cost_of();
    p.demand = r.demand;
    if (r.reason == wire::reject_reason::no_spare_path || r.demand >= 0)
      p.costs.erase(f.target);
    else
      p.costs[f.target] = r.current_cost;
    if (eligible != (p.heard && p.demand < 0) || before != cost_of())
      view_changed();
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
    auto& p = peer_at(from);
    bool eligible = p.heard && p.demand < 0;
    p.heard = true;
    p.demand = 0;
    // Usually the same targets as last time, in the same (sorted) order: overwrite in place.
    bool same = p.costs.size() == a->costs.size();
    auto it = p.costs.begin();
    for (std::size_t k = 0; same && k < a->costs.size(); ++k, ++it)
      same = it->first == a->costs[k].target;
    if (same) {
      bool changed = false;
      it = p.costs.begin();
      for (auto& c : a->costs) {
        changed = changed || it->second != c.cost;
        (it++)->second = c.cost;
        p.demand = c.demand;
      }
      if (eligible != (p.demand < 0) || (changed && !view_costs_changed(p)))
        view_changed(); // else the view is up to date (its paths' costs set in place)
      return {};
    }
    view_changed();
    p.costs.clear();
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
  if (auto* s = std::get_if<wire::flow_sync>(&msg))
    return on_sync(from, *s, now);
  if (auto* p = std::get_if<wire::move_proposal>(&msg))
    return on_proposal(from, *p, now);
  if (auto* r = std::get_if<wire::move_response>(&msg))
    return on_move_response(from, *r, now);
  if (auto* l = std::get_if<wire::flow_listing>(&msg)) {
    auto it = peers_.find(from);
    if (!holder() && it != nullptr && it->second.stage == stage_ && l->peer_id == from) {
      auto& p = it->second;
      if (!p.listing)
        roster_.lists_stale = true; // one more in roster().listed
      if (!p.listing || *p.listing != l->flows) { // (a refresh changes nothing)
        listed_flows_ -= p.listing ? p.listing->size() : 0;
        p.listing = l->flows;
        p.ends_roster = 0;
        listed_flows_ += p.listing->size();
      }
    }
    return {};
  }
  return {};
}

std::vector<outgoing> flow_balancer::on_sync(const std::string& from, const wire::flow_sync& sync,
                                             std::int64_t now) {
  std::vector<outgoing> out;
  auto* s = &sync;
  auto it = flows_.find(s->flow_id);
  // Anti-entropy: a downstream hop asks whether we still feed it this flow, and tells us
  // its cost back to the data holder.
  if (s->kind == wire::sync_kind::check) {
    if (it == flows_.end() || it->second.next != from) {
      // A flow we just handed to a peer: its new hop is splicing itself in; stay silent.
      auto h = handed_.find(s->flow_id);
      if (h == handed_.end() || h->second.old_next != from)
        out.push_back({from, wire::flow_sync{wire::sync_kind::cancel, s->flow_id, s->target, 0.0, {}, 0}});
      return out;
    }
    auto& f = it->second;
    bool changed = !f.tail_known || differs(f.tail, s->cost);
    f.tail = s->cost;
    f.tail_known = true;
    if (changed)
      send_down_cost(f, out);
    confirm_to(f, from, out);
    return out;
  }
  // The upstream hop's cost from the data holder.
  if (s->kind == wire::sync_kind::confirm) {
    if (holder() || it == flows_.end() || it->second.prev != from)
      return out;
    if (prev_stage() == 0 && from == s->target)
      holder_flows_[s->target] = s->holder_flows; // the holder's own count, every anti-entropy period
    auto& f = it->second;
    // The holder's figures go on at once when its flow count changed or its other rings by
    // more than 5%; smaller drifts travel with the periodic CHECK/CONFIRM round (one hop per
    // period): with link load, some ring cost of a large holder changes nearly every period.
    bool changed = !f.head_known || differs(f.head, s->cost) || f.holder_flows != s->holder_flows
                   || std::abs(f.others - s->others_cost) > 0.05 * std::max(f.others, s->others_cost);
    f.head = s->cost;
    f.head_known = true;
    f.holder_flows = s->holder_flows;
    f.others = s->others_cost;
    if (changed)
      send_up_cost(f, out);
    return out;
  }
  // Our next hop handed the flow to a same-stage peer: send it there.
  if (s->kind == wire::sync_kind::redirect) {
    if (it == flows_.end() || it->second.next != from || s->node == from)
      return out;
    auto& f = it->second;
    f.since_tick = now;
    f.tried.clear();
    if (is_peer(s->node, next_stage())) {
      // The flow stays usable meanwhile (the new hop carries it on as soon as it has it);
      // a refusal re-routes it as any push-back does.
      request_to(f, s->node, out);
    } else {
      f.built = false;
      f.tried.insert(from); // a stranger: re-route on our own
      forward_request(f, out);
    }
    return out;
  }
  {
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
    if (!f.next.empty()) {
      freed_[f.id] = freed{f.next, from, now}; // a request replacing it may follow right behind
      out.push_back({f.next, wire::flow_sync{wire::sync_kind::cancel, f.id, f.target, 0.0, {}, 0}});
    }
    return out;
  }
}

std::vector<outgoing> flow_balancer::remove_peer(const std::string& id, std::int64_t now) {
  std::vector<outgoing> out;
  if (auto p = peers_.find(id); p != nullptr) { // with its listing and what went to it
    if (p->second.listing)
      listed_flows_ -= p->second.listing->size();
    if (!roster_.stale) {
      auto& all = roster_.peers;
      auto at = roster_at(all, id);
      if (at != all.end() && *at->first == id)
        all.erase(at);
      else
        roster_.stale = true;
    }
    peers_.erase(p);
    view_changed();
    roster_changed();
  }
  if (proposal_ && proposal_->peer == id) {
    for (auto c : proposal_->candidates)
      expected_.erase(c);
    proposal_.reset();
  }
  for (auto e = expected_.begin(); e != expected_.end();)
    e = e->second.prev == id || e->second.next == id ? expected_.erase(e) : std::next(e);
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
        out.push_back({next, wire::flow_sync{wire::sync_kind::cancel, fid, target, 0.0, {}, 0}});
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

// --- simulated annealing (docs/routing.md, "Annealing moves") ------------------------

flow_balancer::holder_figures flow_balancer::figures(const std::string& target, std::uint64_t id) const {
  holder_figures h;
  if (auto own = flows_.find(id); own != flows_.end() && own->second.target == target) {
    h.flows = own->second.holder_flows;
    h.others = own->second.others;
    return h;
  }
  // Another node's flow: what this node's own flows of that holder say (its slowest ring,
  // the flow itself perhaps included).
  for (auto& [fid, f] : flows_)
    if (f.target == target && f.holder_flows > 0) {
      h.flows = f.holder_flows;
      h.others = std::max(h.others, f.others);
      if (auto c = ring_cost(f))
        h.others = std::max(h.others, *c);
    }
  return h;
}

double flow_balancer::completion(const wire::flow_entry& f, double ring, bool alone) const {
  auto h = figures(f.target, f.flow_id);
  double rounds = 1;
  if (microbatches_ > 0 && h.flows > 0)
    rounds = static_cast<double>((microbatches_ + h.flows - 1) / h.flows);
  return rounds * std::max(ring, alone ? 0.0 : h.others);
}

std::pair<double, double> flow_balancer::judged(double ring_before, double ring_after, double time_before,
                                                double time_after) const {
  if (cfg_.objective == move_objective::completion
      && std::abs(time_before - time_after) > 1e-9 * std::max(time_before, time_after))
    return {time_before, time_after};
  return {ring_before, ring_after};
}

bool flow_balancer::anneal_accepts(double before, double after) {
  if (before <= 0)
    return false;
  double gain = before - after;
  if (gain >= cfg_.min_gain * before)
    return true;
  // Worsening (or negligible) moves pass with probability exp(gain / T), the gain in percent
  // of the affected flows' max cost, so that T is unit-free.
  if (temperature_ <= cfg_.min_temperature)
    return false;
  double p = std::exp(100.0 * (gain - cfg_.min_gain * before) / before / temperature_);
  return std::uniform_real_distribution<double>{0, 1}(rng_) < p;
}

void flow_balancer::executed(wire::move_kind kind, bool worsening, std::int64_t now) {
  if (kind == wire::move_kind::swap)
    ++stats_.swaps;
  else
    ++stats_.redirects;
  if (worsening)
    ++stats_.worsening;
  temperature_ = std::max(cfg_.min_temperature, temperature_ * cfg_.cooling);
  // Let the ring costs settle before the next proposal, for a random 1-4 ticks: hops of other
  // stages may be moving the same flows on costs that predate this move, and a fixed pause
  // would keep them in step.
  quiet_until_ = std::max(quiet_until_, now + 1 + static_cast<std::int64_t>(rng_() % 4));
}

// The moves this node could propose, best first. REDIRECT: a peer's flow u -> P -> v that
// would cost less as u -> me -> v (needs a spare slot here). SWAP: my costliest flow for one
// of a peer's; only the peer knows what mine would cost there, so `after` is the part known
// here (a lower bound on the max after the move) and the peer decides.
std::vector<flow_balancer::candidate>
flow_balancer::candidates(wire::move_kind kind, std::optional<wire::flow_entry>& gives) const {
  std::vector<candidate> out;
  gives.reset();
  if (kind == wire::move_kind::redirect && spare() <= 0)
    return out; // (a slot can still be taken before the flow arrives: it is then refused)
  if (kind == wire::move_kind::swap) {
    for (auto& [id, f] : flows_)
      if (auto e = entry(f); e && !busy(f) && (!gives || e->ring() > gives->ring()))
        gives = e;
    if (!gives)
      return out;
  }
  if (listed_flows_ == 0)
    return out; // no peer listed a flow
  for (auto [name, q] : roster().listed) {
    auto& peer = *name;
    auto& listing = *q->listing;
    if (q->ends_roster != roster_gen_) {
      q->ends.assign(listing.size(), std::nullopt);
      for (std::size_t k = 0; k < listing.size(); ++k) {
        auto& g = listing[k];
        if (g.next.empty() || (next_stage() == 0 && g.next != g.target))
          continue;
        auto prev = peers_.find(g.prev);
        if (prev == nullptr || prev->second.stage != prev_stage())
          continue;
        auto next = peers_.find(g.next);
        if (next == nullptr || next->second.stage != next_stage())
          continue;
        q->ends[k] = std::make_pair(prev->second.edge, next->second.edge);
      }
      q->ends_roster = roster_gen_;
    }
    for (std::size_t k = 0; k < listing.size(); ++k) {
      auto& g = listing[k];
      if (!q->ends[k] || flows_.count(g.flow_id) > 0 || expected_.count(g.flow_id) > 0)
        continue;
      candidate c{&peer, &g, q->ends[k]->first, q->ends[k]->second, g.ring(), 0};
      c.after = c.flow().ring();
      // The holders' time: g's, and in a swap the larger with my flow's (a swap within one
      // holder leaves its other rings out: the two flows are among them).
      if (kind == wire::move_kind::swap && g.flow_id == gives->flow_id)
        continue;
      if (cfg_.objective == move_objective::completion) {
        bool alone = kind == wire::move_kind::swap && gives->target == g.target;
        double time_before = completion(g, c.before, alone), time_after = completion(g, c.after, alone);
        double ring_before = c.before;
        if (kind == wire::move_kind::swap) {
          ring_before = std::max(ring_before, gives->ring());
          time_before = std::max(time_before, completion(*gives, gives->ring(), alone));
        }
        std::tie(c.before, c.after) = judged(ring_before, c.after, time_before, time_after);
      } else if (kind == wire::move_kind::swap) {
        c.before = std::max(c.before, gives->ring());
      }
      if (c.before > 0) // (a peer listing zero costs: nothing to gain, and no ratio)
        out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(), [](const candidate& a, const candidate& b) {
    double ga = (a.before - a.after) / a.before, gb = (b.before - b.after) / b.before;
    return ga != gb ? ga > gb : a.listed->flow_id < b.listed->flow_id;
  });
  return out;
}

void flow_balancer::anneal_tick(std::int64_t now, std::vector<outgoing>& out) {
  // Expire what a lost message left behind.
  if (proposal_ && now - proposal_->since > cfg_.half_built_ttl_ticks) {
    for (auto c : proposal_->candidates)
      if (auto e = expected_.find(c); e != expected_.end() && !e->second.agreed)
        expected_.erase(e);
    proposal_.reset();
  }
  for (auto e = expected_.begin(); e != expected_.end();)
    e = now - e->second.since > cfg_.half_built_ttl_ticks ? expected_.erase(e) : std::next(e);
  for (auto h = handed_.begin(); h != handed_.end();)
    h = now - h->second.since > cfg_.half_built_ttl_ticks ? handed_.erase(h) : std::next(h);

  // Publish our flows to the same-stage peers (when they changed, else every refresh_ticks).
  std::vector<wire::flow_entry> entries;
  for (auto& [id, f] : flows_)
    if (auto e = entry(f))
      entries.push_back(*e);
  auto& listing = remember(last_listing_, std::move(entries));
  send_due(roster().same, &peer::listing_sent, listing, roster_.listings, now, out,
           [this](const std::vector<wire::flow_entry>& l) { return wire::message{wire::flow_listing{self_, l}}; });

  if (!moves_enabled_ || proposal_ || now < quiet_until_)
    return;
  bool swap_first = std::uniform_real_distribution<double>{0, 1}(rng_) < cfg_.swap_probability;
  for (auto kind : swap_first ? std::array{wire::move_kind::swap, wire::move_kind::redirect}
                              : std::array{wire::move_kind::redirect, wire::move_kind::swap}) {
    std::optional<wire::flow_entry> gives;
    auto cands = candidates(kind, gives);
    if (cands.empty())
      continue;
    // Improving moves first: offer the peer with the best one all of its improving flows,
    // it picks with its own fresher costs. Otherwise one random move, if the annealing
    // lets it through.
    std::vector<candidate> offer;
    auto improving = [&](const candidate& c) { return c.before - c.after >= cfg_.min_gain * c.before; };
    if (improving(cands.front())) {
      for (auto& c : cands)
        if (*c.peer == *cands.front().peer && improving(c) && offer.size() < 8)
          offer.push_back(c);
    } else {
      auto& c = cands[std::uniform_int_distribution<std::size_t>{0, cands.size() - 1}(rng_)];
      if (anneal_accepts(c.before, c.after))
        offer.push_back(c);
    }
    if (offer.empty())
      continue;
    wire::move_proposal p{++next_proposal_, kind, {}, offer.front().before, offer.front().after, temperature_};
    proposal proposal{p.proposal_id, *offer.front().peer, kind, gives ? gives->flow_id : 0, {}, now,
                      !improving(offer.front())};
    if (gives)
      p.flows.push_back(*gives);
    for (auto& c : offer) {
      auto& g = *c.listed;
      p.flows.push_back(c.flow());
      proposal.candidates.push_back(g.flow_id);
      expected_[g.flow_id] = expectation{g.target, g.prev, g.next, now, false, kind == wire::move_kind::swap};
    }
    proposal_ = std::move(proposal);
    ++stats_.proposed;
    out.push_back({proposal_->peer, std::move(p)});
    return;
  }
}

// A same-stage peer will carry flow `id` from now on: its upstream hop sends it there, the
// peer splices itself in front of our next hop (which must not cancel meanwhile).
void flow_balancer::hand_over(std::uint64_t id, const std::string& to, std::int64_t now,
                              std::vector<outgoing>& out) {
  auto it = flows_.find(id);
  if (it == flows_.end())
    return;
  auto& f = it->second;
  out.push_back({f.prev, wire::flow_sync{wire::sync_kind::redirect, id, f.target, 0.0, to, 0}});
  handed_[id] = handed{f.next, to, now};
  flows_.erase(it);
}

std::vector<outgoing> flow_balancer::on_proposal(const std::string& from, const wire::move_proposal& p,
                                                 std::int64_t now) {
  std::vector<outgoing> out;
  auto reject = [&] {
    out.push_back({from, wire::move_response{p.proposal_id, false, 0}});
    return out;
  };
  // One outstanding proposal per node: while ours waits, we take part in no other move.
  // Two peers that proposed to each other would refuse each other forever: the proposal of
  // the smaller id goes ahead, the other side withdraws its own.
  if (proposal_ && proposal_->peer == from && from < self_)
    conclude(false, 0, now, out);
  if (holder() || !moves_enabled_ || proposal_ || !is_peer(from, stage_) || p.flows.empty())
    return reject();
  bool swap = p.kind == wire::move_kind::swap;
  std::size_t first = swap ? 1 : 0;
  double mine_before = 0, mine_after = 0; // swap: the proposer's flow, here
  if (swap) {
    auto& f = p.flows.front();
    if (flows_.count(f.flow_id) > 0 || expected_.count(f.flow_id) > 0 || !is_peer(f.prev, prev_stage())
        || !is_peer(f.next, next_stage()) || (next_stage() == 0 && f.next != f.target))
      return reject();
    mine_before = f.ring();
    mine_after = f.head_cost + edge(f.prev) + edge(f.next) + f.tail_cost;
  }
  std::optional<std::uint64_t> best;
  double best_before = 0, best_after = 0;
  for (std::size_t k = first; k < p.flows.size(); ++k) {
    auto& c = p.flows[k];
    auto it = flows_.find(c.flow_id);
    if (it == flows_.end() || it->second.prev != c.prev || it->second.next != c.next)
      continue;
    auto ring = ring_cost(it->second);
    auto mine = entry(it->second);
    if (!ring || !mine)
      continue;
    auto& g = it->second;
    if (busy(g)) { // a microbatch of its holder is in flight here: not now
      ++stats_.deferred;
      continue;
    }
    double g_after = g.head + c.in_cost + c.out_cost + g.tail;
    double before = std::max(mine_before, *ring);
    double after = std::max(mine_after, g_after);
    if (cfg_.objective == move_objective::completion) {
      bool alone = swap && p.flows.front().target == g.target;
      double time_before = completion(*mine, *ring, alone), time_after = completion(*mine, g_after, alone);
      if (swap) {
        time_before = std::max(time_before, completion(p.flows.front(), mine_before, alone));
        time_after = std::max(time_after, completion(p.flows.front(), mine_after, alone));
      }
      std::tie(before, after) = judged(before, after, time_before, time_after);
    }
    if (before <= 0)
      continue;
    if (!best || (before - after) / before > (best_before - best_after) / best_before) {
      best = g.id;
      best_before = before;
      best_after = after;
    }
  }
  if (!best || !anneal_accepts(best_before, best_after))
    return reject();
  hand_over(*best, from, now, out);
  if (swap) {
    auto& f = p.flows.front();
    expected_[f.flow_id] = expectation{f.target, f.prev, f.next, now, true, true};
  }
  ++stats_.accepted;
  executed(p.kind, best_before - best_after < cfg_.min_gain * best_before, now);
  out.push_back({from, wire::move_response{p.proposal_id, true, *best}});
  return out;
}

std::vector<outgoing> flow_balancer::on_move_response(const std::string& from, const wire::move_response& r,
                                                      std::int64_t now) {
  std::vector<outgoing> out;
  if (proposal_ && proposal_->id == r.proposal_id && proposal_->peer == from)
    conclude(r.accepted, r.flow_id, now, out);
  return out;
}

// The answer to our proposal: the response, or (when the handed flow overtakes it) the
// flow itself.
void flow_balancer::conclude(bool accepted, std::uint64_t flow_id, std::int64_t now, std::vector<outgoing>& out) {
  auto done = std::move(*proposal_);
  proposal_.reset();
  bool chosen = accepted
                && std::find(done.candidates.begin(), done.candidates.end(), flow_id) != done.candidates.end();
  for (auto c : done.candidates) {
    auto e = expected_.find(c);
    if (e == expected_.end())
      continue;
    if (chosen && c == flow_id && (done.kind != wire::move_kind::swap || flows_.count(done.gives) > 0)) {
      e->second.agreed = true;
      e->second.since = now;
    } else { // (a swap whose half here is gone meanwhile: the flow is admitted only to a free slot)
      expected_.erase(e);
    }
  }
  if (!chosen) {
    // Back off for a random 0-2 ticks, so that proposers contending for the same peers
    // do not meet in lockstep again.
    quiet_until_ = now + 1 + static_cast<std::int64_t>(rng_() % 3);
    return;
  }
  // Our half of a swap. A flow that is being re-routed goes too: the peer holds a slot for
  // it, and keeping it would leave us over capacity. So does one that a microbatch entered
  // since we proposed (idle then): the peer has handed its flow over already.
  if (done.kind == wire::move_kind::swap)
    hand_over(done.gives, done.peer, now, out);
  executed(done.kind, done.worsening, now);
}

} // namespace gwtf::routing
