// DT-FM placement (routing/dtfm.hpp): the assignment against brute force, the cost model by
// hand, the evolutionary search against the greedy start and against exhaustive search.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "routing/dtfm.hpp"

using namespace gwtf::routing;

namespace {

network_matrix random_net(std::size_t regions, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<double> lat(5, 150), bw(50, 2000);
  network_matrix n;
  n.name = "random";
  n.intra_region = {1, 5000};
  n.latency_ms.assign(regions, std::vector<double>(regions, 0));
  n.bandwidth_mbps.assign(regions, std::vector<double>(regions, 0));
  for (std::size_t a = 0; a < regions; ++a) {
    n.regions.push_back("r" + std::to_string(a));
    for (std::size_t b = 0; b < regions; ++b) {
      n.latency_ms[a][b] = a == b ? 1 : lat(rng);
      n.bandwidth_mbps[a][b] = a == b ? 5000 : bw(rng);
    }
  }
  return n;
}

double brute_assignment(const std::vector<std::vector<double>>& c) {
  std::vector<std::size_t> cols(c.front().size());
  std::iota(cols.begin(), cols.end(), 0);
  double best = 1e300;
  do {
    double s = 0;
    for (std::size_t i = 0; i < c.size(); ++i)
      s += c[i][cols[i]];
    best = std::min(best, s);
  } while (std::next_permutation(cols.begin(), cols.end()));
  return best;
}

} // namespace

TEST_CASE("dtfm: the linear sum assignment is optimal, square and rectangular") {
  std::mt19937_64 rng{7};
  std::uniform_real_distribution<double> v(0, 10);
  for (auto [rows, cols] : {std::pair{1, 1}, {3, 3}, {4, 4}, {5, 5}, {2, 5}, {3, 6}}) {
    for (int t = 0; t < 20; ++t) {
      std::vector<std::vector<double>> c(rows, std::vector<double>(cols));
      for (auto& r : c)
        for (auto& x : r)
          x = v(rng);
      auto m = min_cost_assignment(c);
      REQUIRE(m.size() == static_cast<std::size_t>(rows));
      std::vector<std::size_t> sorted = m;
      std::sort(sorted.begin(), sorted.end());
      CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()); // distinct columns
      double s = 0;
      for (int i = 0; i < rows; ++i)
        s += c[i][m[i]];
      CHECK(s == doctest::Approx(brute_assignment(c)));
    }
  }
  CHECK_THROWS(min_cost_assignment({{1, 2}, {3, 4}, {5, 6}}));
}

TEST_CASE("dtfm: the transportation between groups of interchangeable items equals the assignment of the items") {
  // Random group sizes and costs; the reference expands each group into its items and runs
  // the Hungarian algorithm (itself checked against brute force above).
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng{seed};
    std::uniform_int_distribution<std::size_t> groups(1, 5), items(0, 6);
    std::uniform_real_distribution<double> v(0, 10);
    auto R = groups(rng), Q = groups(rng);
    std::vector<std::size_t> supply(R), room(Q);
    for (auto& x : supply)
      x = items(rng);
    for (auto& x : room)
      x = items(rng);
    auto total = [](auto& xs) { return std::accumulate(xs.begin(), xs.end(), std::size_t{0}); };
    if (total(supply) > total(room))
      std::swap(supply, room), std::swap(R, Q);
    std::vector<std::vector<double>> c(R, std::vector<double>(Q));
    for (auto& row : c)
      for (auto& x : row)
        x = v(rng);
    auto plan = min_cost_transport(supply, room, c);
    double by_flow = 0;
    for (std::size_t r = 0; r < R; ++r) {
      CHECK(std::accumulate(plan.flow[r].begin(), plan.flow[r].end(), std::size_t{0}) == supply[r]);
      for (std::size_t q = 0; q < Q; ++q)
        by_flow += static_cast<double>(plan.flow[r][q]) * c[r][q];
    }
    for (std::size_t q = 0; q < Q; ++q) {
      std::size_t in = 0;
      for (std::size_t r = 0; r < R; ++r)
        in += plan.flow[r][q];
      CHECK(in <= room[q]);
    }
    CHECK(plan.cost == doctest::Approx(by_flow));
    std::vector<std::size_t> rows, cols;
    for (std::size_t r = 0; r < R; ++r)
      rows.insert(rows.end(), supply[r], r);
    for (std::size_t q = 0; q < Q; ++q)
      cols.insert(cols.end(), room[q], q);
    if (rows.empty()) {
      CHECK(plan.cost == 0);
      continue;
    }
    std::vector<std::vector<double>> expanded(rows.size(), std::vector<double>(cols.size()));
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < cols.size(); ++j)
        expanded[i][j] = c[rows[i]][cols[j]];
    auto m = min_cost_assignment(expanded);
    double reference = 0;
    for (std::size_t i = 0; i < rows.size(); ++i)
      reference += expanded[i][m[i]];
    CHECK(plan.cost == doctest::Approx(reference));
  }
  CHECK_THROWS(min_cost_transport({3}, {2}, {{1.0}}));
}

TEST_CASE("dtfm: the cost model by hand: co-located groups all-reduce cheaply") {
  // Two regions: inside one, 1 ms and 8000 Mbit/s; between them, 50 ms and 80 Mbit/s.
  network_matrix n;
  n.name = "two";
  n.regions = {"a", "b"};
  n.intra_region = {1, 8000};
  n.latency_ms = {{1, 50}, {50, 1}};
  n.bandwidth_mbps = {{8000, 80}, {80, 8000}};
  dtfm_problem p{&n, {0}, {0, 0, 1, 1}, 2, 1e6, 8e6};
  auto together = dtfm_cost(p, {1, 1, 2, 2});
  // Data parallel: one partner, 2 x (1 ms + 4 MB x 8 / 8000 Mbit/s) = 2 x 0.005 s.
  CHECK(together.data_parallel_s == doctest::Approx(0.010));
  // Pipeline: holder(a) -> group a (1 ms + 1 MB at 8000 Mbit/s = 0.002 s), group a -> group b
  // (50 ms + 0.1 s = 0.15 s, both pairs), group b -> holder (0.15 s).
  CHECK(together.pipeline_s == doctest::Approx(0.002 + 0.15 + 0.15));
  CHECK(together.cost == doctest::Approx(0.010 + 2 * 0.302));
  auto mixed = dtfm_cost(p, {1, 2, 1, 2});
  // Each group spans both regions: its all-reduce crosses the slow link.
  CHECK(mixed.data_parallel_s == doctest::Approx(2 * (0.050 + 4e6 * 8 / 80e6)));
  CHECK(mixed.cost > together.cost);
  CHECK_THROWS(dtfm_cost(p, {1, 1, 1, 1})); // group 2 empty
}

TEST_CASE("dtfm: the search is never worse than its greedy start and finds the optimum of small instances") {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    auto net = random_net(4, seed);
    std::mt19937_64 rng{seed * 31};
    std::uniform_int_distribution<std::size_t> region(0, 3);
    dtfm_problem p;
    p.net = &net;
    p.holders = {region(rng), region(rng)};
    p.relay_stages = seed % 2 == 0 ? 2 : 3;
    std::size_t relays = 6 + seed % 3;
    for (std::size_t i = 0; i < relays; ++i)
      p.relays.push_back(region(rng));
    p.activation_bytes = 4e6;
    p.gradient_bytes = 50e6;
    auto found = dtfm_place(p, dtfm_options{seed});
    auto optimum = dtfm_exhaustive(p);
    CHECK(found.best.cost <= found.greedy.cost + 1e-12);
    CHECK(found.best.cost == doctest::Approx(optimum.cost));
    CHECK(found.best.cost >= optimum.cost - 1e-12); // the exhaustive one is a true minimum
    // Balanced groups, every relay placed in 1..k.
    std::vector<int> count(static_cast<std::size_t>(p.relay_stages) + 1, 0);
    for (int s : found.best.stage) {
      REQUIRE(s >= 1);
      REQUIRE(s <= p.relay_stages);
      ++count[static_cast<std::size_t>(s)];
    }
    auto [lo, hi] = std::minmax_element(count.begin() + 1, count.end());
    CHECK(*hi - *lo <= 1);
    CHECK(dtfm_cost(p, found.best.stage).cost == doctest::Approx(found.best.cost));
    // Deterministic for a seed.
    auto again = dtfm_place(p, dtfm_options{seed});
    CHECK(again.best.stage == found.best.stage);
    CHECK(again.evaluations == found.evaluations);
  }
}

TEST_CASE("dtfm: a search without local search still beats round-robin dealing on a larger instance") {
  auto net = random_net(8, 99);
  dtfm_problem p;
  p.net = &net;
  p.holders = {0, 3, 5};
  for (std::size_t i = 0; i < 30; ++i)
    p.relays.push_back(i % 8);
  p.relay_stages = 5;
  p.activation_bytes = 16.8e6;
  p.gradient_bytes = 400e6;
  dtfm_options o;
  o.local_search_rounds = 0;
  auto found = dtfm_place(p, o);
  CHECK(found.best.cost <= found.greedy.cost);
  std::vector<int> round_robin(30);
  for (std::size_t i = 0; i < 30; ++i)
    round_robin[i] = 1 + static_cast<int>(i % 5);
  CHECK(found.best.cost < dtfm_cost(p, round_robin).cost);
  CHECK(found.evaluations == 24 + 60 * 22); // population + generations x (population - elite)
  CHECK_THROWS(dtfm_place(dtfm_problem{&net, {0}, {1}, 2, 1, 1}, o)); // fewer relays than stages
}
