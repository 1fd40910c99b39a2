#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <random>
#include <stdexcept>

#include "routing/optimum.hpp"

using namespace gwtf::routing;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// Independent max-flow (BFS augmenting paths on an adjacency matrix) of the same
// node-split ring graph, to cross-check the Boost.Graph result.
int reference_max_flow(const std::vector<flow_node>& nodes, int stages,
                       const std::vector<std::vector<bool>>& link) {
  std::size_t n = nodes.size();
  std::size_t V = 2 + 3 * n;
  std::vector<std::vector<long>> cap(V, std::vector<long>(V, 0));
  const long big = 1 << 20;
  for (std::size_t k = 0; k < n; ++k) {
    cap[2 + 3 * k][3 + 3 * k] = nodes[k].capacity;
    if (nodes[k].stage == 0) {
      cap[0][2 + 3 * k] = nodes[k].capacity;
      cap[4 + 3 * k][1] = nodes[k].capacity;
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j && link[i][j] && nodes[j].stage == (nodes[i].stage + 1) % stages)
        cap[3 + 3 * i][nodes[j].stage == 0 ? 4 + 3 * j : 2 + 3 * j] = big;
  int flow = 0;
  while (true) {
    std::vector<long> prev(V, -1);
    prev[0] = 0;
    std::queue<std::size_t> q;
    q.push(0);
    while (!q.empty() && prev[1] < 0) {
      auto u = q.front();
      q.pop();
      for (std::size_t v = 0; v < V; ++v)
        if (prev[v] < 0 && cap[u][v] > 0) {
          prev[v] = static_cast<long>(u);
          q.push(v);
        }
    }
    if (prev[1] < 0)
      return flow;
    for (std::size_t v = 1; v != 0; v = static_cast<std::size_t>(prev[v])) {
      cap[static_cast<std::size_t>(prev[v])][v] -= 1;
      cap[v][static_cast<std::size_t>(prev[v])] += 1;
    }
    ++flow;
  }
}

} // namespace

TEST_CASE("optimum: capacities bound the flow, the cheaper relay fills first") {
  // Holder H (cap 3); stage 1: A (cap 1, cheap), B (cap 5, dear); stage 2: C (cap 10).
  std::vector<flow_node> nodes{{0, 3}, {1, 1}, {1, 5}, {2, 10}};
  std::map<std::pair<std::size_t, std::size_t>, double> cost{
    {{0, 1}, 0.1}, {{0, 2}, 0.5}, {{1, 3}, 0.1}, {{2, 3}, 0.2}, {{3, 0}, 0.3}};
  auto r = max_flow_min_cost(nodes, 3, [&](std::size_t a, std::size_t b) {
    auto it = cost.find({a, b});
    return it == cost.end() ? inf : it->second;
  });
  CHECK(r.flows == 3);
  // One flow H-A-C-H = 0.5; two flows H-B-C-H = 1.0 each.
  CHECK(r.total_cost_s == doctest::Approx(2.5));
  CHECK(r.bottleneck_stage == 0);
  REQUIRE(r.edges.size() == 5);
  CHECK(r.edges[0].from == 0);
  CHECK(r.edges[0].to == 1);
  CHECK(r.edges[0].flow == 1);
  CHECK(r.edges[1].to == 2);
  CHECK(r.edges[1].flow == 2);
}

TEST_CASE("optimum: a relay without links carries nothing") {
  std::vector<flow_node> nodes{{0, 4}, {1, 2}, {1, 2}};
  auto r = max_flow_min_cost(nodes, 2, [](std::size_t a, std::size_t b) {
    return (a == 2 || b == 2) ? inf : 0.1;
  });
  CHECK(r.flows == 2);
  for (auto& e : r.edges)
    CHECK((e.from != 2 && e.to != 2));
}

TEST_CASE("optimum: flow count equals an independent max-flow on random layered graphs") {
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng{seed};
    int stages = 2 + static_cast<int>(rng() % 5);
    std::vector<flow_node> nodes;
    for (int s = 0; s < stages; ++s) {
      int count = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < count; ++k)
        nodes.push_back(flow_node{s, 1 + static_cast<int>(rng() % 8)});
    }
    std::size_t n = nodes.size();
    std::vector<std::vector<bool>> link(n, std::vector<bool>(n));
    std::vector<std::vector<double>> cost(n, std::vector<double>(n));
    std::uniform_real_distribution<double> c{0.001, 1.0};
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        link[i][j] = rng() % 4 != 0;
        cost[i][j] = c(rng);
      }
    auto r = max_flow_min_cost(nodes, stages, [&](std::size_t a, std::size_t b) {
      return link[a][b] ? cost[a][b] : inf;
    });
    INFO("seed " << seed);
    CHECK(r.flows == reference_max_flow(nodes, stages, link));
    // Node capacities hold: inflow of every node is at most its capacity.
    std::vector<int> in(n, 0);
    std::vector<int> out(n, 0);
    double total = 0;
    for (auto& e : r.edges) {
      in[e.to] += e.flow;
      out[e.from] += e.flow;
      total += e.flow * std::round(cost[e.from][e.to] * 1e6) / 1e6;
      CHECK(link[e.from][e.to]);
    }
    for (std::size_t k = 0; k < n; ++k) {
      CHECK(out[k] <= nodes[k].capacity);
      if (nodes[k].stage != 0)
        CHECK(in[k] == out[k]); // conservation at relays
    }
    CHECK(total == doctest::Approx(r.total_cost_s));
  }
}

TEST_CASE("optimum: invalid input is rejected, not misread") {
  CHECK_THROWS_AS(max_flow_min_cost({{0, 1}}, 1, [](auto, auto) { return 0.0; }),
                  std::invalid_argument);
  CHECK_THROWS_AS(max_flow_min_cost({{0, 1}, {2, 1}}, 2, [](auto, auto) { return 0.0; }),
                  std::invalid_argument);
  CHECK_THROWS_AS(max_flow_min_cost({{0, 1}, {1, 1}}, 2, [](auto, auto) { return -1.0; }),
                  std::invalid_argument);
}

TEST_CASE("min-max: the smallest worst edge and the smallest worst path can differ") {
  // Holder H (cap 2); stage 1: A (cap 2), B (cap 2); stage 2: C (cap 4).
  // Via A: edges 0.0, 0.7, 0.1 -> path 0.8, worst edge 0.7.
  // Via B: edges 0.4, 0.4, 0.1 -> path 0.9, worst edge 0.4.
  std::vector<flow_node> nodes{{0, 2}, {1, 2}, {1, 2}, {2, 4}};
  std::map<std::pair<std::size_t, std::size_t>, double> c{
    {{0, 1}, 0.0}, {{0, 2}, 0.4}, {{1, 3}, 0.7}, {{2, 3}, 0.4}, {{3, 0}, 0.1}};
  auto cost = [&](std::size_t a, std::size_t b) {
    auto it = c.find({a, b});
    return it == c.end() ? inf : it->second;
  };
  auto mm = max_flow_min_max(nodes, 3, cost);
  CHECK(mm.flow.flows == 2);
  CHECK(mm.bottleneck_s == doctest::Approx(0.4)); // both flows via B
  REQUIRE(mm.paths.size() == 2);
  for (auto& p : mm.paths)
    CHECK(p == unit_path{0, 1, 3, 0}); // but the worst path is best via A
  CHECK(mm.max_path_cost_s == doctest::Approx(0.8));
  CHECK(mm.lower_bound_s == doctest::Approx(0.8)); // bounds meet: exact
}

TEST_CASE("min-max: on random layered graphs the bounds hold and the paths are a valid flow") {
  int exact = 0;
  std::vector<double> gaps;
  for (unsigned seed = 1; seed <= 100; ++seed) {
    std::mt19937 rng{seed};
    int stages = 3 + static_cast<int>(rng() % 4);
    std::vector<flow_node> nodes;
    for (int s = 0; s < stages; ++s) {
      int count = (s == 0 ? 1 : 2) + static_cast<int>(rng() % 3);
      for (int k = 0; k < count; ++k)
        nodes.push_back(flow_node{s, 1 + static_cast<int>(rng() % 6)});
    }
    std::size_t n = nodes.size();
    std::vector<std::vector<double>> cost(n, std::vector<double>(n));
    std::uniform_real_distribution<double> u{0.01, 1.0};
    for (auto& row : cost)
      for (auto& x : row)
        x = std::round(u(rng) * 1e4) / 1e4;
    auto fn = [&](std::size_t a, std::size_t b) { return cost[a][b]; };
    auto mm = max_flow_min_max(nodes, stages, fn);
    auto full = max_flow_min_cost(nodes, stages, fn);
    INFO("seed " << seed);
    CHECK(mm.flow.flows == full.flows);
    REQUIRE(mm.paths.size() == static_cast<std::size_t>(full.flows));
    std::vector<int> load(n, 0);
    double worst_path = 0;
    for (auto& p : mm.paths) {
      REQUIRE(p.size() == static_cast<std::size_t>(stages) + 1);
      CHECK(nodes[p.front()].stage == 0);
      CHECK(nodes[p.back()].stage == 0);
      for (std::size_t i = 0; i + 1 < p.size(); ++i)
        CHECK(nodes[p[i + 1]].stage == (nodes[p[i]].stage + 1) % stages);
      for (std::size_t i = 0; i + 1 < p.size(); ++i)
        ++load[p[i]];
      worst_path = std::max(worst_path, path_cost(p, fn));
    }
    for (std::size_t k = 0; k < n; ++k)
      CHECK(load[k] <= nodes[k].capacity);
    CHECK(worst_path == doctest::Approx(mm.max_path_cost_s));
    CHECK(mm.lower_bound_s <= mm.max_path_cost_s + 1e-9);
    // The bottleneck, checked with the independent max-flow: edges up to it carry the
    // maximum flow, edges strictly below it do not.
    auto below = [&](double tau, bool strict) {
      std::vector<std::vector<bool>> link(n, std::vector<bool>(n));
      for (std::size_t a = 0; a < n; ++a)
        for (std::size_t b = 0; b < n; ++b)
          link[a][b] = strict ? cost[a][b] < tau : cost[a][b] <= tau;
      return reference_max_flow(nodes, stages, link);
    };
    CHECK(below(mm.bottleneck_s, false) == full.flows);
    CHECK(below(mm.bottleneck_s, true) < full.flows);
    exact += std::abs(mm.max_path_cost_s - mm.lower_bound_s) < 1e-9 ? 1 : 0;
    gaps.push_back(mm.max_path_cost_s / mm.lower_bound_s);
  }
  std::sort(gaps.begin(), gaps.end());
  MESSAGE("min-max path cost: bounds met on " << exact << " of 100 instances; upper/lower median "
          << gaps[50] << ", 90th percentile " << gaps[90] << ", max " << gaps.back());
  CHECK(gaps[50] < 1.5); // the bounds are informative, not a formality
}

TEST_CASE("congestion rings: each holder's rings return to it, capacities hold, shares within one, load spreads them") {
  // 2 holders, stage 1: a (capacity 3), b (capacity 3); stage 2: c (capacity 6). a is
  // cheaper than b; one ring occupies a link for 0.4 s.
  std::vector<gwtf::routing::flow_node> nodes{{0, 8}, {0, 8}, {1, 3}, {1, 3}, {2, 6}};
  auto cost = [](std::size_t x, std::size_t y) {
    return (x == 3 || y == 3) ? 0.3 : 0.1; // via b dearer
  };
  for (double occupancy : {0.0, 0.4}) {
    INFO("link occupancy " << occupancy);
    auto rings = gwtf::routing::congestion_rings(nodes, 3, {0, 1}, 8, cost,
                                           [&](std::size_t, std::size_t) { return occupancy; });
    REQUIRE(rings.size() == 2);
    // Capacity of stage 1 (6) limits: 3 rings each, max-min fair.
    CHECK(rings[0].size() == 3);
    CHECK(rings[1].size() == 3);
    std::vector<int> used(nodes.size(), 0);
    for (std::size_t k = 0; k < 2; ++k)
      for (auto& r : rings[k]) {
        REQUIRE(r.size() == 3);
        CHECK(r[0] == k); // leaves and returns to its own holder
        CHECK(nodes[r[1]].stage == 1);
        CHECK(nodes[r[2]].stage == 2);
        ++used[r[1]];
        ++used[r[2]];
      }
    for (std::size_t i = 2; i < nodes.size(); ++i)
      CHECK(used[i] <= nodes[i].capacity);
    CHECK(used[2] + used[3] == 6);
  }
  // Few rings and a heavy load: the second ring of each holder avoids its loaded link to a.
  auto rings = gwtf::routing::congestion_rings(nodes, 3, {0}, 2, cost, [](std::size_t, std::size_t) { return 1.0; });
  REQUIRE(rings[0].size() == 2);
  CHECK(rings[0][0][1] == 2);
  CHECK(rings[0][1][1] == 3);
  auto bare = gwtf::routing::congestion_rings(nodes, 3, {0}, 2, cost, [](std::size_t, std::size_t) { return 0.0; });
  CHECK(bare[0][1][1] == 2);
  // Three holders, one slot at stage 1: the first takes it, the others share its ring.
  std::vector<gwtf::routing::flow_node> tight{{0, 4}, {0, 4}, {0, 4}, {1, 1}, {2, 4}};
  auto shared = gwtf::routing::congestion_rings(tight, 3, {0, 1, 2}, 4, [](std::size_t, std::size_t) { return 0.1; },
                                                [](std::size_t, std::size_t) { return 0.0; });
  for (std::size_t k = 0; k < 3; ++k) {
    REQUIRE(shared[k].size() == 1);
    CHECK(shared[k][0] == gwtf::routing::unit_path{k, 3, 4});
  }
}
