// Test harness: N flow balancers wired through an in-memory bus that reorders and delays
// messages with a seeded generator, plus the checks every converged state must pass.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "routing/balancer.hpp"

namespace gwtf::test {

/// A random geo-like instance: stages, hosts, capacities and d_ij.
struct flow_instance {
  int stages = 0;
  std::vector<std::string> ids;
  std::vector<int> stage;
  std::vector<int> capacity;
  std::vector<std::vector<double>> cost; ///< d(i, j)
  std::vector<std::vector<double>> link; ///< a microbatch's occupancy of link i -> j (empty: none)

  static flow_instance random(std::uint64_t seed) {
    std::mt19937_64 rng{seed};
    auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1)); };
    std::uniform_real_distribution<double> u{0, 1};
    flow_instance in;
    in.stages = pick(3, 6);
    int holders = pick(1, 3);
    for (int s = 0; s < in.stages; ++s) {
      int count = s == 0 ? holders : pick(2, 5);
      for (int k = 0; k < count; ++k) {
        in.ids.push_back((s == 0 ? "dh" : "r" + std::to_string(s) + "-") + std::to_string(k));
        in.stage.push_back(s);
        in.capacity.push_back(s == 0 ? pick(1, 8) : pick(1, 6));
      }
    }
    // Hosts in 4 regions: cheap links inside a region, dear ones across; heterogeneous compute.
    std::size_t n = in.ids.size();
    std::vector<int> region(n);
    std::vector<double> compute(n);
    for (std::size_t i = 0; i < n; ++i) {
      region[i] = pick(0, 3);
      compute[i] = 0.05 + 0.25 * u(rng);
    }
    in.cost.assign(n, std::vector<double>(n, 0));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double link = region[i] == region[j] ? 0.005 : 0.03 + 0.1 * u(rng);
        in.cost[i][j] = (compute[i] + compute[j]) / 2 + link;
      }
    for (std::size_t i = 0; i < n; ++i) // symmetric, as d_ij averages both directions
      for (std::size_t j = 0; j < i; ++j)
        in.cost[i][j] = in.cost[j][i];
    return in;
  }
};

/// Balancers on an in-memory bus. Each ordered pair of nodes is a FIFO channel, as two CAF
/// actors over TCP are. Within a tick, channels deliver in rounds, one message each, in a
/// seeded random order (messages of different channels are reordered freely); a channel
/// may stall until the next tick (`delay`), delaying everything queued on it; a message may
/// be lost (`drop`).
class balancer_bus {
public:
  /// Nodes in `offline` exist but stay out (as if dead) until `join`.
  balancer_bus(const flow_instance& in, std::uint64_t seed, double delay = 0.1,
               routing::gwtf_config cfg = {}, std::set<std::string> offline = {}, double drop = 0)
    : in_(in), rng_(seed), delay_(delay), drop_(drop), dead_(std::move(offline)) {
    for (std::size_t i = 0; i < in.ids.size(); ++i)
      nodes_.emplace(in.ids[i], routing::flow_balancer{in.ids[i], in.stage[i], in.stages, in.capacity[i], cfg});
    for (std::size_t i = 0; i < in.ids.size(); ++i)
      for (std::size_t j = 0; j < in.ids.size(); ++j)
        if (adjacent(i, j) && dead_.count(in.ids[i]) == 0 && dead_.count(in.ids[j]) == 0)
          nodes_.at(in.ids[i]).add_peer(in.ids[j], in.stage[j], in.cost[i][j], link(i, j));
  }

  /// An offline node joins: it and its neighbours learn of each other.
  void join(const std::string& id) {
    dead_.erase(id);
    std::size_t i = index(id);
    for (std::size_t j = 0; j < in_.ids.size(); ++j)
      if (adjacent(i, j) && dead_.count(in_.ids[j]) == 0) {
        nodes_.at(id).add_peer(in_.ids[j], in_.stage[j], in_.cost[i][j], link(i, j));
        nodes_.at(in_.ids[j]).add_peer(id, in_.stage[i], in_.cost[j][i], link(j, i));
      }
  }

  void run(int ticks) {
    for (int k = 0; k < ticks; ++k)
      step();
  }

  /// Stops losing messages (to let the protocol settle before an audit).
  void heal() { drop_ = 0; }

  /// A quiescent snapshot for an audit: no new annealing moves, then `ticks` ticks for the
  /// agreed ones (and everything they set off) to complete.
  void settle(int ticks = 24) {
    for (auto& [id, node] : nodes_)
      node.set_moves(false);
    run(ticks);
  }

  void resume_moves() {
    for (auto& [id, node] : nodes_)
      node.set_moves(true);
  }

  /// Annealing moves executed so far, over all nodes (each counted on both sides).
  routing::move_stats moves() const {
    routing::move_stats m;
    for (auto& [id, node] : nodes_) {
      m.proposed += node.moves().proposed;
      m.accepted += node.moves().accepted;
      m.redirects += node.moves().redirects;
      m.swaps += node.moves().swaps;
      m.worsening += node.moves().worsening;
    }
    return m;
  }

  /// Crashes a node: it stops; every neighbour learns of it (failure detection).
  void crash(const std::string& id) {
    dead_.insert(id);
    for (auto& [nid, node] : nodes_)
      if (dead_.count(nid) == 0)
        send(nid, node.remove_peer(id, now_));
  }

  const std::map<std::string, routing::flow_balancer>& nodes() const { return nodes_; }
  const std::set<std::string>& dead() const { return dead_; }
  std::int64_t now() const { return now_; }

private:
  double link(std::size_t i, std::size_t j) const { return in_.link.empty() ? 0.0 : in_.link[i][j]; }

  bool adjacent(std::size_t i, std::size_t j) const {
    int si = in_.stage[i];
    int sj = in_.stage[j];
    return i != j && (sj == (si + 1) % in_.stages || si == (sj + 1) % in_.stages || si == sj);
  }

  std::size_t index(const std::string& id) const {
    return static_cast<std::size_t>(std::find(in_.ids.begin(), in_.ids.end(), id) - in_.ids.begin());
  }

  using channel = std::pair<std::string, std::string>; // (from, to)

  void send(const std::string& from, std::vector<routing::outgoing> outs) {
    for (auto& o : outs)
      channels_[{from, o.to}].push_back(std::move(o.msg));
  }

  void step() {
    ++now_;
    for (auto& [id, node] : nodes_)
      if (dead_.count(id) == 0)
        send(id, node.tick(now_));
    std::set<channel> stalled;
    for (int round = 0; round < 100000; ++round) {
      std::vector<channel> ready;
      for (auto& [ch, q] : channels_)
        if (!q.empty() && stalled.count(ch) == 0)
          ready.push_back(ch);
      if (ready.empty())
        break;
      std::shuffle(ready.begin(), ready.end(), rng_);
      for (auto& ch : ready) {
        auto& q = channels_[ch];
        if (dead_.count(ch.first) > 0 || dead_.count(ch.second) > 0) {
          q.clear(); // a crashed end: the connection and its queue are gone
          continue;
        }
        if (std::uniform_real_distribution<double>{0, 1}(rng_) < delay_) {
          stalled.insert(ch); // the rest of this channel waits for the next tick
          continue;
        }
        auto msg = std::move(q.front());
        q.pop_front();
        if (drop_ > 0 && std::uniform_real_distribution<double>{0, 1}(rng_) < drop_)
          continue; // lost
        send(ch.second, nodes_.at(ch.second).handle(ch.first, msg, now_));
      }
    }
  }

  flow_instance in_;
  std::mt19937_64 rng_;
  double delay_;
  double drop_;
  std::map<std::string, routing::flow_balancer> nodes_;
  std::set<std::string> dead_;
  std::map<channel, std::deque<wire::message>> channels_;
  std::int64_t now_ = 0;
};

/// What a converged state looks like, and whether it is valid.
struct flow_audit {
  int complete = 0;               ///< rings holder -> 1 -> ... -> S-1 -> same holder
  int broken = 0;                 ///< built at a holder but not a complete ring
  int orphans = 0;                ///< relay reservations not on any complete ring
  bool over_capacity = false;
  bool through_dead = false;
  double max_cost = 0;            ///< largest ring cost
  int cost_mismatches = 0;        ///< hops whose own idea of their ring's cost is wrong
  std::vector<std::string> problems;
};

inline flow_audit audit(const balancer_bus& bus, const flow_instance& in) {
  flow_audit a;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < in.ids.size(); ++i)
    index[in.ids[i]] = i;
  std::set<std::pair<std::string, std::uint64_t>> on_ring;
  for (auto& [id, node] : bus.nodes()) {
    if (bus.dead().count(id) > 0)
      continue;
    if (static_cast<int>(node.flows().size()) > in.capacity[index[id]])
      a.over_capacity = true;
    if (node.stage() != 0)
      continue;
    for (auto& [fid, f] : node.flows()) {
      if (!f.built)
        continue;
      std::string prev = id;
      std::string cur = f.next;
      double cost = 0;
      bool ok = true;
      std::vector<std::string> hops;
      for (int s = 1; s < in.stages && ok; ++s) {
        auto it = bus.nodes().find(cur);
        if (it == bus.nodes().end() || bus.dead().count(cur) > 0) {
          a.through_dead = a.through_dead || it != bus.nodes().end();
          ok = false;
          break;
        }
        auto fit = it->second.flows().find(fid);
        ok = it->second.stage() == s && fit != it->second.flows().end() && fit->second.built
             && fit->second.prev == prev && fit->second.target == id;
        if (!ok)
          break;
        cost += in.cost[index[prev]][index[cur]];
        hops.push_back(cur);
        prev = cur;
        cur = fit->second.next;
      }
      ok = ok && cur == id && f.prev == prev;
      if (ok) {
        cost += in.cost[index[prev]][index[id]];
        ++a.complete;
        a.max_cost = std::max(a.max_cost, cost);
        for (auto& h : hops)
          on_ring.insert({h, fid});
        // Every hop (and the data holder) must know the ring's cost as the protocol
        // delivered it: accepts, CHECKs and CONFIRMs carry the two halves.
        hops.push_back(id);
        for (auto& h : hops) {
          auto& node = bus.nodes().at(h);
          auto known = node.ring_cost(node.flows().at(fid));
          if (!known || std::abs(*known - cost) > 1e-9 * (1 + cost)) {
            ++a.cost_mismatches;
            a.problems.push_back(h + " thinks flow " + std::to_string(fid) + " costs "
                                 + (known ? std::to_string(*known) : "?") + ", it costs " + std::to_string(cost));
          }
        }
      } else {
        ++a.broken;
        a.problems.push_back("flow " + std::to_string(fid) + " of " + id + " is not a complete ring");
      }
    }
  }
  for (auto& [id, node] : bus.nodes())
    if (bus.dead().count(id) == 0 && node.stage() != 0)
      for (auto& [fid, f] : node.flows())
        if (on_ring.count({id, fid}) == 0)
          ++a.orphans;
  return a;
}

} // namespace gwtf::test
