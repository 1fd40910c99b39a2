#include "routing/optimum.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/successive_shortest_path_nonnegative_weights.hpp>

namespace gwtf::routing {

namespace {

using traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using graph = boost::adjacency_list<
  boost::vecS, boost::vecS, boost::directedS, boost::no_property,
  boost::property<boost::edge_capacity_t, long,
    boost::property<boost::edge_residual_capacity_t, long,
      boost::property<boost::edge_reverse_t, traits::edge_descriptor,
        boost::property<boost::edge_weight_t, long>>>>>;
using edge_t = traits::edge_descriptor;

constexpr double micros_per_second = 1e6;

struct builder {
  graph g;
  std::vector<std::pair<edge_t, std::pair<std::size_t, std::size_t>>> host_edges;

  edge_t add(std::size_t u, std::size_t v, long cap, long weight) {
    auto e = boost::add_edge(u, v, g).first;
    auto r = boost::add_edge(v, u, g).first;
    boost::put(boost::edge_capacity, g, e, cap);
    boost::put(boost::edge_capacity, g, r, 0);
    boost::put(boost::edge_weight, g, e, weight);
    boost::put(boost::edge_weight, g, r, -weight);
    boost::put(boost::edge_reverse, g, e, r);
    boost::put(boost::edge_reverse, g, r, e);
    return e;
  }
};

} // namespace

optimum_result max_flow_min_cost(const std::vector<flow_node>& nodes, int stages,
                                 const edge_cost_fn& cost) {
  if (stages < 2)
    throw std::invalid_argument("max_flow_min_cost: need at least 2 stages");
  optimum_result out;
  out.stage_capacity.assign(static_cast<std::size_t>(stages), 0);
  for (const auto& n : nodes) {
    if (n.stage < 0 || n.stage >= stages || n.capacity < 0)
      throw std::invalid_argument("max_flow_min_cost: node with invalid stage or capacity");
    out.stage_capacity[static_cast<std::size_t>(n.stage)] += n.capacity;
  }
  auto it = std::min_element(out.stage_capacity.begin(), out.stage_capacity.end());
  out.bottleneck_stage = static_cast<int>(it - out.stage_capacity.begin());

  // Vertices: 0 source, 1 sink; per node k: in = 2 + 3k, out = 3 + 3k, and for data holders
  // a separate return vertex 4 + 3k (the ring closes there, then goes to the sink).
  const std::size_t n = nodes.size();
  builder b;
  b.g = graph(2 + 3 * n);
  auto in = [](std::size_t k) { return 2 + 3 * k; };
  auto out_v = [](std::size_t k) { return 3 + 3 * k; };
  auto ret = [](std::size_t k) { return 4 + 3 * k; };
  for (std::size_t k = 0; k < n; ++k) {
    long cap = nodes[k].capacity;
    b.add(in(k), out_v(k), cap, 0);
    if (nodes[k].stage == 0) {
      b.add(0, in(k), cap, 0);
      b.add(ret(k), 1, cap, 0);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    int next = (nodes[i].stage + 1) % stages;
    for (std::size_t j = 0; j < n; ++j) {
      if (nodes[j].stage != next || i == j)
        continue;
      double c = cost(i, j);
      if (!std::isfinite(c))
        continue;
      if (c < 0)
        throw std::invalid_argument("max_flow_min_cost: negative edge cost");
      long w = std::lround(c * micros_per_second);
      auto e = b.add(out_v(i), next == 0 ? ret(j) : in(j), std::numeric_limits<int>::max(), w);
      b.host_edges.push_back({e, {i, j}});
    }
  }

  std::vector<long> dist(boost::num_vertices(b.g)), dist_prev(boost::num_vertices(b.g));
  std::vector<edge_t> pred(boost::num_vertices(b.g));
  auto idx = boost::get(boost::vertex_index, b.g);
  boost::successive_shortest_path_nonnegative_weights(
    b.g, 0, 1,
    boost::distance_map(boost::make_iterator_property_map(dist.begin(), idx))
      .predecessor_map(boost::make_iterator_property_map(pred.begin(), idx))
      .distance_map2(boost::make_iterator_property_map(dist_prev.begin(), idx)));

  long total = 0;
  for (const auto& [e, ends] : b.host_edges) {
    long f = boost::get(boost::edge_capacity, b.g, e) - boost::get(boost::edge_residual_capacity, b.g, e);
    if (f > 0) {
      out.edges.push_back(edge_flow{ends.first, ends.second, static_cast<int>(f)});
      total += f * boost::get(boost::edge_weight, b.g, e);
    }
  }
  // Every unit that leaves the source crossed one data holder's entry edge.
  auto [oe, oe_end] = boost::out_edges(0, b.g);
  for (; oe != oe_end; ++oe)
    out.flows += static_cast<int>(boost::get(boost::edge_capacity, b.g, *oe)
                                  - boost::get(boost::edge_residual_capacity, b.g, *oe));
  out.total_cost_s = static_cast<double>(total) / micros_per_second;
  std::sort(out.edges.begin(), out.edges.end(), [](const edge_flow& a, const edge_flow& c) {
    return std::tie(a.from, a.to) < std::tie(c.from, c.to);
  });
  return out;
}

} // namespace gwtf::routing

namespace gwtf::routing {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// Cheapest way from some data holder (with remaining outflow) to `target` over edges with
// remaining flow, and from `source` back to a holder; layered DP over the ring's stages.
struct decomposer {
  const std::vector<flow_node>& nodes;
  int stages;
  const edge_cost_fn& cost;
  std::map<std::pair<std::size_t, std::size_t>, int> left; // remaining flow per edge

  std::vector<std::size_t> at_stage(int s) const {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < nodes.size(); ++k)
      if (nodes[k].stage == s)
        out.push_back(k);
    return out;
  }

  bool usable(std::size_t a, std::size_t b) const {
    auto it = left.find({a, b});
    return it != left.end() && it->second > 0;
  }

  using frontier = std::map<std::size_t, std::pair<double, unit_path>>;

  // One layer of the DP: the cheapest way to each node of `layer` from `best` over edges
  // with remaining flow.
  frontier relax(const frontier& best, int layer) const {
    frontier next;
    for (auto v : at_stage(layer))
      for (auto& [u, bu] : best)
        if (usable(u, v)) {
          double c = bu.first + cost(u, v);
          if (next.count(v) == 0 || c < next[v].first) {
            auto p = bu.second;
            p.push_back(v);
            next[v] = {c, p};
          }
        }
    return next;
  }

  // Cheapest path holder -> ... -> `to` (at stage st), forward over stages 0..st.
  std::pair<double, unit_path> prefix(std::size_t to) const {
    int st = nodes[to].stage;
    if (st == 0)
      return {0.0, unit_path{to}};
    frontier best;
    for (auto h : at_stage(0))
      best[h] = {0.0, unit_path{h}};
    for (int s = 1; s <= st; ++s)
      best = relax(best, s);
    auto it = best.find(to);
    return it == best.end() ? std::make_pair(infinity, unit_path{}) : it->second;
  }

  // Cheapest path `from` (stage st) -> ... -> stage S-1 -> a holder.
  std::pair<double, unit_path> suffix(std::size_t from) const {
    if (nodes[from].stage == 0)
      return {0.0, unit_path{}}; // reached through the closing edge: the ring is complete
    frontier best{{from, {0.0, unit_path{}}}};
    for (int s = nodes[from].stage + 1; s <= stages; ++s)
      best = relax(best, s % stages);
    std::pair<double, unit_path> out{infinity, {}};
    for (auto& [v, bv] : best)
      if (bv.first < out.first)
        out = bv;
    return out;
  }
};

} // namespace

// Splits a flow into unit paths: take the costliest remaining edge and close the cheapest
// ring through it, so expensive edges are paired with cheap ones.
std::vector<unit_path> balanced_paths(const std::vector<flow_node>& nodes, int stages,
                                      const edge_cost_fn& cost, const optimum_result& flow) {
  std::vector<unit_path> out;
  decomposer d{nodes, stages, cost, {}};
  for (auto& e : flow.edges)
    d.left[{e.from, e.to}] = e.flow;
  while (true) {
    std::pair<std::size_t, std::size_t> worst{0, 0};
    double worst_cost = -1;
    for (auto& [edge, f] : d.left)
      if (f > 0 && cost(edge.first, edge.second) > worst_cost) {
        worst_cost = cost(edge.first, edge.second);
        worst = edge;
      }
    if (worst_cost < 0)
      break;
    auto pre = d.prefix(worst.first);
    auto suf = d.suffix(worst.second);
    if (!std::isfinite(pre.first) || !std::isfinite(suf.first))
      break; // cannot happen for a conserved flow; stop rather than loop
    unit_path p = pre.second;
    p.push_back(worst.second);
    p.insert(p.end(), suf.second.begin(), suf.second.end());
    for (std::size_t i = 0; i + 1 < p.size(); ++i)
      --d.left[{p[i], p[i + 1]}];
    out.push_back(std::move(p));
  }
  return out;
}

// Index of the smallest of the sorted, non-empty `levels` for which `enough` holds, given that
// it holds for the largest and is monotone (max flow only grows with the threshold).
template <class Enough>
std::size_t least_sufficient(const std::vector<double>& levels, Enough&& enough) {
  std::size_t lo = 0;
  std::size_t hi = levels.size() - 1;
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (enough(levels[mid]))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

double path_cost(const unit_path& path, const edge_cost_fn& cost) {
  double c = 0;
  for (std::size_t i = 0; i + 1 < path.size(); ++i)
    c += cost(path[i], path[i + 1]);
  return c;
}

min_max_result max_flow_min_max(const std::vector<flow_node>& nodes, int stages,
                                const edge_cost_fn& cost) {
  min_max_result out;
  auto full = max_flow_min_cost(nodes, stages, cost);
  // Candidate thresholds: every finite edge cost of the ring.
  std::vector<double> levels;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (std::size_t j = 0; j < nodes.size(); ++j)
      if (i != j && nodes[j].stage == (nodes[i].stage + 1) % stages) {
        double c = cost(i, j);
        if (std::isfinite(c))
          levels.push_back(c);
      }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  auto restricted = [&](double tau) {
    return [&cost, tau](std::size_t a, std::size_t b) {
      double c = cost(a, b);
      return c <= tau ? c : infinity;
    };
  };
  out.flow = full;
  if (full.flows == 0 || levels.empty())
    return out;
  std::size_t lo = least_sufficient(levels, [&](double tau) {
    return max_flow_min_cost(nodes, stages, restricted(tau)).flows == full.flows;
  });
  out.bottleneck_s = levels[lo];

  // Upper bound: every threshold from the bottleneck up gives a max flow (the cheapest one
  // using only those edges); split each into balanced unit paths and keep the best. At most
  // 64 thresholds, spread evenly, plus the unrestricted one.
  std::vector<double> sweep;
  std::size_t span = levels.size() - lo;
  std::size_t step = std::max<std::size_t>(1, span / 64);
  for (std::size_t k = lo; k < levels.size(); k += step)
    sweep.push_back(levels[k]);
  sweep.push_back(infinity);
  out.max_path_cost_s = infinity;
  for (double tau : sweep) {
    auto candidate = max_flow_min_cost(nodes, stages, restricted(tau));
    if (candidate.flows != full.flows)
      continue;
    auto paths = balanced_paths(nodes, stages, cost, candidate);
    double worst = 0;
    for (auto& p : paths)
      worst = std::max(worst, path_cost(p, cost));
    if (worst < out.max_path_cost_s - 1e-12) {
      out.max_path_cost_s = worst;
      out.flow = std::move(candidate);
      out.paths = std::move(paths);
    }
  }

  // Lower bounds. (1) The average path of the cheapest max flow. (2) Every edge e lies on
  // rings no cheaper than ring_min(e) (cheapest prefix + e + cheapest suffix). Any max flow
  // whose paths all cost <= tau uses only edges with ring_min <= tau, so the least tau at
  // which those edges still carry the maximum flow bounds the min-max from below.
  decomposer all{nodes, stages, cost, {}};
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (std::size_t j = 0; j < nodes.size(); ++j)
      if (i != j && nodes[j].stage == (nodes[i].stage + 1) % stages && std::isfinite(cost(i, j)))
        all.left[{i, j}] = 1;
  std::map<std::pair<std::size_t, std::size_t>, double> ring_min;
  std::vector<double> ring_levels;
  for (auto& [edge, f] : all.left) {
    double r = all.prefix(edge.first).first + cost(edge.first, edge.second)
               + all.suffix(edge.second).first;
    ring_min[edge] = r;
    if (std::isfinite(r))
      ring_levels.push_back(r);
  }
  std::sort(ring_levels.begin(), ring_levels.end());
  ring_levels.erase(std::unique(ring_levels.begin(), ring_levels.end()), ring_levels.end());
  auto ring_restricted = [&](double tau) {
    return [&, tau](std::size_t a, std::size_t b) {
      auto it = ring_min.find({a, b});
      return it != ring_min.end() && it->second <= tau ? cost(a, b) : infinity;
    };
  };
  double ring_bound = 0;
  if (!ring_levels.empty())
    ring_bound = ring_levels[least_sufficient(ring_levels, [&](double tau) {
      return max_flow_min_cost(nodes, stages, ring_restricted(tau)).flows == full.flows;
    })];
  out.lower_bound_s = std::max(full.total_cost_s / full.flows, ring_bound);
  return out;
}

std::vector<std::vector<unit_path>> congestion_rings(const std::vector<flow_node>& nodes, int stages,
                                                     const std::vector<std::size_t>& holders,
                                                     int rings_per_holder, const edge_cost_fn& cost,
                                                     const edge_cost_fn& link_s) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<unit_path>> out(holders.size());
  std::vector<std::vector<std::size_t>> at(static_cast<std::size_t>(std::max(stages, 1)));
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].stage > 0 && nodes[i].stage < stages)
      at[static_cast<std::size_t>(nodes[i].stage)].push_back(i);
  std::vector<int> free(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    free[i] = nodes[i].capacity;
  std::map<std::pair<std::size_t, std::size_t>, int> load;
  auto edge = [&](std::size_t a, std::size_t b) {
    double c = cost(a, b);
    auto it = load.find({a, b});
    return it == load.end() ? c : c + it->second * link_s(a, b);
  };
  // The cheapest ring h -> stage 1 -> ... -> stage S-1 -> h under the current loads, through
  // relays with a free slot (`slots`) or through any relay; empty when there is none.
  auto cheapest = [&](std::size_t h, bool slots) {
    std::vector<double> dist(nodes.size(), inf);
    std::vector<std::size_t> via(nodes.size(), h);
    auto usable = [&](std::size_t r) { return !slots || free[r] > 0; };
    for (auto r : at[1])
      if (usable(r))
        dist[r] = edge(h, r);
    for (int s = 2; s < stages; ++s)
      for (auto b : at[static_cast<std::size_t>(s)]) {
        if (!usable(b))
          continue;
        for (auto a : at[static_cast<std::size_t>(s - 1)])
          if (dist[a] < inf && dist[a] + edge(a, b) < dist[b]) {
            dist[b] = dist[a] + edge(a, b);
            via[b] = a;
          }
      }
    double best = inf;
    std::size_t last = h;
    for (auto r : at[static_cast<std::size_t>(stages - 1)])
      if (dist[r] < inf && dist[r] + edge(r, h) < best) {
        best = dist[r] + edge(r, h);
        last = r;
      }
    unit_path ring;
    if (!(best < inf))
      return ring;
    ring.resize(static_cast<std::size_t>(stages));
    ring[0] = h;
    for (auto n = last, s = static_cast<std::size_t>(stages - 1); s >= 1; n = via[n], --s)
      ring[s] = n;
    return ring;
  };
  auto take = [&](std::size_t k, unit_path ring) {
    for (std::size_t s = 0; s < ring.size(); ++s) {
      if (s > 0)
        --free[ring[s]];
      ++load[{ring[s], ring[(s + 1) % ring.size()]}];
    }
    out[k].push_back(std::move(ring));
  };
  if (stages < 2 || rings_per_holder <= 0)
    return out;
  std::vector<bool> done(holders.size(), false);
  for (bool any = true; any;) {
    any = false;
    for (std::size_t k = 0; k < holders.size(); ++k) {
      if (done[k] || static_cast<int>(out[k].size()) >= rings_per_holder)
        continue;
      auto ring = cheapest(holders[k], true);
      if (ring.empty()) {
        done[k] = true;
        continue;
      }
      take(k, std::move(ring));
      any = true;
    }
  }
  // Fewer slots than holders: a holder left without a ring shares the cheapest one (its
  // microbatches queue for the slots), so that no holder starves.
  for (std::size_t k = 0; k < holders.size(); ++k)
    if (out[k].empty())
      if (auto ring = cheapest(holders[k], false); !ring.empty())
        take(k, std::move(ring));
  return out;
}

} // namespace gwtf::routing
