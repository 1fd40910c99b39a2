#include "routing/placement.hpp"

namespace gwtf::routing {

placement choose_join_stage(const std::vector<flow_node>& nodes, int stages, int capacity,
                            const std::function<edge_cost_fn(int stage)>& costs_with_joiner_at) {
  placement best;
  for (int s = 1; s < stages; ++s) {
    auto with = nodes;
    with.push_back(flow_node{s, capacity});
    auto r = max_flow_min_cost(with, stages, costs_with_joiner_at(s));
    double per_flow = r.flows > 0 ? r.total_cost_s / r.flows : 0.0;
    bool better = best.stage < 0 || r.flows > best.flows
                  || (r.flows == best.flows && per_flow < best.cost_per_flow_s - 1e-12);
    if (better)
      best = placement{s, r.flows, per_flow};
  }
  return best;
}

} // namespace gwtf::routing
