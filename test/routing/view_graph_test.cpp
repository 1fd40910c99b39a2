#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "routing/view_graph.hpp"

using gwtf::routing::view_graph;

TEST_CASE("view graph: the cheapest ring per data holder, load after the path, ties to the first next hop") {
  view_graph v;
  v.reset(false);
  auto a = v.add_next(0.1), b = v.add_next(0.2), c = v.add_next(0.3);
  auto d1 = v.add_target(), d2 = v.add_target(), lonely = v.add_target();
  v.add_path(a, d1, 0.5);  // 0.6
  v.add_path(b, d1, 0.4);  // 0.6: a tie, a was added first
  auto cd1 = v.add_path(c, d1, 0.1); // 0.4
  v.add_path(a, d2, 1.0);  // 1.1
  v.add_path(b, d2, 0.5);  // 0.7
  auto r = v.cheapest({}, {});
  REQUIRE(r.size() == 3);
  REQUIRE(r[d1]);
  CHECK(r[d1]->next == c);
  CHECK(r[d1]->cost == doctest::Approx(0.4));
  REQUIRE(r[d2]);
  CHECK(r[d2]->next == b);
  CHECK_FALSE(r[lonely]); // no next hop reaches it
  // Flows already on c's link: 0.3 more makes a and b (0.6) cheaper, a first.
  r = v.cheapest({0.0, 0.0, 0.3}, {});
  CHECK(r[d1]->next == a);
  CHECK(r[d1]->cost == doctest::Approx(0.6));
  // b excluded (it refused): d2 through a.
  r = v.cheapest({}, {0, 1, 0});
  CHECK(r[d2]->next == a);
  CHECK(r[d2]->cost == doctest::Approx(1.1));
  r = v.cheapest({}, {1, 1, 0});
  CHECK_FALSE(r[d2]);
  // c advertises a dearer path to d1 (set in place, after a query was answered and kept).
  v.set_cost(cd1, 0.35); // 0.65
  r = v.cheapest({}, {});
  CHECK(r[d1]->next == a);
  CHECK(r[d1]->cost == doctest::Approx(0.6));
  CHECK(v.add_path(a, 7, 1.0) == static_cast<std::size_t>(-1)); // no such target
  // A negative cost (a bug upstream: peers' are refused by the codec) is no reason to throw.
  v.set_cost(cd1, -5.0);
  CHECK_NOTHROW(r = v.cheapest({}, {}));
  CHECK(r[d1]->next == c);
  // The last relay stage: each next hop is a data holder, reached only by itself.
  v.reset(true);
  auto h1 = v.add_next(0.7), h2 = v.add_next(0.2);
  r = v.cheapest({0.0, 1.0}, {});
  REQUIRE(r.size() == 2);
  CHECK(r[h1]->next == h1);
  CHECK(r[h2]->next == h2);
  CHECK(r[h2]->cost == doctest::Approx(1.2));
}

namespace {

// A random view with coarse costs (exact ties are frequent): next hops with their edge
// costs, loads and exclusions, and paths to the targets (-1: none). `closing`: the next hops
// are the data holders themselves (the last relay stage), no paths.
struct random_view {
  view_graph v;
  std::size_t n = 0, t = 0;
  std::vector<double> edge, load;
  std::vector<char> excluded;
  std::vector<std::vector<double>> path;

  random_view(std::uint64_t seed, bool closing) {
    std::mt19937_64 rng{seed};
    std::uniform_int_distribution<int> hops{0, 12}, targets{1, 5}, coin{0, 3};
    std::uniform_real_distribution<double> cost{0.0, 2.0};
    n = static_cast<std::size_t>(hops(rng));
    t = closing ? n : static_cast<std::size_t>(targets(rng));
    v.reset(closing);
    edge.resize(n);
    load.resize(n);
    excluded.resize(n);
    path.assign(n, std::vector<double>(t, -1.0));
    for (std::size_t k = 0; k < n; ++k) {
      edge[k] = coin(rng) == 0 ? 0.5 : std::round(cost(rng) * 4) / 4;
      v.add_next(edge[k]);
      load[k] = coin(rng) == 0 ? 0.25 * coin(rng) : 0.0;
      excluded[k] = coin(rng) == 0;
    }
    if (closing)
      return;
    for (std::size_t j = 0; j < t; ++j)
      v.add_target();
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < t; ++j)
        if (coin(rng) != 0) {
          path[k][j] = std::round(cost(rng) * 4) / 4;
          v.add_path(k, j, path[k][j]);
        }
  }
};

} // namespace

// The balancer's adverts and next hops were a loop over next hops before they were shortest
// paths on this graph: the same choice, bit for bit, on random views.
TEST_CASE("view graph: Dijkstra gives what a loop over the next hops gives, bit for bit, on 500 random views") {
  for (std::uint64_t seed = 1; seed <= 500; ++seed) {
    INFO("seed " << seed);
    random_view r{seed, false};
    auto& [v, n, t, edge, load, excluded, path] = r;
    for (bool use_load : {false, true})
      for (bool use_excluded : {false, true}) {
        auto got = v.cheapest(use_load ? load : std::vector<double>{}, use_excluded ? excluded : std::vector<char>{});
        REQUIRE(got.size() == t);
        for (std::size_t j = 0; j < t; ++j) {
          std::optional<view_graph::choice> want;
          for (std::size_t k = 0; k < n; ++k) {
            if (path[k][j] < 0 || (use_excluded && excluded[k]))
              continue;
            double c = edge[k] + path[k][j];
            if (use_load)
              c += load[k];
            if (!want || c < want->cost)
              want = view_graph::choice{k, c};
          }
          REQUIRE(got[j].has_value() == want.has_value());
          if (want) {
            CHECK(got[j]->next == want->next);
            CHECK(got[j]->cost == want->cost); // exactly
          }
        }
      }
  }
}

// Re-routing asks for the cheapest ring avoiding each next hop in turn: one walk giving the
// best and the runner-up through another next hop must answer exactly as one Dijkstra per
// excluded next hop would, ties included, on views whose next stage is a relay stage or the
// data holders.
TEST_CASE("view graph: the cheapest ring avoiding each next hop equals a Dijkstra with it excluded, on 500 random views") {
  for (std::uint64_t seed = 1; seed <= 500; ++seed) {
    INFO("seed " << seed);
    random_view r{seed, seed % 4 == 0};
    auto& [v, n, t, edge, load, excluded, path] = r;
    for (bool use_load : {false, true}) {
      auto l = use_load ? load : std::vector<double>{};
      auto two = v.cheapest_two(l);
      REQUIRE(two.size() == t);
      for (std::size_t k = 0; k <= n; ++k) { // k == n: nothing excluded
        INFO("avoiding next hop " << k << (use_load ? ", loaded" : ""));
        std::vector<char> excluded(n, 0);
        if (k < n)
          excluded[k] = 1;
        auto want = v.cheapest(l, excluded);
        for (std::size_t j = 0; j < t; ++j) {
          auto& got = two[j].avoiding(k);
          REQUIRE(got.has_value() == want[j].has_value());
          if (got) {
            CHECK(got->next == want[j]->next);
            CHECK(got->cost == want[j]->cost); // exactly
          }
        }
      }
    }
  }
}
