// DT-FM's stage placement (Yuan et al., "Decentralized Training of Foundation Models in
// Heterogeneous Environments", NeurIPS 2022, arXiv 2206.01288), as an alternative to GWTF's
// bottleneck rule for the relays without a declared stage (docs/routing.md, "DT-FM placement").
//
// The relays are split into the relay stages' groups of equal size (+-1: DT-FM's data-parallel
// groups); a placement's cost is
//   data-parallel cost: the worst all-reduce of a group: for one member d,
//       sum over its partners d' of 2 x (latency(d,d') + gradient bytes x 8 / (bandwidth(d,d') x group size)),
//     the worst member of the worst group;
// + 2 x pipeline cost: the groups form a ring through the data holders (stage 0 at both ends);
//     between two adjacent groups the best matching of their hosts (a linear sum assignment
//     of latency + activation bytes x 8 / bandwidth, as the mean over the matched pairs), and
//     over the groups the best order (an open-loop path: which group is stage 1, 2, ...).
// The search: a genetic algorithm over permutations of the relays (groups = consecutive
// blocks) with multi-point order crossover and swap mutation, elitist, seeded from the
// greedy placement (relays sorted by region: co-located hosts share a group) and random
// ones, then a local search that swaps and moves hosts between groups. Deterministic for a
// seed and bounded by its evaluation budget, not by wall time. Pure: no CAF, no threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "routing/network.hpp"

namespace gwtf::routing {

/// What DT-FM's cost model sees.
struct dtfm_problem {
  const network_matrix* net = nullptr;
  std::vector<std::size_t> holders;  ///< regions of the data holders (stage 0, fixed)
  std::vector<std::size_t> relays;   ///< regions of the relays to place
  int relay_stages = 1;              ///< groups to form (stages - 1)
  double activation_bytes = 0;       ///< one microbatch's activation between adjacent stages
  double gradient_bytes = 0;         ///< one relay stage's gradients (the all-reduce)
};

/// A placement and its cost: stage[i] in 1..relay_stages for relay i.
struct dtfm_placement {
  std::vector<int> stage;
  double cost = 0;          ///< data_parallel_s + 2 x pipeline_s
  double data_parallel_s = 0;
  double pipeline_s = 0;
};

/// The cost of a placement by DT-FM's model (stage numbers only group the relays: the model
/// picks the best order of the groups itself). Every group must be non-empty.
dtfm_placement dtfm_cost(const dtfm_problem& p, const std::vector<int>& stage);

struct dtfm_options {
  std::uint64_t seed = 1;
  int population = 24;
  int generations = 60;
  int local_search_rounds = 4; ///< passes over all swaps and moves on the best placement
  std::int64_t max_evaluations = 20000; ///< the local search stops here (the bound on its time)
};

/// The search's outcome, with what it started from.
struct dtfm_search {
  dtfm_placement best;
  dtfm_placement greedy;        ///< relays sorted by region, consecutive groups
  std::int64_t evaluations = 0; ///< cost evaluations spent
};

/// DT-FM's evolutionary search. Never returns a placement costlier than the greedy start.
/// Needs relays.size() >= relay_stages >= 1.
dtfm_search dtfm_place(const dtfm_problem& p, const dtfm_options& opts);

/// What a host placing relays by DT-FM needs to say, by region names.
struct dtfm_request {
  std::vector<std::string> holder_regions;
  std::vector<std::string> relay_regions; ///< the relays to place, in a order every host agrees on
  int relay_stages = 1;
  double activation_bytes = 0;
  double gradient_bytes = 0;
  std::uint64_t seed = 1;
};
/// The stage (1..relay_stages) of each relay of `r` by dtfm_place; empty when a region is not
/// in `net`, or there are fewer relays than relay stages.
std::vector<int> dtfm_stages(const network_matrix& net, const dtfm_request& r);

/// Every balanced placement, for small instances (tests): the cheapest by the same model.
dtfm_placement dtfm_exhaustive(const dtfm_problem& p);

/// The optimal linear sum assignment of a rows x cols cost matrix (rows <= cols): the column
/// of each row, minimising the sum (Hungarian algorithm, O(rows^2 cols)).
std::vector<std::size_t> min_cost_assignment(const std::vector<std::vector<double>>& cost);

/// A transportation plan: flow[r][q] units from row r to column q, and its cost.
struct min_transport {
  std::vector<std::vector<std::size_t>> flow;
  double cost = 0;
};

/// The cheapest way to send every row's `supply` to the columns, column q taking at most
/// `room[q]`, at cost[r][q] per unit (rows x columns, costs >= 0). The assignment of
/// min_cost_assignment when rows and columns are groups of interchangeable items (hosts of
/// one region): the same optimum at the cost of the groups, not the items (successive
/// shortest paths; an improvement below 1e-12 of the largest cost is not taken).
min_transport min_cost_transport(const std::vector<std::size_t>& supply, const std::vector<std::size_t>& room,
                                 const std::vector<std::vector<double>>& cost);

} // namespace gwtf::routing
