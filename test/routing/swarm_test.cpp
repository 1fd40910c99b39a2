#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "routing/swarm.hpp"

using namespace gwtf::routing;

namespace {

swarm_router make(int stages = 3) {
  return swarm_router{swarm_config{}, stages};
}

} // namespace

TEST_CASE("swarm: load follows learnt throughput (a peer 3x faster gets 3x the calls)") {
  auto r = make();
  r.refresh(0, {{"slow", 1}, {"fast", 1}});
  // Probe both once and learn their speeds: 1 and 3 forward tasks per second.
  std::map<std::string, double> secs{{"slow", 1.0}, {"fast", 1.0 / 3}};
  for (int i = 0; i < 2; ++i) {
    auto p = *r.choose(1, swarm_task::forward);
    r.completed(p, swarm_task::forward, secs[p]);
  }
  CHECK(*r.throughput("slow") == doctest::Approx(1.0));
  CHECK(*r.throughput("fast") == doctest::Approx(3.0));
  std::map<std::string, int> picks;
  for (int i = 0; i < 400; ++i)
    ++picks[*r.choose(1, swarm_task::forward)];
  CHECK(picks["fast"] == doctest::Approx(3.0 * picks["slow"]).epsilon(0.05));
}

TEST_CASE("swarm: the throughput is PerformanceEMA's bias-corrected EMA of wall seconds per task unit") {
  swarm_config cfg;
  cfg.ema_alpha = 0.5;
  swarm_router r{cfg, 2};
  r.refresh(0, {{"a", 1}});
  r.choose(1, swarm_task::forward);
  CHECK_FALSE(r.throughput("a").has_value()); // no call finished yet
  r.completed("a", swarm_task::forward, 0.5); // ema 0.25, corrected by 1 - 0.5: 0.5 s -> 2/s
  CHECK(*r.throughput("a") == doctest::Approx(2.0));
  r.completed("a", swarm_task::forward, 0.25); // ema 0.25, corrected by 1 - 0.25: 1/3 s -> 3/s
  CHECK(*r.throughput("a") == doctest::Approx(3.0));
  r.completed("a", swarm_task::backward, 2.5); // 2.5 units in 2.5 s: ema 0.625 / 0.875 -> 1.4/s
  CHECK(*r.throughput("a") == doctest::Approx(1.4));
}

TEST_CASE("swarm: a new peer enters at the least key: called in the next round, not given a burst") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  for (int i = 0; i < 10; ++i) {
    auto p = *r.choose(1, swarm_task::forward);
    r.completed(p, swarm_task::forward, 1.0);
  }
  r.refresh(1, {{"a", 1}, {"b", 1}, {"c", 1}}); // a and b at key 5; c enters at 5
  std::vector<std::string> next;
  for (int i = 0; i < 6; ++i)
    next.push_back(*r.choose(1, swarm_task::forward));
  CHECK(next == std::vector<std::string>{"a", "b", "c", "a", "b", "c"});
}

TEST_CASE("swarm: backward calls weigh backward_factor forward calls, charged or chosen") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  CHECK(*r.choose(1, swarm_task::backward) == "a"); // a's key: 2.5 (unmeasured: 1 s per unit)
  // b takes three forward calls (its key goes 1, 2, 3) before a (2.5) comes back.
  CHECK(*r.choose(1, swarm_task::forward) == "b");
  CHECK(*r.choose(1, swarm_task::forward) == "b");
  CHECK(*r.choose(1, swarm_task::forward) == "b");
  CHECK(*r.choose(1, swarm_task::forward) == "a");
  r.charge("a", swarm_task::backward); // a: 3.5 + 2.5 = 6; b: 3
  CHECK(*r.choose(1, swarm_task::forward) == "b");
}

TEST_CASE("swarm: keys accumulate expected work: a peer that idled does not get a burst") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  for (int i = 0; i < 4; ++i)
    r.choose(1, swarm_task::forward); // a, b, a, b: both keys at 2
  // Whatever time it is, the queue alternates: keys are work given, not finish times.
  CHECK(*r.choose(1, swarm_task::forward) == "a");
  CHECK(*r.choose(1, swarm_task::forward) == "b");
  CHECK(*r.choose(1, swarm_task::forward) == "a");
}

TEST_CASE("swarm: errors ban and forget a peer until a refresh after the ban expires") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  r.choose(1, swarm_task::forward);
  r.completed("a", swarm_task::forward, 0.5);
  CHECK(r.failed("a", swarm_task::forward, 5) == swarm_recovery::retry_call);
  CHECK(r.banned("a"));
  CHECK_FALSE(r.throughput("a").has_value()); // forgotten, as SWARM's _ban_expert does
  for (int i = 0; i < 5; ++i)
    CHECK(*r.choose(1, swarm_task::forward) == "b");
  r.refresh(20, {{"a", 1}, {"b", 1}}); // ban runs until 5 + 30 s
  CHECK(r.banned("a"));
  r.refresh(40, {{"a", 1}, {"b", 1}});
  CHECK_FALSE(r.banned("a"));
  CHECK(*r.choose(1, swarm_task::forward) == "a"); // back at the head of the queue
}

TEST_CASE("swarm: the queue lists each stage's peers in the order they will be called, with what was learnt") {
  auto r = make();
  r.refresh(0, {{"b", 1}, {"a", 1}, {"c", 2}, {"d", 2}});
  CHECK(*r.choose(1, swarm_task::forward) == "a"); // ties: smallest id
  r.completed("a", swarm_task::forward, 0.5);
  r.failed("d", swarm_task::forward, 0);
  auto q = r.queue();
  REQUIRE(q.size() == 3);
  CHECK(q[0].id == "b"); // key 0: called next
  CHECK(q[0].stage == 1);
  CHECK_FALSE(q[0].throughput.has_value());
  CHECK(q[1].id == "a");
  CHECK(q[1].key == doctest::Approx(1.0)); // one forward expected at 1 s before it was measured
  CHECK(q[1].samples == 1);
  CHECK(*q[1].throughput == doctest::Approx(2.0));
  CHECK(q[2].id == "c");
  CHECK(q[2].stage == 2);
  CHECK(r.banned_peers() == std::vector<std::string>{"d"});
}

TEST_CASE("swarm: refresh forgets dead peers, an empty stage has no choice") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 2}});
  CHECK(r.refresh_due(0) == false);
  CHECK(r.refresh_due(29.9) == false);
  CHECK(r.refresh_due(30));
  r.refresh(30, {{"b", 2}});
  CHECK_FALSE(r.choose(1, swarm_task::forward).has_value());
  CHECK(*r.choose(2, swarm_task::forward) == "b");
  CHECK_FALSE(r.throughput("a").has_value());
}

TEST_CASE("swarm: a lost call is retried on another peer, swarm-restart reruns a lost backward's microbatch") {
  auto r = make();
  r.refresh(0, {{"a", 1}, {"b", 1}});
  CHECK(r.timed_out("a", swarm_task::forward) == swarm_recovery::retry_call);
  CHECK(r.timed_out("a", swarm_task::backward) == swarm_recovery::retry_call);
  CHECK(r.failed("b", swarm_task::backward, 0) == swarm_recovery::retry_call);
  swarm_router restart{swarm_config{}, 3, swarm_policy::restart};
  restart.refresh(0, {{"a", 1}, {"b", 1}});
  CHECK(restart.timed_out("a", swarm_task::forward) == swarm_recovery::retry_call);
  CHECK(restart.timed_out("a", swarm_task::backward) == swarm_recovery::restart_microbatch);
  CHECK(restart.failed("b", swarm_task::backward, 0) == swarm_recovery::restart_microbatch);
}

TEST_CASE("swarm: rebalancing moves one peer of the fastest stage to the slowest, only when that raises the slower") {
  // Stage 1: 3 + 1 tasks/s, stage 2: 1, stage 3: 2 + 2. The slowest is 2; the fastest with two
  // peers is 1 (4 = 4: the lower stage). Moving a's 3 leaves 1 with 1 and 2 with 4: the slower
  // of the two 1, no gain; moving b's 1 gives 3 and 2: the slower rises from 1 to 2.
  std::vector<swarm_load> relays{{"a", 1, 3}, {"b", 1, 1}, {"c", 2, 1}, {"d", 3, 2}, {"e", 3, 2}};
  auto m = swarm_rebalance(relays, 4);
  REQUIRE(m.has_value());
  CHECK(relays[m->peer].id == "b");
  CHECK(m->from == 1);
  CHECK(m->to == 2);
  // Balanced stages: no move raises the slower, none is made.
  std::vector<swarm_load> even{{"a", 1, 2}, {"b", 1, 2}, {"c", 2, 2}, {"d", 2, 2}};
  CHECK_FALSE(swarm_rebalance(even, 3).has_value());
  // A stage with one peer never gives it away, whatever it measured.
  std::vector<swarm_load> singles{{"a", 1, 9}, {"c", 2, 1}};
  CHECK_FALSE(swarm_rebalance(singles, 3).has_value());
  // Unmeasured peers count for nothing: with nothing measured nobody moves.
  std::vector<swarm_load> unmeasured{{"a", 1, 0}, {"b", 1, 0}, {"c", 2, 0}};
  CHECK_FALSE(swarm_rebalance(unmeasured, 3).has_value());
  // An empty stage gets a peer whatever it costs (here no move raises the slower of the two).
  std::vector<swarm_load> gap{{"a", 1, 3}, {"b", 1, 1}, {"d", 3, 2}};
  auto fill = swarm_rebalance(gap, 4, 2);
  REQUIRE(fill.has_value());
  CHECK(fill->to == 2);
  CHECK(fill->from == 1);
  CHECK(gap[fill->peer].id == "a"); // a and b both leave 1 behind (min(3, 1) = min(1, 3)): the first
}
