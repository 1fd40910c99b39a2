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

} // namespace gwtf::routing
