#include "routing/optimum.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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
