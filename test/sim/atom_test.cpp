// ATOM's whole-model peers in the simulator (sim/atom.cpp, docs/atom.md): the round's
// arithmetic, swapping, churn, determinism and the bound.
#include <doctest/doctest.h>

#include <cmath>

#include "common/seeded.hpp"
#include "sim/simulator.hpp"

using namespace gwtf::sim;

namespace {

// A 100M-parameter model: 1.6 GB of state, 0.2 GB of a microbatch's activations (0.05 GB
// rematerialising), blocks of 0.1 GB; `average` bytes on the wire, a 1 GB download.
sim_atom_model whole_model(double average, int local_microbatches) {
  sim_atom_model m;
  m.state_bytes = 1.6e9;
  m.activation_bytes = 0.2e9;
  m.remat_activation_bytes = 0.05e9;
  m.block_state_bytes = 0.1e9;
  m.average_bytes = average;
  m.download_bytes = 1e9;
  m.local_microbatches = local_microbatches;
  return m;
}

// One region (2.5 ms, 2000 Mbit/s inside), a data holder and a relay of a 2-stage model,
// each training the whole model: 0.1 s and 0.2 s a microbatch.
sim_scenario pair_of_peers(int iterations) {
  sim_scenario s;
  s.net.name = "one";
  s.net.regions = {"a"};
  s.net.latency_ms = {{0}};
  s.net.bandwidth_mbps = {{0}};
  s.stages = 2;
  s.hosts.push_back({"dh", 0, 0, 4, 0.05});
  s.hosts.push_back({"r1", 0, 1, 4, 0.1});
  s.hosts[0].model_compute_s = 0.1;
  s.hosts[1].model_compute_s = 0.2;
  s.microbatches_per_holder = 12;
  s.tokens_per_microbatch = 1024;
  s.iterations = iterations;
  s.atom = whole_model(100e6, 4);
  s.detect_s = 1.0;
  return s;
}

// 3 regions, 2 data holders and 6 relays of mixed speeds and links, for churn.
sim_scenario mixed(std::uint64_t seed, double crash_rate, double join_rate) {
  sim_scenario s;
  s.net.name = "t3";
  s.net.regions = {"a", "b", "c"};
  s.net.latency_ms = {{0, 20, 80}, {20, 0, 60}, {80, 60, 0}};
  s.net.bandwidth_mbps = {{1000, 400, 100}, {400, 1000, 200}, {100, 200, 1000}};
  s.stages = 3;
  s.hosts.push_back({"dh-a", 0, 0, 8, 0.05});
  s.hosts.push_back({"dh-c", 2, 0, 8, 0.05});
  for (int st = 1; st < 3; ++st)
    for (std::size_t r = 0; r < 3; ++r)
      s.hosts.push_back({"r" + std::to_string(st) + "-" + s.net.regions[r], r, st, 2, 0.2 + 0.1 * static_cast<double>(r)});
  for (auto& h : s.hosts)
    h.model_compute_s = 3 * h.compute_s;
  s.microbatches_per_holder = 6;
  s.tokens_per_microbatch = 1024;
  s.iterations = 16;
  s.crash_rate = crash_rate;
  s.join_rate = join_rate;
  s.detect_s = 1.0;
  s.seed = seed;
  s.atom = whole_model(50e6, 6);
  return s;
}

} // namespace

TEST_CASE("atom: a round is its global batch at the peers' summed speed plus the all-reduce, which overlap hides") {
  auto s = pair_of_peers(5);
  // 12 microbatches at 1/0.1 + 1/0.2 = 15 a second: 0.8 s; the all-reduce of two peers sends
  // each its 100 MB over 2000 Mbit/s (0.4 s) plus 2.5 ms.
  double compute = 12.0 / 15, reduce = 100e6 / (2000e6 / 8) + 0.0025;
  auto sync = simulate(s, sim_router::atom);
  REQUIRE_MESSAGE(sync.completed, sync.why);
  CHECK(sync.router == sim_router::atom);
  CHECK(sync.microbatches == 5 * 12);
  REQUIRE(sync.iteration_s.size() == 5);
  for (auto t : sync.iteration_s)
    CHECK(t == doctest::Approx(compute + reduce));
  CHECK(sync.total_s == doctest::Approx(5 * (compute + reduce)));
  CHECK(sync.aggregation_s.front() == doctest::Approx(reduce));
  CHECK(sync.flows.front() == 2);
  CHECK(sync.bound_s == doctest::Approx(5 * compute));
  CHECK(sync.compute_s == doctest::Approx(5 * 2 * compute));
  CHECK(sync.wasted_s == 0);
  // Overlapped, each average runs while the next round computes (0.4 s < 0.8 s): only the
  // last one shows.
  s.averaging = gwtf::model::averaging_mode::overlap;
  auto over = simulate(s, sim_router::atom);
  REQUIRE(over.completed);
  CHECK(over.microbatches == 5 * 12);
  CHECK(over.total_s == doctest::Approx(5 * compute + reduce));
  // sync_every 5: one average for the 5 global batches.
  s.averaging = gwtf::model::averaging_mode::sync;
  s.atom.sync_every = 5;
  auto once = simulate(s, sim_router::atom);
  REQUIRE(once.completed);
  CHECK(once.iteration_s.size() == 1);
  CHECK(once.microbatches == 5 * 12);
  CHECK(once.total_s == doctest::Approx(5 * compute + reduce));
  // A slower network makes the all-reduce longer, the compute the same.
  s.atom.sync_every = 1;
  s.net.intra_region.bandwidth_mbps = 200;
  auto slow = simulate(s, sim_router::atom);
  CHECK(slow.total_s == doctest::Approx(5 * (compute + 100e6 / (200e6 / 8) + 0.0025)));
}

TEST_CASE("atom: a peer whose memory does not hold the model swaps at its bandwidth, rematerialising where that is faster, and one that cannot hold two blocks sits out") {
  auto s = pair_of_peers(2);
  double reduce = 100e6 / (2000e6 / 8) + 0.0025;
  auto whole = simulate(s, sim_router::atom);
  // The relay holds 0.73 GB. Keeping every activation (0.2 GB) it needs 1.8 GB: 1.07 GB go
  // in and out once a local step of 4 microbatches (0.8 s of compute) at 1 GB/s, plus the
  // first block, 2.23 s a step. Rematerialising (0.05 GB of activations, 4/3 of the compute)
  // it needs 1.65 GB: 1.93 s a step, the faster.
  s.hosts[1].memory_bytes = 0.2e9 + 1.6e9 / 3;
  s.hosts[1].swap_bytes_s = 1e9;
  auto swapped = simulate(s, sim_router::atom);
  REQUIRE(swapped.completed);
  auto step_of = [&](int L) {
    double keep = std::max(L * 0.2, 2 * (1.8e9 - s.hosts[1].memory_bytes) / 1e9) + 0.1;
    double remat = std::max(L * 0.2 * 4 / 3, 2 * (1.65e9 - s.hosts[1].memory_bytes) / 1e9) + 0.1;
    CHECK(remat < keep);
    return std::min(keep, remat);
  };
  CHECK(swapped.iteration_s.front() == doctest::Approx(12 / (1 / 0.1 + 4 / step_of(4)) + reduce));
  CHECK(swapped.total_s > whole.total_s);
  CHECK(swapped.bound_s == doctest::Approx(whole.bound_s)); // the bound is the compute alone
  // A local step is no larger than the peer's share of the round (6 of its 12 microbatches
  // here): more swapping per microbatch than local_microbatches would give.
  s.atom.local_microbatches = 100;
  auto shared = simulate(s, sim_router::atom);
  CHECK(shared.iteration_s.front() == doctest::Approx(12 / (1 / 0.1 + 6 / step_of(6)) + reduce));
  s.atom.local_microbatches = 4;
  // Fast swapping hides behind the compute (ATOM loads block k + 1 while k computes), and
  // then keeping the activations (no second forward) is the faster.
  s.hosts[1].swap_bytes_s = 1e12;
  auto hidden = simulate(s, sim_router::atom);
  CHECK(hidden.total_s == doctest::Approx(whole.total_s).epsilon(1e-3));
  // 0.3 GB holds two blocks and a rematerialising microbatch's activations, not all of them.
  s.hosts[1].swap_bytes_s = 1e9;
  s.hosts[1].memory_bytes = 0.3e9;
  auto remat_only = simulate(s, sim_router::atom);
  REQUIRE(remat_only.completed);
  CHECK(remat_only.flows.front() == 2);
  double step = std::max(4 * 0.2 * 4 / 3, 2 * (1.65e9 - 0.3e9) / 1e9) + 0.1;
  CHECK(remat_only.iteration_s.front() == doctest::Approx(12 / (1 / 0.1 + 4 / step) + reduce));
  // Below that the relay cannot train: the data holder alone.
  s.hosts[1].memory_bytes = 0.24e9;
  auto alone = simulate(s, sim_router::atom);
  REQUIRE(alone.completed);
  CHECK(alone.flows.front() == 1);
  CHECK(alone.iteration_s.front() == doctest::Approx(12 * 0.1)); // no all-reduce with one peer
  s.hosts[0].memory_bytes = 0.1e9;
  auto none = simulate(s, sim_router::atom);
  CHECK_FALSE(none.completed);
  CHECK(none.why == "round 0: no peer left that can hold the model");
}

TEST_CASE("atom: a crash in the compute wastes the peer's round, one in the all-reduce its microbatches and a detection") {
  auto s = pair_of_peers(4);
  double compute = 12.0 / 15, reduce = 100e6 / (2000e6 / 8) + 0.0025;
  sim_event crash;
  crash.kind = sim_event_kind::crash;
  crash.iteration = 1;
  crash.at_fraction = 0.25; // of round 0's length: in round 1's compute
  crash.host = 1;
  s.script = {crash};
  auto r = simulate(s, sim_router::atom);
  REQUIRE_MESSAGE(r.completed, r.why);
  CHECK(r.crashes == 1);
  CHECK(r.microbatches == 4 * 12); // the survivor makes the round's batch up
  double at = 0.25 * (compute + reduce);
  CHECK(r.wasted_s == doctest::Approx(at));
  // Round 1: the relay's work until the crash is lost; the data holder computes 12 alone,
  // and cannot average before it knows the relay is gone.
  CHECK(r.iteration_s[1] == doctest::Approx(std::max(12 * 0.1, at + 1.0)));
  CHECK(r.flows[1] == 1);
  // In the all-reduce (sync: the peers wait for it), the relay's microbatches of the round go
  // with it, and the survivor notices after the detection delay.
  crash.at_fraction = (compute + reduce / 2) / (compute + reduce);
  s.script = {crash};
  auto late = simulate(s, sim_router::atom);
  REQUIRE(late.completed);
  double relay_share = compute / 0.2; // microbatches the relay brought to round 1
  CHECK(late.microbatches == std::llround(4 * 12 - relay_share));
  CHECK(late.wasted_s == doctest::Approx(compute));
  CHECK(late.iteration_s[1] == doctest::Approx(compute + reduce / 2 + 1.0)); // alone after, no all-reduce
}

TEST_CASE("atom: a joiner downloads the average from the fastest peer, then computes") {
  auto s = pair_of_peers(4);
  sim_event join;
  join.kind = sim_event_kind::join;
  join.iteration = 1;
  join.at_fraction = 0;
  join.host = 2;
  join.joiner = {"r2", 0, 1, 4, 0.1};
  join.joiner.model_compute_s = 0.1;
  s.script = {join};
  s.atom.download_bytes = 100e6;
  auto r = simulate(s, sim_router::atom);
  REQUIRE_MESSAGE(r.completed, r.why);
  CHECK(r.joins == 1);
  REQUIRE(r.join_times_s.size() == 1);
  double compute = 12.0 / 15, reduce = 100e6 / (2000e6 / 8) + 0.0025;
  double ready = 0.0025 + 100e6 / (2000e6 / 8); // 0.4 s into round 1
  CHECK(r.join_times_s[0] == doctest::Approx(compute + reduce + ready));
  CHECK(r.flows[0] == 2);
  CHECK(r.flows[1] == 3);
  // Round 1: 15 microbatches a second until it is in, 25 after.
  double left = 12 - 15 * ready;
  CHECK(r.iteration_s[1] == doctest::Approx(ready + left / 25 + 2 * 100e6 / 3 / (2000e6 / 8) + 0.0025));
  CHECK(r.microbatches == 4 * 12);
}

TEST_CASE("atom: the same seed gives the same run, and no run beats its bound, under random churn") {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    double crash = 0.02 * static_cast<double>(seed % 4), join = 0.05 * static_cast<double>(seed % 3);
    auto s = mixed(seed, crash, join);
    s.averaging = seed % 2 ? gwtf::model::averaging_mode::sync : gwtf::model::averaging_mode::overlap;
    s.atom.sync_every = 1 + static_cast<int>(seed % 3);
    INFO("seed " << seed << ", crash_rate " << crash << ", join_rate " << join << ", sync_every " << s.atom.sync_every);
    auto a = simulate(s, sim_router::atom), b = simulate(s, sim_router::atom);
    REQUIRE_MESSAGE(a.completed, a.why);
    CHECK(a.total_s == b.total_s);
    CHECK(a.microbatches == b.microbatches);
    CHECK(a.iteration_s == b.iteration_s);
    CHECK(a.total_s >= a.bound_s);
    for (std::size_t i = 0; i < a.iteration_s.size(); ++i)
      CHECK(a.iteration_s[i] >= a.bound_iteration_s[i] * (1 - 1e-12));
    CHECK(a.microbatches <= 16 * 12);
    CHECK(a.microbatches >= 16 * 12 * 3 / 4); // crashes lose at most a peer's share now and then
    CHECK(a.wasted_s <= a.compute_s);
    auto trace = churn_trace(s);
    int crashes = 0;
    for (auto& e : trace)
      crashes += e.kind == sim_event_kind::crash;
    CHECK(a.crashes <= crashes); // one that would land after the last round does not happen
    CHECK(a.crashes >= (crashes > 0 ? 1 : 0));
  }
}
