// plan_recovery / merge_runs (app/run/recovery.hpp): the pure part of restoring a lost stage.
#include <doctest/doctest.h>

#include "app/run/recovery.hpp"

using namespace gwtf;
using namespace gwtf::app;

namespace {

actors::host_config host(const std::string& name, actors::host_role role, int stage) {
  actors::host_config h;
  h.name = name;
  h.region = "virginia";
  h.role = role;
  h.stage = stage;
  return h;
}

actors::fault_event fault(int at, actors::fault_action action, const std::string& host) {
  actors::fault_event f;
  f.at_iteration = at;
  f.action = action;
  f.host = host;
  return f;
}

// 4 stages: two holders, stage 1: a1 a2, stage 2: b1 b2 b3 (b3 joins at 8), stage 3: c1 c2.
cluster_config four_stages() {
  cluster_config cfg;
  cfg.model.stages = 4;
  cfg.model.layers = 3;
  using actors::host_role;
  cfg.hosts = {host("dh-a", host_role::data_holder, 0), host("dh-b", host_role::data_holder, 0),
               host("a1", host_role::relay, 1),        host("a2", host_role::relay, 1),
               host("b2", host_role::relay, 2),        host("b1", host_role::relay, 2),
               host("b3", host_role::relay, 2),        host("c1", host_role::relay, 3),
               host("c2", host_role::relay, 3)};
  cfg.faults.script = {fault(3, actors::fault_action::crash, "c1"), fault(3, actors::fault_action::crash, "c2"),
                       fault(8, actors::fault_action::join, "b3"), fault(9, actors::fault_action::crash, "a2")};
  return cfg;
}

} // namespace

TEST_CASE("recovery plan: the gone hosts and the faults that happened are dropped, a spare relay moves") {
  auto cfg = four_stages();
  embedded_result run;
  run.lost_stage = 3;
  run.gone = {"c1", "c2"};
  run.faults_through = 3;
  auto plan = plan_recovery(cfg, run);
  REQUIRE(std::holds_alternative<recovery_plan>(plan));
  auto& p = std::get<recovery_plan>(plan);
  // Stages 1 and 2 have two live relays each (b3 joins later): the lower stage, the first name.
  CHECK(p.mover == "a1");
  CHECK(p.from_stage == 1);
  std::map<std::string, int> stages;
  for (auto& h : p.cfg.hosts)
    stages[h.name] = h.stage;
  CHECK(stages.size() == 7);
  CHECK(stages.count("c1") == 0);
  CHECK(stages.count("c2") == 0);
  CHECK(stages.at("a1") == 3);
  CHECK(stages.at("a2") == 1);
  // The crashes of iteration 3 would strike again in the replayed iterations: gone; the join
  // at 8 and the crash at 9 are still to come.
  REQUIRE(p.cfg.faults.script.size() == 2);
  CHECK(p.cfg.faults.script[0].host == "b3");
  CHECK(p.cfg.faults.script[1].host == "a2");

  // With b3 already joined, stage 2 has three: its first name moves.
  run.faults_through = 8;
  auto later = plan_recovery(cfg, run);
  REQUIRE(std::holds_alternative<recovery_plan>(later));
  CHECK(std::get<recovery_plan>(later).mover == "b1");
  CHECK(std::get<recovery_plan>(later).from_stage == 2);
}

TEST_CASE("recovery plan: a joiner of the lost stage restores it, and a reason when no relay can be spared or nothing was lost") {
  auto cfg = four_stages();
  embedded_result run;
  run.lost_stage = 3;
  run.gone = {"c1", "c2", "a2", "b1"};
  run.faults_through = 3; // b3 has not joined: stage 1 has a1, stage 2 has b2
  auto plan = plan_recovery(cfg, run);
  REQUIRE(std::holds_alternative<std::string>(plan));
  CHECK(std::get<std::string>(plan).find("no stage has a relay to spare") != std::string::npos);
  // c2 is left at stage 3 (a joiner that was still downloading when c1 went): it restores
  // the stage itself, nobody moves.
  run.gone = {"c1"};
  auto joiner = plan_recovery(cfg, run);
  REQUIRE(std::holds_alternative<recovery_plan>(joiner));
  CHECK(std::get<recovery_plan>(joiner).mover == "c2");
  CHECK(std::get<recovery_plan>(joiner).from_stage == 3);
  for (auto& h : std::get<recovery_plan>(joiner).cfg.hosts)
    if (h.name == "a1")
      CHECK(h.stage == 1);
  run.lost_stage = 0;
  CHECK(std::holds_alternative<std::string>(plan_recovery(cfg, run)));
}

TEST_CASE("recovery merge: rows before the resume point from the first run, rolled-back compute is waste") {
  embedded_result first, second;
  for (int i = 0; i < 6; ++i)
    first.rows.push_back({i, 10.0 - i, 0, 4, 9, i >= 5 ? 2 : 0, 0});
  first.crashes = 2;
  first.compute_s = 60;
  first.wasted_s = 1;
  first.live_compute = {{3, 10.0}, {4, 10.0}, {5, 7.0}};
  first.failures = {"stall"};
  first.checkpoints = 4;
  for (int i = 4; i < 8; ++i)
    second.rows.push_back({i, 20.0 - i, 0, 4, 7, 0, 0});
  second.compute_s = 40;
  second.completed = true;
  second.failures = {"note"};
  second.checkpoints = 3;
  second.last_applied = {{"a1", 7}};
  auto m = merge_runs(first, second, 4);
  REQUIRE(m.rows.size() == 8);
  for (std::size_t i = 0; i < m.rows.size(); ++i)
    CHECK(m.rows[i].iteration == static_cast<std::int64_t>(i));
  CHECK(m.rows[3].loss == 7.0);  // the first run's
  CHECK(m.rows[4].loss == 16.0); // the second run's: iteration 4 was replayed
  CHECK(m.rows[4].crashes == 2);
  CHECK(m.crashes == 2);
  CHECK(m.compute_s == 100);
  CHECK(m.wasted_s == doctest::Approx(1 + 10 + 7)); // iterations 4 and 5 of the first run
  CHECK(m.completed);
  CHECK(m.recoveries == 1);
  CHECK(m.checkpoints == 7);
  CHECK(m.failures == std::vector<std::string>{"stall", "note"});
  CHECK(m.last_applied.at("a1") == 7);
}
