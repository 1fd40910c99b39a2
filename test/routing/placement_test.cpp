#include <doctest/doctest.h>

#include <limits>

#include "routing/placement.hpp"

using namespace gwtf::routing;

TEST_CASE("placement: a joiner goes to the bottleneck stage") {
  // Stage capacities: holder 8, stage 1: 6, stage 2: 2 (bottleneck), stage 3: 5.
  std::vector<flow_node> nodes{{0, 8}, {1, 6}, {2, 2}, {3, 5}};
  auto uniform = [](int) -> edge_cost_fn { return [](std::size_t, std::size_t) { return 0.1; }; };
  auto p = choose_join_stage(nodes, 4, 3, uniform);
  CHECK(p.stage == 2);
  CHECK(p.flows == 5); // 2 + 3 at stage 2; stage 3 (5) is the next limit
}

TEST_CASE("placement: with equal flow gains, the cheaper placement wins") {
  // Two relay stages with spare capacity beyond the holder's: no stage is a bottleneck, so
  // the joiner goes where its links make flows cheapest.
  std::vector<flow_node> nodes{{0, 2}, {1, 4}, {2, 4}};
  auto costs = [](int stage) -> edge_cost_fn {
    return [stage](std::size_t a, std::size_t b) {
      bool joiner = a == 3 || b == 3;
      if (!joiner)
        return 0.5;
      return stage == 2 ? 0.1 : 0.9; // the joiner's links are short only in stage 2
    };
  };
  auto p = choose_join_stage(nodes, 3, 4, costs);
  CHECK(p.stage == 2);
  CHECK(p.flows == 2);
  CHECK(p.cost_per_flow_s == doctest::Approx(0.5 + 0.1 + 0.1));
}

TEST_CASE("placement: S = 2 has one relay stage, without usable links nothing is gained") {
  auto p = choose_join_stage({{0, 1}}, 1 + 1, 1, [](int) -> edge_cost_fn {
    return [](std::size_t, std::size_t) { return 0.1; };
  });
  CHECK(p.stage == 1);
  CHECK(p.flows == 1);
  auto none = choose_join_stage({{0, 1}}, 2, 1, [](int) -> edge_cost_fn {
    return [](std::size_t, std::size_t) { return std::numeric_limits<double>::infinity(); };
  });
  CHECK(none.flows == 0);
}

TEST_CASE("placement without a declared stage: most flows, then the stage with the least capacity") {
  // Holders 8; stage 1: 6, stage 2: 2, stage 3: 5. Stage 2 limits the flows: it goes there.
  CHECK(place_unstaged({{0, 8}, {1, 6}, {2, 2}, {3, 5}}, 4, 3) == 2);
  // The holders limit (2): no stage adds flows; the one with the least capacity gets it.
  CHECK(place_unstaged({{0, 2}, {1, 6}, {2, 4}, {3, 5}}, 4, 3) == 2);
  // Equal capacities: the lowest stage.
  CHECK(place_unstaged({{0, 2}, {1, 4}, {2, 4}}, 3, 1) == 1);
  // A stage nobody serves yet: without it nothing flows; with it, flows start.
  CHECK(place_unstaged({{0, 4}, {1, 4}, {3, 4}}, 4, 2) == 2);
  // Stages that are not relay stages are ignored; no relay stage at all: -1.
  CHECK(place_unstaged({{0, 4}, {7, 100}, {1, 1}}, 3, 2) == 2);
  CHECK(place_unstaged({{0, 4}}, 1, 2) == -1);
}

TEST_CASE("placement of stage-less relays that see each other: in name order, each counting the ones before") {
  // Holders 8; stage 1: 6, stage 2: 2, stage 3: 5. Alone, each of two joiners of capacity 4
  // would take stage 2; together the first (by name) takes it (2 -> 6), and the second goes
  // to the new bottleneck, stage 3 (5 -> 9: 6 flows instead of 5).
  std::vector<flow_node> known{{0, 8}, {1, 6}, {2, 2}, {3, 5}};
  CHECK(place_unstaged(known, 4, 4) == 2);
  std::vector<unplaced_relay> both{{"rz", 4}, {"ra", 4}};
  CHECK(place_unstaged_among(known, both, "ra", 4) == 2);
  CHECK(place_unstaged_among(known, both, "rz", 4) == 3);
  // Alone it is place_unstaged; a name not among them, or no relay stage: -1.
  CHECK(place_unstaged_among(known, {{"ra", 4}}, "ra", 4) == 2);
  CHECK(place_unstaged_among(known, both, "rq", 4) == -1);
  CHECK(place_unstaged_among({{0, 4}}, {{"ra", 1}}, "ra", 1) == -1);
}
