// The proven lower bound on an iteration's time (routing/bound.hpp): its terms by hand, and
// (in simulator_test.cpp) that no router ever beats it.
#include <doctest/doctest.h>

#include <cmath>

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
