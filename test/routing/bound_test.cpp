// The proven lower bound on an iteration's time (routing/bound.hpp): its terms by hand, and
// (in simulator_test.cpp) that no router ever beats it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "routing/bound.hpp"

using namespace gwtf::routing;

namespace {

// Every link: 10 ms, 1 MB/s.
link_estimate uniform(std::size_t, std::size_t) {
  return {0.01, 1e6};
}

} // namespace

TEST_CASE("bound: one holder and one relay - ring, head, stage and all-reduce terms by hand") {
  std::vector<bound_host> hosts{{0, 16, 0.06}, {1, 1, 0.3}};
  auto b = bound_iteration(hosts, 2, 1, 1e5, uniform, 0.5);
  // One transfer: 10 ms + 0.1 MB / 1 MB/s = 0.11 s; a ring makes four (holder -> relay ->
  // holder forward, and back), runs the relay (0.3 s) and the head (0.06 s).
  CHECK(b.ring_s == doctest::Approx(4 * 0.11 + 0.3 + 0.06));
  CHECK(b.holder_s == doctest::Approx(0.06));
  CHECK(b.limiting_stage == 1);
  // Stage 1: a stash is held at least 0.3 + 0.28 s -> 1/0.58 per second; the budget left
  // (1 - 0.3/0.58) buys rematerialised microbatches at 0.3 + 0.1 s each.
  double stash = 1 / 0.58;
  double remat = (1 - stash * 0.3) / 0.4;
  CHECK(b.stage_s == doctest::Approx(1 / (stash + remat)));
  CHECK(b.allreduce_s == 0.5);
  CHECK(b.seconds == doctest::Approx(0.8 + 0.5)); // one microbatch: the ring dominates
  auto many = bound_iteration(hosts, 2, 40, 1e5, uniform, 0.0);
  CHECK(many.stage_s == doctest::Approx(40 / (stash + remat)));
  CHECK(many.seconds == doctest::Approx(many.stage_s));
}

TEST_CASE("bound: a stage's rate is compute-bound with instant round trips and remat-bound without stash") {
  std::vector<bound_host> two{{1, 4, 0.2}, {1, 1, 0.5}};
  CHECK(stage_rate_bound(two, 0.0) == doctest::Approx(1 / 0.2 + 1 / 0.5));
  // No stash can come back (infinite round trip): every microbatch rematerialises its
  // forward at >= 0.2/3 s more; the stage's budget is 2 host-seconds per second.
  double cheap = std::min(1 / 0.2, 2 / (0.2 + 0.2 / 3));
  double left = 2 - cheap * (0.2 + 0.2 / 3);
  CHECK(stage_rate_bound(two, INFINITY) == doctest::Approx(cheap + std::min(1 / 0.5, left / (0.5 + 0.2 / 3))));
  // More stash slots or another host never lower the rate.
  std::vector<bound_host> more{{1, 8, 0.2}, {1, 1, 0.5}};
  CHECK(stage_rate_bound(more, 3.0) >= stage_rate_bound(two, 3.0));
  double before = stage_rate_bound(more, 3.0);
  more.push_back({1, 1, 1.0});
  CHECK(stage_rate_bound(more, 3.0) > before);
  CHECK(stage_rate_bound({}, 1.0) == 0);
}

TEST_CASE("bound: a relay stage without hosts or without links cannot finish") {
  std::vector<bound_host> gap{{0, 16, 0.06}, {2, 1, 0.3}};
  CHECK(std::isinf(bound_iteration(gap, 3, 4, 1e5, uniform, 0).seconds));
  std::vector<bound_host> cut{{0, 16, 0.06}, {1, 1, 0.3}};
  auto none = [](std::size_t, std::size_t) { return link_estimate{0.01, 0.0}; };
  CHECK(std::isinf(bound_iteration(cut, 2, 4, 1e5, none, 0).seconds));
}

TEST_CASE("bound: the all-reduce term is the slowest pair's share on idle links") {
  auto link = [](std::size_t a, std::size_t b) {
    return a + b == 1 ? link_estimate{0.02, 1e6} : link_estimate{0.01, 4e6};
  };
  CHECK(allreduce_lower_bound({0}, 1e6, link) == 0);
  // Three replicas: each sends 2/3 of 1 MB to each other; 0<->1 is the slow pair.
  CHECK(allreduce_lower_bound({0, 1, 2}, 1e6, link) == doctest::Approx(0.02 + (2e6 / 3) / 1e6));
  // Representatives of six replicas: the share is a sixth, the slowest pair the same.
  CHECK(allreduce_lower_bound({0, 1, 2}, 1e6, link, 6) == doctest::Approx(0.02 + (2e6 / 6) / 1e6));
}

TEST_CASE("bound: hosts grouped by region give the bound of the hosts one by one") {
  // Links depend on the region only; the grouped bound looks at one host per region and
  // stage and must equal the bound over every pair. Random instances, seeded.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng{seed};
    std::uniform_int_distribution<int> region(0, 3), capacity(1, 6);
    std::uniform_real_distribution<double> compute(0.05, 0.5), lat(0.001, 0.1), bw(1e6, 1e8);
    double latency[4][4], bandwidth[4][4];
    for (auto a = 0; a < 4; ++a)
      for (auto b = 0; b < 4; ++b) {
        latency[a][b] = lat(rng);
        bandwidth[a][b] = bw(rng);
      }
    int stages = 3 + static_cast<int>(seed % 3);
    std::vector<bound_host> hosts;
    std::vector<int> regions;
    for (int s = 0; s < stages; ++s)
      for (int k = 0; k < 2 + static_cast<int>(rng() % 5); ++k) {
        regions.push_back(region(rng));
        hosts.push_back({s, capacity(rng), compute(rng)});
      }
    auto link = [&](std::size_t a, std::size_t b) {
      return link_estimate{latency[regions[a]][regions[b]], bandwidth[regions[a]][regions[b]]};
    };
    auto alone = bound_iteration(hosts, stages, 8, 1e6, link, 0.1);
    for (std::size_t k = 0; k < hosts.size(); ++k)
      hosts[k].group = regions[k];
    auto grouped = bound_iteration(hosts, stages, 8, 1e6, link, 0.1);
    CHECK(grouped.seconds == alone.seconds);
    CHECK(grouped.ring_s == alone.ring_s);
    CHECK(grouped.stage_s == alone.stage_s);
  }
}
