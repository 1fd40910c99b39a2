// Where a joining host should go (docs/design.md, "A joining node goes to the
// bottleneck stage, choosing the placement that most lowers iteration time per
// microbatch"): every relay stage is tried with the oracle on the joiner's view of the
// cluster; the stage giving the most flows wins, then the lowest cost per flow.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "routing/dtfm.hpp"
#include "routing/optimum.hpp"

namespace gwtf::routing {

/// The chosen stage and what the cluster would get.
struct placement {
  int stage = -1;             ///< relay stage 1..S-1; -1 when there is none
  int flows = 0;              ///< maximum flows with the joiner there
  double cost_per_flow_s = 0; ///< mean flow cost with the joiner there
};

/// Evaluates the joiner at each relay stage. `nodes` are the known hosts; the joiner is
/// appended as index nodes.size(), and `costs_with_joiner_at(stage)` gives edge costs for
/// that layout. Ties: the lower stage (deterministic).
placement choose_join_stage(const std::vector<flow_node>& nodes, int stages, int capacity,
                            const std::function<edge_cost_fn(int stage)>& costs_with_joiner_at);

/// A host without a declared stage, placed from what it knows of the live hosts (their
/// stage and capacity; nothing measured yet, so every link costs the same): the stage where
/// it adds the most flows (choose_join_stage), then the relay stage with the least total
/// capacity (the bottleneck), then the lowest stage. Deterministic: hosts that know the same
/// cluster choose the same stage. -1 when the model has no relay stage.
int place_unstaged(const std::vector<flow_node>& known, int stages, int capacity);

/// A relay without a stage (not yet announced).
struct unplaced_relay {
  std::string name;
  int capacity = 0;
};

/// Several stage-less relays that see each other place themselves at once: each, in name
/// order, by place_unstaged on `known` plus the ones placed before it, so relays that see the
/// same view choose different stages where one would fill the bottleneck. Returns the stage
/// of `self` (which must be among `unplaced`; -1 if not, or when there is no relay stage).
int place_unstaged_among(const std::vector<flow_node>& known, std::vector<unplaced_relay> unplaced,
                         const std::string& self, int stages);

/// placement.policy dtfm, the founding relays (no declared stage, not joining later): DT-FM
/// partitions them together, and every one of them computes the same partition from the same
/// view because the relays go to DT-FM in name order. `relays`: (name, region) of each
/// founding relay in any order; `r`: the request with its data holders' regions. Returns the
/// stage of each relay in the order of `relays`; empty when DT-FM cannot place (a region
/// outside `net`, fewer relays than stages).
std::vector<int> dtfm_founding_stages(const network_matrix& net, dtfm_request r,
                                      const std::vector<std::pair<std::string, std::string>>& relays);

} // namespace gwtf::routing
