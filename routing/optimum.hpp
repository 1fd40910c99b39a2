// Centralized optimum with global knowledge: the most flows the capacities allow, at the
// least total cost, on the node-split layered graph (data holders are source and sink).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace gwtf::routing {

/// One host as the oracle sees it.
struct flow_node {
  int stage = 0;    ///< 0 = data holder, 1..S-1 = relay stage
  int capacity = 0; ///< microbatches it can hold at once
};

/// Cost in seconds of the edge from -> to (stage s to s+1, or S-1 to 0); +inf = no link.
using edge_cost_fn = std::function<double(std::size_t from, std::size_t to)>;

/// Flow on one used edge.
struct edge_flow {
  std::size_t from = 0; ///< index into the node list
  std::size_t to = 0;   ///< index into the node list
  int flow = 0;         ///< unit flows over this edge
};

/// Result of `max_flow_min_cost`.
struct optimum_result {
  int flows = 0;                   ///< maximum number of concurrent unit flows
  double total_cost_s = 0;         ///< sum over flows of their path cost (seconds)
  int bottleneck_stage = -1;       ///< stage with the least total capacity (-1 if none)
  std::vector<int> stage_capacity; ///< total capacity per stage
  std::vector<edge_flow> edges;    ///< used edges, sorted by (from, to)
};

/// Maximum flow at minimum total cost (Boost.Graph successive shortest paths).
///
/// Relaxation, stated honestly: this is single-commodity. A flow leaving data holder A may
/// return to data holder B, whereas GWTF requires each holder to get its own microbatches
/// back. The result is therefore an upper bound on the flow count and a lower bound on the
/// cost of the multi-commodity problem; with one data holder it is exact.
/// Costs are rounded to whole microseconds so that the algorithm works on integers.
optimum_result max_flow_min_cost(const std::vector<flow_node>& nodes, int stages,
                                 const edge_cost_fn& cost);

/// One unit flow: node indices from a data holder through stages 1..S-1 back to a holder.
using unit_path = std::vector<std::size_t>;

/// Result of `max_flow_min_max`.
struct min_max_result {
  optimum_result flow;          ///< the best max flow found for the largest path cost
  double bottleneck_s = 0;      ///< exact: least possible largest edge cost of any max flow
  std::vector<unit_path> paths; ///< `flow` split into unit paths, balancing their costs
  double max_path_cost_s = 0;   ///< largest cost among `paths`: an upper bound on the min-max
  double lower_bound_s = 0;     ///< a lower bound on the min-max path cost of any max flow
};

/// The min-max variant of the oracle. Exact for the largest edge cost (threshold search over
/// max-flow: the smallest threshold whose edges still carry the maximum flow). For the
/// largest path cost, which GWTF's criterion uses, it returns bounds. Upper: the best
/// balanced decomposition of the cheapest max flow under each edge threshold from the
/// bottleneck up. Lower: max(min-cost total / flows, the least tau such that the edges whose
/// cheapest ring costs <= tau still carry the maximum flow). Equal bounds mean an exact
/// answer. Same single-commodity relaxation as max_flow_min_cost.
min_max_result max_flow_min_max(const std::vector<flow_node>& nodes, int stages,
                                const edge_cost_fn& cost);

/// Cost of a unit path (sum of its edges, the closing edge back to the holder included).
double path_cost(const unit_path& path, const edge_cost_fn& cost);

/// Rings per data holder with global knowledge of every link's load: multi-commodity (each
/// ring leaves its data holder and returns to it) and congestion-priced. Holders take turns
/// (round robin, max-min fair); each turn adds the holder's cheapest ring through relays with
/// a free slot, where an edge costs cost(a, b) + (rings already on a -> b) x link_s(a, b),
/// found exactly by dynamic programming over the stages. Stops for a holder at
/// `rings_per_holder` or when no relay path is left; a holder left without any ring (fewer
/// slots than holders) shares its cheapest ring over full relays. `holders`: stage-0 nodes.
/// Greedy: not an optimum (docs/routing.md, "Centralized router").
std::vector<std::vector<unit_path>> congestion_rings(const std::vector<flow_node>& nodes, int stages,
                                                     const std::vector<std::size_t>& holders,
                                                     int rings_per_holder, const edge_cost_fn& cost,
                                                     const edge_cost_fn& link_s);

} // namespace gwtf::routing
