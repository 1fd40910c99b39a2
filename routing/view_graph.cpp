#include "routing/view_graph.hpp"

#include <algorithm>
#include <limits>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/dijkstra_shortest_paths_no_color_map.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <boost/range/iterator_range.hpp>

namespace gwtf::routing {

namespace {

constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

// One edge: this node -> next hop n (cost d(self, n)), or next hop n -> a target (its
// advertised cost). `loaded`: n's link load is added after this edge.
struct hop {
  std::size_t path = 0; ///< next hop -> target: its index in paths_; this node -> next hop: none
  std::size_t next = 0;
  bool loaded = false;
};

// Compressed sparse rows: built in a few allocations whenever the view changes.
using graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, hop>;

// A ring's cost so far and the next hop it leaves this node through (its tie-break rank).
struct ring {
  double cost = 0;
  std::size_t first = 0;
};

// An edge's weight in one query: its cost, the load to add after it, and whether it is closed.
struct weight {
  double cost = 0;
  double then = 0;
  std::size_t next = 0;
  bool closed = false;
};

} // namespace

struct view_graph::built {
  built(const std::vector<std::pair<std::size_t, std::size_t>>& edges, const std::vector<hop>& hops,
        std::size_t vertices)
    : g(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), hops.begin(), vertices) {}
  graph g;
};

void view_graph::reset(bool next_is_target) {
  built_.reset();
  memo_.reset();
  ++version_;
  next_is_target_ = next_is_target;
  edges_.clear();
  paths_.clear();
  targets_ = 0;
}

std::size_t view_graph::add_next(double edge) {
  built_.reset();
  memo_.reset();
  ++version_;
  edges_.push_back(edge);
  if (next_is_target_)
    ++targets_;
  return edges_.size() - 1;
}

std::size_t view_graph::add_target() {
  built_.reset();
  memo_.reset();
  ++version_;
  return targets_++;
}

std::size_t view_graph::add_path(std::size_t next, std::size_t target, double cost) {
  if (next_is_target_ || next >= edges_.size() || target >= targets_)
    return none;
  built_.reset();
  memo_.reset();
  ++version_;
  paths_.push_back({next, target, cost});
  return paths_.size() - 1;
}

void view_graph::set_cost(std::size_t path, double cost) {
  if (path < paths_.size() && paths_[path].cost != cost) {
    paths_[path].cost = cost;
    memo_.reset();
    ++version_;
  }
}

const view_graph::built& view_graph::csr() const {
  if (!built_) {
    auto n = edges_.size();
    auto target_vertex = [&](std::size_t t) { return next_is_target_ ? 1 + t : 1 + n + t; };
    std::vector<std::pair<std::size_t, std::size_t>> edges;
    std::vector<hop> hops;
    edges.reserve(n + paths_.size());
    hops.reserve(n + paths_.size());
    for (std::size_t k = 0; k < n; ++k) {
      edges.emplace_back(0, 1 + k);
      hops.push_back(hop{none, k, next_is_target_});
    }
    for (std::size_t i = 0; i < paths_.size(); ++i) {
      edges.emplace_back(1 + paths_[i].next, target_vertex(paths_[i].target));
      hops.push_back(hop{i, paths_[i].next, true});
    }
    built_ = std::make_shared<built>(edges, hops, 1 + n + (next_is_target_ ? 0 : targets_));
  }
  return *built_;
}

std::vector<std::optional<view_graph::choice>> view_graph::cheapest(const std::vector<double>& load,
                                                                    const std::vector<char>& excluded) const {
  // Vertices: 0 = this node, 1..N = next hops, then the targets (with next_is_target the
  // next hops are the targets).
  bool plain = std::none_of(excluded.begin(), excluded.end(), [](char x) { return x != 0; });
  if (plain && memo_ && memo_->load == load)
    return memo_->answer;
  auto n = edges_.size();
  auto target_vertex = [&](std::size_t t) { return next_is_target_ ? 1 + t : 1 + n + t; };
  auto& g = csr().g;

  auto weights = boost::make_function_property_map<graph::edge_descriptor, weight>([&](graph::edge_descriptor e) {
    auto& h = g[e];
    bool closed = h.next < excluded.size() && excluded[h.next] != 0;
    double then = h.loaded && h.next < load.size() ? load[h.next] : 0.0;
    return weight{h.path == none ? edges_[h.next] : paths_[h.path].cost, then, h.next, closed};
  });
  auto inf = ring{std::numeric_limits<double>::infinity(), none};
  // Cheaper first; at the same cost the next hop added first (the balancer adds them in name order).
  // Boost also compares each edge's weight with zero and throws on a negative one: never here.
  // Costs are non-negative (the codec refuses others from peers; links and loads are >= 0), and
  // a balancer must not die of a bad number: a negative one only makes that answer approximate.
  struct order {
    bool operator()(const ring& a, const ring& b) const {
      return a.cost < b.cost || (a.cost == b.cost && a.first < b.first);
    }
    bool operator()(const weight&, const ring&) const { return false; }
  } less;
  auto combine = [inf](const ring& r, const weight& w) {
    if (w.closed)
      return inf;
    return ring{(r.cost + w.cost) + w.then, r.first == none ? w.next : r.first};
  };
  std::vector<ring> dist(boost::num_vertices(g), inf);
  boost::dijkstra_shortest_paths_no_color_map(
    g, 0,
    boost::distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g)))
      .weight_map(weights)
      .distance_compare(less)
      .distance_combine(combine)
      .distance_inf(inf)
      .distance_zero(ring{0.0, none}));

  std::vector<std::optional<choice>> out(targets_);
  for (std::size_t t = 0; t < targets_; ++t) {
    auto& r = dist[target_vertex(t)];
    if (r.first != none)
      out[t] = choice{r.first, r.cost};
  }
  if (plain)
    memo_ = memo{load, out};
  return out;
}

std::vector<view_graph::two_choices> view_graph::cheapest_two(const std::vector<double>& load) const {
  auto& g = csr().g;
  auto n = edges_.size();
  std::vector<two_choices> out(targets_);
  // Ordered as the Dijkstra orders rings: cheaper first, at the same cost the next hop added first.
  auto before = [](const choice& a, const std::optional<choice>& b) {
    return !b || a.cost < b->cost || (a.cost == b->cost && a.next < b->next);
  };
  auto offer = [&](std::size_t t, const choice& c) {
    auto& two = out[t];
    if (before(c, two.best)) {
      if (two.best && two.best->next != c.next)
        two.other = two.best;
      two.best = c;
    } else if (c.next != two.best->next && before(c, two.other)) {
      two.other = c;
    }
  };
  // The same sums as the Dijkstra's (ring cost + edge cost) + load after it, from 0 at this node.
  for (auto e : boost::make_iterator_range(boost::out_edges(graph::vertex_descriptor{0}, g))) {
    auto& first = g[e]; // this node -> next hop first.next (vertex 1 + first.next)
    double then = first.loaded && first.next < load.size() ? load[first.next] : 0.0;
    double at = (0.0 + edges_[first.next]) + then;
    if (next_is_target_) {
      offer(first.next, choice{first.next, at}); // the next hop is the target
      continue;
    }
    for (auto f : boost::make_iterator_range(boost::out_edges(boost::target(e, g), g))) {
      auto& h = g[f];
      double after = h.loaded && h.next < load.size() ? load[h.next] : 0.0;
      offer(boost::target(f, g) - 1 - n, choice{first.next, (at + paths_[h.path].cost) + after});
    }
  }
  return out;
}

} // namespace gwtf::routing
