#include "routing/placement.hpp"

#include <algorithm>

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

int place_unstaged(const std::vector<flow_node>& known, int stages, int capacity) {
  if (stages < 2)
    return -1;
  std::vector<long long> stage_capacity(static_cast<std::size_t>(stages), 0);
  std::vector<flow_node> valid;
  for (auto& n : known)
    if (n.stage >= 0 && n.stage < stages && n.capacity > 0) {
      stage_capacity[static_cast<std::size_t>(n.stage)] += n.capacity;
      valid.push_back(n);
    }
  auto uniform = [](std::size_t, std::size_t) { return 1.0; };
  int best = -1, best_flows = -1;
  for (int s = 1; s < stages; ++s) {
    auto with = valid;
    with.push_back(flow_node{s, capacity});
    int flows = max_flow_min_cost(with, stages, uniform).flows;
    auto c = stage_capacity[static_cast<std::size_t>(s)];
    if (best < 0 || flows > best_flows
        || (flows == best_flows && c < stage_capacity[static_cast<std::size_t>(best)])) {
      best = s;
      best_flows = flows;
    }
  }
  return best;
}

int place_unstaged_among(const std::vector<flow_node>& known, std::vector<unplaced_relay> unplaced,
                         const std::string& self, int stages) {
  std::sort(unplaced.begin(), unplaced.end(),
            [](const unplaced_relay& a, const unplaced_relay& b) { return a.name < b.name; });
  auto view = known;
  for (auto& r : unplaced) {
    int stage = place_unstaged(view, stages, r.capacity);
    if (r.name == self || stage < 0)
      return r.name == self ? stage : -1;
    view.push_back(flow_node{stage, r.capacity});
  }
  return -1;
}

std::vector<int> dtfm_founding_stages(const network_matrix& net, dtfm_request r,
                                      const std::vector<std::pair<std::string, std::string>>& relays) {
  std::vector<std::size_t> order(relays.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return relays[a] < relays[b]; });
  for (auto i : order)
    r.relay_regions.push_back(relays[i].second);
  auto stages = dtfm_stages(net, r);
  if (stages.empty())
    return {};
  std::vector<int> out(relays.size(), -1);
  for (std::size_t k = 0; k < stages.size() && k < order.size(); ++k)
    out[order[k]] = stages[k];
  return out;
}

} // namespace gwtf::routing
