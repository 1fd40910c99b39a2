#include "actors/core/peer_directory.hpp"

#include <algorithm>
#include <iterator>

namespace gwtf::actors {

peer_directory::peer_directory(wire::hello self, std::vector<std::string> bootstrap,
                               std::int64_t backoff_min_ms, std::int64_t backoff_max_ms, std::int64_t give_up_ms)
  : self_(std::move(self)),
    bootstrap_(std::move(bootstrap)),
    backoff_min_(std::max<std::int64_t>(1, backoff_min_ms)),
    backoff_max_(std::max(backoff_min_ms, backoff_max_ms)),
    give_up_(std::max(give_up_ms, backoff_max_)) {
}

gossip_outcome peer_directory::on_gossip(std::uint64_t conn, const wire::gossip& g, std::int64_t now_ms) {
  gossip_outcome out;
  if (g.peers.empty()) {
    out.error = "gossip without a sender record";
    return out;
  }
  const auto& intro = g.peers.front().peer;
  out.peer = intro.peer_id;
  if (intro.cluster != self_.cluster) {
    out.error = "peer '" + intro.peer_id + "' at " + intro.address + " belongs to another cluster (hash "
                + std::to_string(intro.cluster) + ", ours " + std::to_string(self_.cluster) + ")";
    return out;
  }
  if (intro.peer_id == self_.peer_id) {
    out.error = "a peer at " + intro.address + " claims this host's name '" + intro.peer_id + "'";
    return out;
  }
  if (certificates_required_) {
    auto c = certified_.find(conn);
    if (c == certified_.end()) {
      out.error = "peer '" + intro.peer_id + "' at " + intro.address + " spoke on a connection without a verified certificate";
      return out;
    }
    if (std::find(c->second.begin(), c->second.end(), intro.peer_id) == c->second.end()) {
      std::string names;
      for (auto& n : c->second)
        names += (names.empty() ? "" : ", ") + n;
      out.error = "a peer at " + intro.address + " introduced itself as '" + intro.peer_id
                  + "', but its certificate names " + names + " (a host may introduce only a name its certificate carries)";
      return out;
    }
  }
  if (auto b = by_conn_.find(conn); b != by_conn_.end() && b->second != intro.peer_id) {
    out.error = "connection of '" + b->second + "' now claims to be '" + intro.peer_id + "'";
    // Not bound; but if the claim is true, dialling the claimed address lets the peer
    // introduce itself directly.
    hint(intro.address);
    out.error += intro.address.empty() ? "" : "; dialling " + intro.address + " to hear it directly";
    return out;
  }
  auto it = peers_.find(intro.peer_id);
  if (it != peers_.end() && it->second.conn && *it->second.conn != conn) {
    auto& e = it->second;
    if (intro.incarnation == e.hello.incarnation && intro.address == e.hello.address) {
      // The same peer on a second connection (both ends dialled at once): bound too.
      e.more.insert(conn);
      by_conn_[conn] = intro.peer_id;
      learn(g, out);
      return out;
    }
    // The name is bound elsewhere: only a newer incarnation (a restart) takes it over. The
    // claimant's address is dialled once that binding is gone (it may have been the
    // impostor): a true claim is then heard over the claimant's own connection.
    if (intro.incarnation <= e.hello.incarnation) {
      out.error = "peer '" + intro.peer_id + "' at " + intro.address
                  + " is already connected elsewhere with the same or a newer incarnation";
      hint(intro.address);
      return out;
    }
    by_conn_.erase(*e.conn);
    for (auto c : e.more)
      by_conn_.erase(c);
    e.more.clear();
    e.conn.reset();
  }
  if (it == peers_.end()) {
    it = peers_.emplace(intro.peer_id, entry{}).first;
    out.learned.push_back(intro.peer_id);
  }
  forgotten_.erase(intro.peer_id);
  it->second.hello = intro;
  out.newly_bound = !it->second.conn;
  it->second.conn = conn;
  by_conn_[conn] = intro.peer_id;
  hinted_.erase(intro.address);
  dial_done(intro.address, true, now_ms);
  learn(g, out);
  return out;
}

void peer_directory::hint(const std::string& address) {
  // At most 32 such addresses pending: a hostile peer's claims cannot grow the list.
  if (!address.empty() && address != self_.address && hinted_.size() < 32)
    hinted_.insert(address);
}

void peer_directory::learn(const wire::gossip& g, gossip_outcome& out) {
  for (std::size_t i = 1; i < g.peers.size(); ++i) {
    const auto& h = g.peers[i].peer;
    if (h.peer_id == self_.peer_id || h.cluster != self_.cluster || peers_.count(h.peer_id) > 0)
      continue;
    // A peer given up on comes back only when someone is connected to it.
    if (g.peers[i].suspected && forgotten_.count(h.peer_id) > 0)
      continue;
    forgotten_.erase(h.peer_id);
    peers_.emplace(h.peer_id, entry{h, std::nullopt, {}});
    out.learned.push_back(h.peer_id);
  }
}

std::optional<std::string> peer_directory::bound_name(std::uint64_t conn) const {
  auto it = by_conn_.find(conn);
  if (it == by_conn_.end())
    return std::nullopt;
  return it->second;
}

std::optional<std::uint64_t> peer_directory::connection(const std::string& peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end())
    return std::nullopt;
  return it->second.conn;
}

std::optional<std::string> peer_directory::connection_lost(std::uint64_t conn, std::int64_t now_ms) {
  certified_.erase(conn);
  auto it = by_conn_.find(conn);
  if (it == by_conn_.end())
    return std::nullopt;
  auto name = it->second;
  by_conn_.erase(it);
  auto& e = peers_.at(name);
  if (e.more.erase(conn) > 0)
    return std::nullopt; // a second connection: the peer still has its first
  if (!e.more.empty()) {
    e.conn = *e.more.begin(); // the first one: the peer goes on over its second
    e.more.erase(e.more.begin());
    return std::nullopt;
  }
  e.conn.reset();
  // Redial after the shortest back-off: a restarted peer comes back at the same address.
  auto& d = dials_[e.hello.address];
  d.backoff = backoff_min_;
  d.not_before = now_ms + backoff_min_;
  return name;
}

bool peer_directory::given_up(const std::string& address, std::int64_t now_ms) const {
  auto d = dials_.find(address);
  return d != dials_.end() && !d->second.in_flight && d->second.failing_since >= 0
         && now_ms - d->second.failing_since >= give_up_;
}

bool peer_directory::dialable(const std::string& address, std::int64_t now_ms) const {
  if (address.empty() || address == self_.address)
    return false;
  auto d = dials_.find(address);
  return d == dials_.end() || (!d->second.in_flight && now_ms >= d->second.not_before);
}

std::vector<std::string> peer_directory::due(std::int64_t now_ms) {
  std::set<std::string> out;
  // Peers no dial has reached for the give-up time: gone (left, or died for good).
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (!it->second.conn && given_up(it->second.hello.address, now_ms)) {
      dials_.erase(it->second.hello.address); // learned again, it starts afresh
      forgotten_.insert(it->first);
      if (forgotten_.size() > 4096) // a bound: the oldest name is as good as any
        forgotten_.erase(forgotten_.begin());
      it = peers_.erase(it);
      continue;
    }
    ++it;
  }
  for (auto it = hinted_.begin(); it != hinted_.end();)
    it = given_up(*it, now_ms) ? hinted_.erase(it) : std::next(it);
  for (auto& [name, e] : peers_)
    if (!e.conn && dialable(e.hello.address, now_ms))
      out.insert(e.hello.address);
  // Bootstrap addresses are dialled until they belong to a connected peer: a host that
  // started before the others would otherwise only know the part of the cluster it reached
  // first, and two such parts would never find each other.
  std::set<std::string> connected;
  for (auto& [name, e] : peers_)
    if (e.conn)
      connected.insert(e.hello.address);
  for (auto& b : bootstrap_)
    if (connected.count(b) == 0 && dialable(b, now_ms))
      out.insert(b);
  for (auto& h : hinted_)
    if (connected.count(h) == 0 && dialable(h, now_ms))
      out.insert(h);
  for (auto& a : out)
    dials_[a].in_flight = true;
  return {out.begin(), out.end()};
}

void peer_directory::dial_done(const std::string& address, bool ok, std::int64_t now_ms) {
  auto& d = dials_[address];
  d.in_flight = false;
  if (ok) {
    d.backoff = 0;
    d.not_before = now_ms + backoff_min_;
    d.failing_since = -1;
    return;
  }
  if (d.failing_since < 0)
    d.failing_since = now_ms;
  d.backoff = d.backoff == 0 ? backoff_min_ : std::min(backoff_max_, d.backoff * 2);
  d.not_before = now_ms + d.backoff;
}

wire::gossip peer_directory::gossip() const {
  wire::gossip g;
  g.peers.push_back(wire::peer_record{self_, 0, false});
  for (auto& [name, e] : peers_)
    g.peers.push_back(wire::peer_record{e.hello, 0, !e.conn});
  return g;
}

std::vector<std::string> peer_directory::bound() const {
  std::vector<std::string> out;
  for (auto& [name, e] : peers_)
    if (e.conn)
      out.push_back(name);
  return out;
}

std::vector<std::string> peer_directory::known() const {
  std::vector<std::string> out;
  for (auto& [name, e] : peers_)
    out.push_back(name);
  return out;
}

const wire::hello* peer_directory::record(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? nullptr : &it->second.hello;
}

} // namespace gwtf::actors
