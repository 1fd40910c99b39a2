// The discrete-event simulator: deterministic, loses no microbatch under crashes, and the
// three routers see the same churn.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "routing/simulator.hpp"

using namespace gwtf::routing;

namespace {

// 3 regions, 2 data holders, 3 relay stages of 3 hosts each with mixed speeds and links.
sim_scenario small(std::uint64_t seed, double crash_rate) {
  sim_scenario s;
  s.net.name = "t3";
  s.net.regions = {"a", "b", "c"};
  s.net.latency_ms = {{0, 20, 80}, {20, 0, 60}, {80, 60, 0}};
  s.net.bandwidth_mbps = {{1000, 400, 100}, {400, 1000, 200}, {100, 200, 1000}};
  s.stages = 4;
  s.hosts.push_back({"dh-a", 0, 0, 8, 0.05});
  s.hosts.push_back({"dh-c", 2, 0, 8, 0.05});
  for (int st = 1; st < 4; ++st)
    for (std::size_t r = 0; r < 3; ++r)
      s.hosts.push_back({"r" + std::to_string(st) + "-" + s.net.regions[r], r, st, 2 + static_cast<int>(r),
                         0.2 + 0.1 * static_cast<double>(r)});
  s.microbatches_per_holder = 6;
  s.activation_bytes = 2e6;
  s.stage_gradient_bytes = 60e6;
  s.tokens_per_microbatch = 1024;
  s.iterations = 12;
  s.crash_rate = crash_rate;
  s.detect_s = 1.0;
  s.seed = seed;
  s.gwtf.tick_ms = 500;
  return s;
}

} // namespace

TEST_CASE("simulator: every router completes every microbatch without churn, wasting nothing") {
  auto s = small(1, 0.0);
  for (auto r : {sim_router::gwtf, sim_router::swarm, sim_router::optimal}) {
    INFO(std::string{to_string(r)});
    auto res = simulate(s, r);
    REQUIRE_MESSAGE(res.completed, res.why);
    CHECK(res.microbatches == 12 * 2 * 6);
    CHECK(res.wasted_s == 0);
    CHECK(res.crashes == 0);
    REQUIRE(res.iteration_s.size() == 12);
    for (auto t : res.iteration_s)
      CHECK(t > 0);
    MESSAGE(std::string{to_string(r)} << ": total " << res.total_s << " s, setup " << res.setup_s << " s, flows "
                         << (res.flows.empty() ? 0 : res.flows.back()));
  }
}

TEST_CASE("simulator: the same seed gives the same run; the crash trace spares a stage's last relay") {
  auto s = small(7, 0.08);
  auto trace = churn_trace(s);
  REQUIRE_FALSE(trace.empty());
  std::map<int, int> dead_per_stage;
  std::set<std::size_t> dead;
  for (auto& c : trace) {
    CHECK(c.kind == sim_event_kind::crash);
    CHECK(s.hosts[c.host].stage > 0);
    CHECK(dead.insert(c.host).second);
    ++dead_per_stage[s.hosts[c.host].stage];
  }
  for (auto& [st, n] : dead_per_stage)
    CHECK(n <= 2); // 3 relays per stage: one survives
  for (auto r : {sim_router::gwtf, sim_router::swarm, sim_router::optimal}) {
    INFO(std::string{to_string(r)});
    auto a = simulate(s, r), b = simulate(s, r);
    CHECK(a.total_s == b.total_s);
    CHECK(a.wasted_s == b.wasted_s);
    CHECK(a.iteration_s == b.iteration_s);
  }
}

TEST_CASE("simulator: under crashes no microbatch is lost, and GWTF wastes less compute than SWARM") {
  int gwtf_less = 0, runs = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto s = small(seed, 0.05);
    auto trace = churn_trace(s);
    if (trace.empty())
      continue;
    ++runs;
    std::map<sim_router, sim_result> res;
    for (auto r : {sim_router::gwtf, sim_router::swarm, sim_router::optimal}) {
      INFO("seed " << seed << ", router " << std::string{to_string(r)});
      auto x = simulate(s, r);
      REQUIRE_MESSAGE(x.completed, x.why);
      CHECK(x.microbatches == 12 * 2 * 6);
      // A crash lands at a fraction of the previous iteration's length: after the last
      // iteration ended, it does not happen.
      CHECK(x.crashes >= 1);
      CHECK(x.crashes <= static_cast<int>(trace.size()));
      CHECK(x.wasted_s > 0); // the crashed hosts' work of their iteration
      CHECK(x.wasted_s < x.compute_s);
      res[r] = x;
    }
    double g = res[sim_router::gwtf].wasted_s / res[sim_router::gwtf].compute_s;
    double w = res[sim_router::swarm].wasted_s / res[sim_router::swarm].compute_s;
    MESSAGE("seed " << seed << ": crashes " << trace.size() << ", wasted gwtf " << g * 100 << "%, swarm "
                    << w * 100 << "%; total gwtf " << res[sim_router::gwtf].total_s << " s, swarm "
                    << res[sim_router::swarm].total_s << " s, optimal " << res[sim_router::optimal].total_s << " s");
    gwtf_less += g <= w;
  }
  REQUIRE(runs >= 4);
  CHECK(gwtf_less == runs);
}

TEST_CASE("simulator: joins, leaves and degrading links: the trace places joiners, every router finishes") {
  auto s = small(3, 0.04);
  s.leave_rate = 0.04;
  s.join_rate = 0.08;
  s.degrade_rate = 0.2;
  auto trace = churn_trace(s);
  std::map<sim_event_kind, int> kinds;
  std::size_t next_joiner = s.hosts.size();
  std::set<std::size_t> gone;
  bool joiner_crashed = false;
  for (auto& e : trace) {
    ++kinds[e.kind];
    if (e.kind == sim_event_kind::join) {
      CHECK(e.host == next_joiner++); // joiners are numbered after the scenario's hosts
      CHECK(e.joiner.stage >= 1);
      CHECK(e.joiner.stage < s.stages);
    }
    if (e.kind == sim_event_kind::crash || e.kind == sim_event_kind::leave) {
      CHECK(gone.insert(e.host).second);
      joiner_crashed = joiner_crashed || e.host >= s.hosts.size();
    }
    if (e.kind == sim_event_kind::degrade)
      CHECK(e.factor == s.degrade_factor);
  }
  INFO("trace: " << kinds[sim_event_kind::crash] << " crashes, " << kinds[sim_event_kind::leave] << " leaves, "
                 << kinds[sim_event_kind::join] << " joins, " << kinds[sim_event_kind::degrade] << " degrades");
  REQUIRE(kinds[sim_event_kind::join] > 0);
  REQUIRE(kinds[sim_event_kind::leave] > 0);
  REQUIRE(kinds[sim_event_kind::degrade] > 0);
  CHECK(joiner_crashed); // joiners churn like everyone else
  for (auto r : {sim_router::gwtf, sim_router::swarm, sim_router::optimal}) {
    INFO("router " << std::string{to_string(r)} << ", seed " << s.seed);
    auto x = simulate(s, r);
    REQUIRE_MESSAGE(x.completed, x.why);
    CHECK(x.microbatches == 12 * 2 * 6);
    CHECK(x.joins > 0);
    CHECK(x.joins <= kinds[sim_event_kind::join]);
    CHECK(x.leaves > 0);
    CHECK(x.join_times_s.size() == static_cast<std::size_t>(x.joins));
    for (std::size_t i = 1; i < x.iteration_end_s.size(); ++i)
      CHECK(x.iteration_end_s[i] > x.iteration_end_s[i - 1]);
  }
}

TEST_CASE("simulator: with a bounded GWTF view (one peer per neighbouring stage) every microbatch is routed") {
  auto s = small(1, 0.0);
  auto all = simulate(s, sim_router::gwtf);
  s.gwtf_view = 1; // one known peer per neighbouring stage, topped up after crashes
  auto one = simulate(s, sim_router::gwtf);
  REQUIRE(all.completed);
  REQUIRE_MESSAGE(one.completed, one.why);
  CHECK(one.microbatches == all.microbatches);
  REQUIRE_FALSE(one.flows.empty());
  for (auto f : one.flows)
    CHECK(f >= 1);
}
