#include <doctest/doctest.h>

#include <map>

#include "routing/swarm.hpp"

using namespace gwtf::routing;

namespace {

swarm_router make(int stages = 3) {
  return swarm_router{swarm_config{}, stages};
}

} // namespace

TEST_CASE("swarm: load follows learnt throughput (a peer 3x faster gets 3x the hops)") {
  auto r = make();
  r.refresh(0, {{"slow", 1}, {"fast", 1}});
  // Probe both once and learn their speeds: 1 and 3 forward tasks per second.
  std::map<std::string, double> secs{{"slow", 1.0}, {"fast", 1.0 / 3}};
  for (int i = 0; i < 2; ++i) {
    auto p = *r.choose(1, swarm_task::forward, 0);
    r.completed(p, swarm_task::forward, secs[p]);
  }
  CHECK(*r.throughput("slow") == doctest::Approx(1.0));
  CHECK(*r.throughput("fast") == doctest::Approx(3.0));
  std::map<std::string, int> picks;
  for (int i = 0; i < 400; ++i)
    ++picks[*r.choose(1, swarm_task::forward, 0)];
  CHECK(picks["fast"] == doctest::Approx(3.0 * picks["slow"]).epsilon(0.05));
}

TEST_CASE("swarm: the EMA weights new samples by ema_alpha") {
  swarm_config cfg;
  cfg.ema_alpha = 0.5;
  swarm_router r{cfg, 2};
  r.refresh(0, {{"a", 1}});
  r.choose(1, swarm_task::forward, 0);
  r.completed("a", swarm_task::forward, 0.5); // first sample sets it: 2/s
  CHECK(*r.throughput("a") == doctest::Approx(2.0));
  r.completed("a", swarm_task::forward, 0.25); // 4/s: 0.5*4 + 0.5*2
  CHECK(*r.throughput("a") == doctest::Approx(3.0));
  r.completed("a", swarm_task::backward, 2.5); // backward is 2.5 units: 1/s -> 0.5*1 + 0.5*3
  CHECK(*r.throughput("a") == doctest::Approx(2.0));
}

TEST_CASE("swarm: a new peer enters at the minimum key and is probed next") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  for (int i = 0; i < 10; ++i) {
    auto p = *r.choose(1, swarm_task::forward, 0);
    r.completed(p, swarm_task::forward, 1.0);
  }
  r.refresh(1, {{"a", 1}, {"b", 1}, {"c", 1}});
  CHECK(*r.choose(1, swarm_task::forward, 1) == "c");
}

TEST_CASE("swarm: backward hops weigh backward_factor times a forward hop") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  CHECK(*r.choose(1, swarm_task::backward, 0) == "a"); // a's key: 2.5
  // b takes three forward hops (its key goes 1, 2, 3) before a (2.5) comes back.
  CHECK(*r.choose(1, swarm_task::forward, 0) == "b");
  CHECK(*r.choose(1, swarm_task::forward, 0) == "b");
  CHECK(*r.choose(1, swarm_task::forward, 0) == "b");
  CHECK(*r.choose(1, swarm_task::forward, 0) == "a");
}

TEST_CASE("swarm: idle peers start now, not in the past") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  r.choose(1, swarm_task::forward, 0); // a busy until 1
  r.choose(1, swarm_task::forward, 0); // b busy until 1
  // At t=10 both are idle; a (first by id) is chosen and busy until 11, not 2.
  CHECK(*r.choose(1, swarm_task::forward, 10) == "a");
  CHECK(*r.choose(1, swarm_task::forward, 10) == "b");
  CHECK(*r.choose(1, swarm_task::forward, 10) == "a");
}

TEST_CASE("swarm: errors ban a peer until a refresh after the ban expires") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  CHECK(r.failed("a", swarm_task::forward, 5) == swarm_recovery::retry_hop);
  CHECK(r.banned("a"));
  for (int i = 0; i < 5; ++i)
    CHECK(*r.choose(1, swarm_task::forward, 5) == "b");
  r.refresh(20, {{"a", 1}, {"b", 1}}); // ban runs until 5 + 30 s
  CHECK(r.banned("a"));
  r.refresh(40, {{"a", 1}, {"b", 1}});
  CHECK_FALSE(r.banned("a"));
  CHECK(*r.choose(1, swarm_task::forward, 40) == "a");
}

TEST_CASE("swarm: refresh forgets dead peers; an empty stage has no choice") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 2}});
  CHECK(r.refresh_due(0) == false);
  CHECK(r.refresh_due(29.9) == false);
  CHECK(r.refresh_due(30));
  r.refresh(30, {{"b", 2}});
  CHECK_FALSE(r.choose(1, swarm_task::forward, 30).has_value());
  CHECK(*r.choose(2, swarm_task::forward, 30) == "b");
  CHECK_FALSE(r.throughput("a").has_value());
}

TEST_CASE("swarm: a lost backward restarts the whole microbatch; a lost forward retries the hop") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  CHECK(r.timed_out("a", swarm_task::forward) == swarm_recovery::retry_hop);
  CHECK(r.timed_out("a", swarm_task::backward) == swarm_recovery::restart_microbatch);
  CHECK(r.failed("b", swarm_task::backward, 0) == swarm_recovery::restart_microbatch);
}
