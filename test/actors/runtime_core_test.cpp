// The pure cores behind the host actors: no CAF, no threads, no clock.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "actors/core/catch_up.hpp"
#include "actors/core/early_calls.hpp"
#include "actors/core/freeze_watch.hpp"
#include "actors/core/hop_ledger.hpp"
#include "actors/core/key_digest.hpp"
#include "model/data.hpp"
#include "actors/core/link_estimator.hpp"
#include "actors/core/iteration_barrier.hpp"
#include "actors/core/replica_vote.hpp"
#include "actors/core/state_download.hpp"
#include "actors/net/link_emulator.hpp"
#include "actors/core/membership_view.hpp"
#include "actors/core/stage_moves.hpp"
#include "actors/core/stage_restore.hpp"
#include "actors/core/push_pacer.hpp"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

wire::activation fwd(std::uint64_t it, std::uint32_t idx, std::vector<std::string> path, std::uint32_t attempt = 0) {
  wire::activation a;
  a.microbatch = {it, 0, idx};
  a.path = std::move(path);
  a.attempt = attempt;
  return a;
}

} // namespace

TEST_CASE("early forwards: a relay queues them before its weights or one iteration ahead, boundedly") {
  using gwtf::actors::admit_early;
  using gwtf::actors::early_admission;
  auto limit = gwtf::actors::early_queue_limit(4, 2);
  CHECK(limit == 32);
  CHECK(admit_early(true, 7, 8, 0, limit) == early_admission::queue);    // the next iteration
  CHECK(admit_early(true, 7, 9, 0, limit) == early_admission::too_far);  // no holder is two ahead
  CHECK(admit_early(true, 7, 1000000, 0, limit) == early_admission::too_far);
  CHECK(admit_early(false, 0, 12, 0, limit) == early_admission::queue);  // before the weights: any
  CHECK(admit_early(false, 0, 12, 31, limit) == early_admission::queue);
  CHECK(admit_early(false, 0, 12, 32, limit) == early_admission::full);  // but never more than the limit
  CHECK(admit_early(true, 7, 8, 32, limit) == early_admission::full);
}

TEST_CASE("hop ledger: a new microbatch is computed once, an equal attempt is a duplicate") {
  hop_ledger l{"r2"};
  auto a = fwd(3, 1, {"dh", "r1"});
  CHECK(l.on_forward("r1", a) == forward_action::compute);
  CHECK(l.on_forward("r1", a) == forward_action::ignore);
  auto* r = l.find(key_of(a.microbatch));
  REQUIRE(r != nullptr);
  CHECK(r->path == std::vector<std::string>{"dh", "r1", "r2"});
  CHECK(r->prev == "r1");
  CHECK(l.on_backward(key_of(a.microbatch)));
  l.sent_backward(key_of(a.microbatch));
  CHECK_FALSE(l.on_backward(key_of(a.microbatch))); // counted once
}

TEST_CASE("hop ledger: a re-send through a replacement rebinds instead of recomputing") {
  hop_ledger l{"r3"};
  auto a = fwd(0, 0, {"dh", "r1", "r2a"});
  REQUIRE(l.on_forward("r2a", a) == forward_action::compute);
  l.sent_forward(key_of(a.microbatch), "dh");
  l.sent_backward(key_of(a.microbatch));
  auto again = fwd(0, 0, {"dh", "r1", "r2b"}, 1);
  CHECK(l.on_forward("r2b", again) == forward_action::rebind);
  auto* r = l.find(key_of(a.microbatch));
  CHECK(r->prev == "r2b");
  CHECK(r->backward_done); // the caller re-sends its stored gradient to r2b
}

TEST_CASE("hop ledger: a holder's new run rebinds what its previous run left, a frame of the old run is stale") {
  hop_ledger l{"r1"};
  auto old_run = fwd(4, 2, {"dh"});
  old_run.microbatch.origin = 100;
  REQUIRE(l.on_forward("dh", old_run) == forward_action::compute);
  l.sent_forward(key_of(old_run.microbatch), "r2");
  l.sent_backward(key_of(old_run.microbatch));
  // The holder restarted (run 200) and sends the same microbatch again, attempt 0: the same
  // data through the same weights, so the hop rebinds (re-sends what it holds, counts
  // nothing twice) and what goes back carries the new run.
  auto new_run = fwd(4, 2, {"dh"});
  new_run.microbatch.origin = 200;
  CHECK(l.on_forward("dh", new_run) == forward_action::rebind);
  auto* r = l.find(key_of(new_run.microbatch));
  REQUIRE(r != nullptr);
  CHECK(r->mb.origin == 200);
  CHECK(r->backward_done); // the caller sends the stored gradient back, nothing recomputed
  CHECK_FALSE(l.on_backward(key_of(new_run.microbatch)));
  // A late frame of the old run changes nothing, and the new run's duplicate is one.
  old_run.attempt = 5;
  CHECK(l.on_forward("dh", old_run) == forward_action::ignore);
  CHECK(l.find(key_of(new_run.microbatch))->mb.origin == 200);
  CHECK(l.on_forward("dh", new_run) == forward_action::ignore);
}

TEST_CASE("hop ledger: the death of the next hop yields re-sends with the hint from HOP_PROGRESS") {
  hop_ledger l{"r1"};
  auto a = fwd(0, 2, {"dh"});
  auto b = fwd(0, 3, {"dh"});
  REQUIRE(l.on_forward("dh", a) == forward_action::compute);
  REQUIRE(l.on_forward("dh", b) == forward_action::compute);
  l.sent_forward(key_of(a.microbatch), "r2a");
  l.sent_forward(key_of(b.microbatch), "r2b");
  l.on_progress(wire::hop_progress{a.microbatch, {"dh", "r1", "r2a", "r3x"}});
  auto rs = l.on_peer_down("r2a");
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].key == key_of(a.microbatch));
  CHECK(rs[0].hint == "r3x");
  CHECK(rs[0].attempt == 1);
  CHECK(l.on_peer_down("r9").empty());
  l.redirect(rs[0].key, "r2c");
  CHECK(l.find(rs[0].key)->next == "r2c");
  // A progress message whose middle hop is not our next hop is ignored.
  l.on_progress(wire::hop_progress{b.microbatch, {"dh", "r1", "r2z", "r3y"}});
  CHECK(l.find(key_of(b.microbatch))->next_next.empty());
  CHECK(l.finish(0).size() == 2);
  CHECK(l.size() == 0);
}

TEST_CASE("next hop: own flow from the sender first, then any flow, then the cheapest live host") {
  std::vector<flow_hop> flows{{"dh", "r1a", "r2a"}, {"dh", "r1b", "r2b"}, {"dh2", "r1a", "r2c"}};
  std::vector<candidate> live{{"r2a", 1.0}, {"r2b", 0.5}, {"r2c", 0.1}};
  CHECK(next_hop(flows, "r1a", "dh", 0, live) == "r2a");
  CHECK(next_hop(flows, "r1z", "dh", 1, live) == "r2b");
  CHECK(next_hop(flows, "r1z", "dh9", 0, live) == "r2c");
  CHECK(next_hop(flows, "r1a", "dh", 0, {{"r2b", 0.5}}) == "r2b"); // r2a is dead
  CHECK_FALSE(next_hop(flows, "r1a", "dh", 0, {}).has_value());
  CHECK(choose_replacement(live, "r2c") == "r2b");
}

TEST_CASE("freeze watch: a gap past the timeout is a freeze for ever, seen by a stamp or by a check") {
  // Stamps every 50 ms: no freeze, however long it runs.
  freeze_watch w{2000, 1000};
  for (std::int64_t t = 1050; t <= 10000; t += 50)
    w.stamp(t);
  CHECK_FALSE(w.frozen(10040));
  CHECK(w.longest_gap_ms() == 50);
  // A gap of exactly the timeout is not one (peers wait longer than that).
  w.stamp(12000);
  CHECK_FALSE(w.frozen(12000));
  // Resumed after a stop: an actor checks before the watchdog ran again.
  freeze_watch first_check{2000, 0};
  first_check.stamp(100);
  CHECK(first_check.frozen(4200));
  CHECK(first_check.longest_gap_ms() == 4100);
  first_check.stamp(4210); // the watchdog runs again: still frozen
  CHECK(first_check.frozen(4220));
  // The watchdog ran first: its stamp records the gap before it stamps, so a check that
  // then finds a fresh stamp still sees the freeze.
  freeze_watch first_stamp{2000, 0};
  first_stamp.stamp(2500);
  CHECK(first_stamp.frozen(2501));
  CHECK(first_stamp.longest_gap_ms() == 2500);
}

TEST_CASE("membership view: heartbeats, silence, restarts and clean leaves") {
  membership_view v{"me", 800};
  wire::hello h{"r1", "x", wire::peer_role::relay, 1, 4, 7, "", 0, {}};
  auto c = v.heard(h, 0);
  REQUIRE(c.size() == 1);
  CHECK(c[0].up);
  CHECK(v.heard(h, 100).empty());
  CHECK(v.live_at(1) == std::vector<std::string>{"r1"});
  CHECK(v.tick(900).empty());
  auto down = v.tick(901);
  REQUIRE(down.size() == 1);
  CHECK_FALSE(down[0].up);
  CHECK(v.live().empty());
  CHECK(v.heard(h, 950).size() == 1); // back
  auto restarted = h;
  restarted.incarnation = 8;
  auto r = v.heard(restarted, 1000);
  REQUIRE(r.size() == 2); // old incarnation down, new one up
  CHECK_FALSE(r[0].up);
  CHECK(r[1].up);
  auto moved = restarted;
  moved.stage = -1; // downloading its state: not a replica meanwhile
  CHECK(v.heard(moved, 1100).size() == 1);
  CHECK(v.live_at(1).empty());
  CHECK(v.left(wire::leave{"r1", 8}).size() == 1);
  CHECK(v.heard(moved, 1200).empty()); // a late heartbeat of the incarnation that left
  CHECK(v.heard(wire::hello{"me", "x", wire::peer_role::relay, 1, 1, 1, "", 0, {}}, 0).empty());
}

TEST_CASE("membership view: suspicion adapts to bursty heartbeats, between the timeout and 4 times it") {
  membership_view v{"me", 2000};
  wire::hello steady{"r1", "x", wire::peer_role::relay, 1, 4, 7, "", 0, {}};
  wire::hello bursty{"r2", "y", wire::peer_role::relay, 2, 4, 7, "", 0, {}};
  std::int64_t t1 = 0, t2 = 0;
  v.heard(steady, t1);
  v.heard(bursty, t2);
  // r1 beats every 250 ms; r2 too, but every fourth gap is 1.8 s (a host streaming shares).
  for (int i = 1; i <= 40; ++i) {
    v.heard(steady, t1 += 250);
    v.heard(bursty, t2 += (i % 4 == 0 ? 1800 : 250));
  }
  REQUIRE(t2 > t1);
  auto& r1 = v.peers().at("r1");
  auto& r2 = v.peers().at("r2");
  CHECK(v.suspect_after_ms(r1) == 2000); // the floor: a quiet peer is suspected as before
  auto slack = v.suspect_after_ms(r2);
  CHECK(slack > 2000);
  CHECK(slack <= 8000);
  // Both silent 2.1 s after their last heartbeat: r1 is suspected, r2 (whose bursts showed
  // such gaps) is not yet; later it is.
  auto down = v.tick(t1 + 2001);
  REQUIRE(down.size() == 1);
  CHECK(down[0].peer == "r1");
  CHECK(v.tick(t2 + 2100).empty());
  CHECK(v.alive("r2"));
  CHECK(v.tick(t2 + slack).empty());
  down = v.tick(t2 + slack + 1);
  REQUIRE(down.size() == 1);
  CHECK(down[0].peer == "r2");
  auto last = t2;
  // Back, its old rhythm is forgotten: the floor again.
  v.heard(bursty, last + 9000);
  CHECK(v.suspect_after_ms(v.peers().at("r2")) == 2000);
  // However wild the gaps, suspicion comes by 4 times the timeout.
  membership_view w{"me", 1000};
  wire::hello wild{"r3", "z", wire::peer_role::relay, 3, 4, 7, "", 0, {}};
  std::int64_t u = 0;
  w.heard(wild, u);
  for (int i = 0; i < 10; ++i)
    w.heard(wild, u += (i % 2 == 0 ? 10 : 30000));
  CHECK(w.suspect_after_ms(w.peers().at("r3")) == 4000);
}

TEST_CASE("iteration barrier: holders, then shares covering every reported microbatch, then a norm per stage") {
  iteration_barrier b{3};
  CHECK_FALSE(b.holders_done(5, {"dh1", "dh2"}));
  b.holder_done(wire::iteration_done{5, "dh1", 4, 10.0, {}});
  CHECK_FALSE(b.holders_done(5, {"dh1", "dh2"}));
  CHECK(b.holders_done(5, {"dh1"})); // dh2 died
  b.holder_done(wire::iteration_done{5, "dh2", 4, 11.0, {}});
  CHECK(b.holders_done(5, {"dh1", "dh2"}));
  CHECK(b.reports(5).size() == 2);
  CHECK(b.reported_microbatches(5) == 8);
  b.share(5, "r1b");
  CHECK_FALSE(b.shares_complete(5, "r1a", 8)); // own share missing
  b.share(5, "r1a");
  CHECK(b.shares_complete(5, "r1a", 8));
  CHECK_FALSE(b.shares_complete(5, "r1a", 7)); // a replica's share with work in it is missing
  CHECK(b.shares_complete(5, "r1a", 9));        // over-counted: proceed, instrumentation reports it
  b.share(6, "r1a");
  CHECK_FALSE(b.shares_complete(6, "r1a", 0)); // no holder reported iteration 6 yet
  b.norm(5, 0, 1.0);
  b.norm(5, 1, 2.0);
  CHECK_FALSE(b.global_norm(5).has_value());
  b.norm(5, 1, 100.0); // the first share per stage counts
  b.norm(5, 7, 100.0); // no such stage
  b.norm(5, 2, 1.0);
  REQUIRE(b.global_norm(5).has_value());
  CHECK(*b.global_norm(5) == doctest::Approx(2.0));
  b.finish(5);
  CHECK_FALSE(b.global_norm(5).has_value());
  CHECK(b.reports(5).empty());
}

TEST_CASE("iteration barrier: a holder named as a participant is awaited even if never heard, unless seen gone") {
  // r1b restarted and cannot hear dh2: its own view holds dh1 only. dh1's report names dh2.
  iteration_barrier b{3};
  b.holder_done(wire::iteration_done{5, "dh1", 4, 10.0, {"dh1", "dh2"}});
  CHECK(b.awaited_holders(5, {"dh1"}, {}) == std::vector<std::string>{"dh1", "dh2"});
  CHECK_FALSE(b.holders_done(5, {"dh1"}));       // without the rule it shared and averaged here
  CHECK(b.holders_done(5, {"dh1"}, {"dh2"}));    // dh2 seen going down: not awaited
  CHECK(b.waiting_for(5, "r1b", {"dh1"}, 0).rfind("ITERATION_DONE from dh2;", 0) == 0);
  // dh2's report arrives relayed in r1a's share: now dh2's microbatches must be covered too.
  b.holder_done(wire::iteration_done{5, "dh2", 4, 11.0, {"dh1", "dh2"}});
  CHECK(b.holders_done(5, {"dh1"}));
  b.share(5, "r1b");
  CHECK_FALSE(b.shares_complete(5, "r1b", 4)); // r1b's own 4 cover dh1's, not dh2's
  b.share(5, "r1a");
  CHECK(b.shares_complete(5, "r1b", 8));
  // A holder that saw dh2 die names only itself: a joiner that never knew dh2 does not wait.
  iteration_barrier later{3};
  later.holder_done(wire::iteration_done{9, "dh1", 4, 10.0, {"dh1"}});
  CHECK(later.holders_done(9, {"dh1"}));
}

TEST_CASE("iteration barrier: the stall report names what an iteration still waits for") {
  iteration_barrier b{3};
  auto w = b.waiting_for(5, "r1a", {"dh1", "dh2"}, 0);
  CHECK(w == "ITERATION_DONE from dh1, dh2; this replica's share; norms of stage(s) 0, 1, 2");
  b.holder_done(wire::iteration_done{5, "dh1", 4, 10.0, {}});
  b.holder_done(wire::iteration_done{5, "dh2", 4, 11.0, {}});
  b.share(5, "r1a");
  b.share(5, "r1b");
  b.norm(5, 0, 1.0);
  b.norm(5, 2, 1.0);
  CHECK(b.waiting_for(5, "r1a", {"dh1", "dh2"}, 6)
        == "shares counting 8 microbatches (6 in, from r1a, r1b); norms of stage(s) 1");
  b.norm(5, 1, 1.0);
  CHECK(b.waiting_for(5, "r1a", {"dh1", "dh2"}, 8).empty());
}

TEST_CASE("iteration barrier: relay stages follow stage 0's verdict, narrowed by a second one") {
  // dh2 finished iteration 5 and died before stage 0 counted it: stage 0's verdict names dh1.
  iteration_barrier b{3};
  b.holder_done(wire::iteration_done{5, "dh1", 4, 10.0, {"dh1", "dh2"}});
  b.holder_done(wire::iteration_done{5, "dh2", 4, 11.0, {"dh1", "dh2"}});
  b.share(5, "r1a");
  CHECK(b.verdict(5) == nullptr);
  CHECK(b.outside_verdict(5, {{"dh1", 2}, {"dh2", 3}}).empty()); // nothing to leave out yet
  CHECK(b.waiting_for(5, "r1a", {"dh1"}, 8, {"dh2"}, true)
        == "stage 0's verdict (a norm of stage 0); norms of stage(s) 0, 1, 2");
  CHECK(b.waiting_for(5, "r1a", {"dh1"}, 8, {"dh2"}).find("verdict") == std::string::npos); // stage 0 itself
  b.verdict(5, "dh1", {{"dh1", 4}});
  REQUIRE(b.verdict(5) != nullptr);
  CHECK(b.verdict_settled(5, {"dh2"}));
  CHECK(*b.verdict(5) == std::map<std::string, std::uint32_t>{{"dh1", 4}});
  CHECK(b.outside_verdict(5, {{"dh1", 2}, {"dh2", 3}}) == std::vector<std::string>{"dh2"});
  CHECK(b.outside_verdict(5, {{"dh1", 2}, {"dh2", 0}}).empty()); // a holder with nothing counted
  // Complete once the shares count the verdict's 4 microbatches, not the reports' 8.
  CHECK_FALSE(b.shares_complete(5, "r1a", 3));
  CHECK(b.shares_complete(5, "r1a", 4));
  CHECK(b.waiting_for(5, "r1a", {"dh1"}, 3, {"dh2"}, true)
        == "shares counting 4 microbatches (3 in, from r1a); norms of stage(s) 0, 1, 2");
  // Another stage-0 replica counted a holder the first did not, and missed one it counted:
  // only the holders both name count, at every relay that heard both.
  iteration_barrier c{3};
  c.verdict(6, "dh1", {{"dh1", 4}, {"dh2", 4}, {"dh3", 4}});
  c.verdict(6, "dh3", {{"dh1", 4}, {"dh3", 4}, {"dh4", 4}});
  CHECK(*c.verdict(6) == std::map<std::string, std::uint32_t>{{"dh1", 4}, {"dh3", 4}});
  CHECK(c.verdict_settled(6, {}));
  c.finish(6);
  CHECK(c.verdict(6) == nullptr);
  CHECK_FALSE(c.verdict_settled(6, {}));
}

TEST_CASE("iteration barrier: a verdict is settled once every holder it names sent its own or went down") {
  // dh2 averaged with dh1's share and told the relays before it was killed; its own share
  // never reached dh1, which averages without it once it sees dh2 go down. Heard first,
  // dh2's verdict names both: a relay that averaged on it would count dh2's microbatches
  // that stage 0 left out (a launch test once broke exactly-once so).
  iteration_barrier b{3};
  b.holder_done(wire::iteration_done{3, "dh1", 4, 10.0, {"dh1", "dh2"}});
  b.holder_done(wire::iteration_done{3, "dh2", 4, 11.0, {"dh1", "dh2"}});
  b.share(3, "r1a");
  CHECK(b.verdicts_awaited(3, {}).empty()); // none before any verdict
  CHECK_FALSE(b.verdict_settled(3, {}));
  b.verdict(3, "dh2", {{"dh1", 4}, {"dh2", 4}});
  CHECK_FALSE(b.verdict_settled(3, {}));
  CHECK(b.verdicts_awaited(3, {}) == std::vector<std::string>{"dh1"});
  CHECK(b.waiting_for(3, "r1a", {"dh1", "dh2"}, 8, {}, true)
        == "stage 0's verdict from dh1 (each holder a verdict names); norms of stage(s) 0, 1, 2");
  // dh2 goes down: that changes nothing, dh1 is alive and has not said what it counted.
  CHECK_FALSE(b.verdict_settled(3, {"dh2"}));
  b.verdict(3, "dh1", {{"dh1", 4}});
  CHECK(b.verdict_settled(3, {"dh2"}));
  CHECK(*b.verdict(3) == std::map<std::string, std::uint32_t>{{"dh1", 4}});
  CHECK_FALSE(b.shares_complete(3, "r1a", 3));
  CHECK(b.shares_complete(3, "r1a", 4)); // the verdict's 4, not the reports' 8
  // The other way round: the first verdict names both, and the other holder dies before
  // sending its own. Its share was counted by the first, so both count at every stage.
  iteration_barrier c{3};
  c.verdict(4, "dh1", {{"dh1", 4}, {"dh2", 4}});
  CHECK_FALSE(c.verdict_settled(4, {}));
  CHECK(c.verdict_settled(4, {"dh2"}));
  CHECK(*c.verdict(4) == std::map<std::string, std::uint32_t>{{"dh1", 4}, {"dh2", 4}});
}

TEST_CASE("replica vote: majority, ties to the lowest name, decided whichever hash comes last") {
  replica_vote v;
  // Three replicas; this one (r1b) is in the minority.
  v.mine(4, 0xbad);
  CHECK_FALSE(v.decide(4, "r1b", 2).has_value()); // nothing from the others yet
  v.theirs(4, "r1c", 0x900d);
  CHECK_FALSE(v.decide(4, "r1b", 2).has_value()); // r1a still missing
  v.theirs(4, "r1a", 0x900d);
  auto d = v.decide(4, "r1b", 2);
  REQUIRE(d.has_value());
  CHECK(d->diverged);
  CHECK(d->source == "r1a");
  CHECK_FALSE(v.decide(4, "r1b", 2).has_value()); // decided once

  // Two replicas that differ: the lowest name wins, so r1 keeps its weights and r1b loads.
  replica_vote a, b;
  a.mine(7, 1);
  b.mine(7, 2);
  a.theirs(7, "r1b", 2);
  b.theirs(7, "r1", 1);
  auto at_a = a.decide(7, "r1", 1);
  auto at_b = b.decide(7, "r1b", 1);
  REQUIRE((at_a && at_b));
  CHECK_FALSE(at_a->diverged);
  CHECK(at_b->diverged);
  CHECK(at_b->source == "r1");

  // The other's hash first, this replica's step later: decided when its own hash comes.
  replica_vote late;
  late.theirs(9, "r1", 5);
  CHECK_FALSE(late.decide(9, "r1b", 1).has_value());
  late.mine(9, 5);
  auto agreed = late.decide(9, "r1b", 1);
  REQUIRE(agreed.has_value());
  CHECK_FALSE(agreed->diverged);

  // A vote that never completes is forgotten eight iterations later.
  replica_vote stale;
  stale.mine(1, 3);
  stale.mine(20, 3);
  stale.theirs(1, "r1", 4);
  stale.theirs(20, "r1", 3);
  CHECK(stale.decide(20, "r1b", 1).has_value());
  CHECK_FALSE(stale.decide(1, "r1b", 1).has_value());
}

TEST_CASE("link emulator: latency plus bytes over bandwidth, queued per link, slowed on demand") {
  routing::network_matrix m;
  m.name = "t";
  m.regions = {"a", "b"};
  m.latency_ms = {{0, 10}, {10, 0}};
  m.bandwidth_mbps = {{1000, 8}, {8, 1000}}; // 8 Mbit/s = 1 MB/s
  link_emulator e{m};
  REQUIRE(e.place("x", "a"));
  REQUIRE(e.place("y", "b"));
  CHECK_FALSE(e.place("z", "nowhere"));
  auto t1 = e.deliver_at("x", "y", 1'000'000, 0.0);
  REQUIRE(t1.has_value());
  CHECK(*t1 == doctest::Approx(1.0 + 0.010));
  auto t2 = e.deliver_at("x", "y", 500'000, 0.5); // waits for the first transfer
  CHECK(*t2 == doctest::Approx(1.5 + 0.010));
  auto back = e.deliver_at("y", "x", 0, 0.5);    // the other direction is its own queue
  CHECK(*back == doctest::Approx(0.510));
  e.slow_down("x", "y", 4);
  CHECK(e.link("y", "x")->latency_ms == doctest::Approx(40));
  CHECK(e.link("x", "y")->bandwidth_mbps == doctest::Approx(2));
  CHECK_FALSE(e.deliver_at("x", "nobody", 1, 0).has_value());
}

TEST_CASE("link emulator: a host's card is shared by all its links, in both directions") {
  // x sends to y and z over 1000 Mbit/s links through an 8 Mbit/s uplink: the two transfers
  // queue on the card, the second ends after both. z's 4 Mbit/s downlink caps what it gets.
  routing::network_matrix m;
  m.name = "t";
  m.regions = {"a", "b"};
  m.latency_ms = {{0, 10}, {10, 0}};
  m.bandwidth_mbps = {{1000, 1000}, {1000, 1000}};
  m.intra_region = {0, 1000};
  link_emulator e{m};
  REQUIRE(e.place("x", "a"));
  REQUIRE(e.place("y", "b"));
  REQUIRE(e.place("z", "b"));
  REQUIRE(e.place("w", "b"));
  e.limit("x", 8, 0);
  e.limit("z", 0, 4);
  CHECK(*e.deliver_at("x", "y", 1'000'000, 0.0) == doctest::Approx(1.0 + 0.010));
  CHECK(*e.deliver_at("x", "w", 1'000'000, 0.0) == doctest::Approx(2.0 + 0.010)); // behind the first on the card
  CHECK(*e.deliver_at("y", "z", 1'000'000, 0.0) == doctest::Approx(2.0));         // z's downlink: 4 Mbit/s
  CHECK(*e.deliver_at("w", "z", 500'000, 0.0) == doctest::Approx(3.0));           // queued behind it
  CHECK(*e.deliver_at("y", "w", 1'000'000, 0.0) == doctest::Approx(0.008));       // no card on this path
  CHECK(e.link("x", "y")->bandwidth_mbps == doctest::Approx(8));                  // what a probe measures
  CHECK(e.link("y", "z")->bandwidth_mbps == doctest::Approx(4));
  CHECK(e.link("y", "x")->bandwidth_mbps == doctest::Approx(1000)); // x's downlink is free
}

TEST_CASE("link emulator: in node mode a host emulates its own downlink on what reaches it, in arrival order") {
  routing::network_matrix m;
  m.name = "t";
  m.regions = {"a"};
  m.latency_ms = {{0}};
  m.bandwidth_mbps = {{1000}};
  m.intra_region = {1000};
  link_emulator e{m};
  REQUIRE(e.place("me", "a"));
  CHECK(e.receive_at("me", 1'000'000, 5.0) == 5.0); // no downlink limit: as it arrives
  e.limit("me", 0, 8);                              // 8 Mbit/s down: 1 MB takes 1 s
  CHECK(e.receive_at("me", 1'000'000, 5.0) == doctest::Approx(6.0));
  CHECK(e.receive_at("me", 500'000, 5.2) == doctest::Approx(6.5));  // queued behind the first
  CHECK(e.receive_at("me", 1'000'000, 9.0) == doctest::Approx(10.0)); // the card was idle again
  CHECK(e.receive_at("nobody", 1'000'000, 9.0) == 9.0);
}

TEST_CASE("link emulator: a control frame waits for one bulk fragment, not for the shares queued before it") {
  // x -> y at 8 Mbit/s (1 MB/s) through x's 8 Mbit/s card. 2 MB of bulk (a gradient share)
  // go at 0; a 100-byte heartbeat at 0.5 s waits for the 64 KiB fragment on the wire (at most
  // 0.065536 s) and its own bytes, on the link and the card alike; the bulk behind it yields
  // both for its 100 bytes, and what is sent after it queues as before.
  routing::network_matrix m;
  m.name = "t";
  m.regions = {"a", "b"};
  m.latency_ms = {{0, 10}, {10, 0}};
  m.bandwidth_mbps = {{1000, 8}, {8, 1000}};
  link_emulator e{m};
  REQUIRE(e.place("x", "a"));
  REQUIRE(e.place("y", "b"));
  e.limit("x", 8, 0);
  const double fragment = 65536.0 / 1e6, beat = 100.0 / 1e6;
  CHECK(*e.deliver_at("x", "y", 2'000'000, 0.0) == doctest::Approx(2.0 + 0.010));
  auto hb = *e.deliver_at("x", "y", 100, 0.5, peer_framing::control);
  CHECK(hb == doctest::Approx(0.5 + fragment + beat + 0.010));
  CHECK(*e.deliver_at("x", "y", 100, 0.5, peer_framing::control) == doctest::Approx(hb + beat)); // control keeps its order
  CHECK(*e.deliver_at("x", "y", 1'000'000, 0.5) == doctest::Approx(3.0 + 2 * beat + 0.010));
  // An idle link: a control frame goes at once, and bulk after it waits for it.
  CHECK(*e.deliver_at("y", "x", 1'000'000, 10.0, peer_framing::control) == doctest::Approx(11.0 + 0.010));
  CHECK(*e.deliver_at("y", "x", 1'000'000, 10.0) == doctest::Approx(12.0 + 0.010));
  // Node mode's downlink has the same two lanes.
  e.limit("y", 0, 8);
  CHECK(e.receive_at("y", 1'000'000, 20.0) == doctest::Approx(21.0));
  CHECK(e.receive_at("y", 100, 20.1, peer_framing::control) == doctest::Approx(20.1 + fragment + beat));
}

TEST_CASE("state download: chunks of the transfer in progress fill the blob, others are ignored") {
  using outcome = state_download::outcome;
  state_download d;
  auto chunk = [](std::uint64_t id, std::uint64_t offset, std::uint64_t total, std::vector<std::uint8_t> data) {
    return wire::state_chunk{id, 1, offset, total, std::move(data)};
  };
  CHECK(d.chunk("r1", chunk(7, 0, 4, {1, 2}), 1, 100) == outcome::ignored); // nothing asked for
  d.start("r1", 7);
  CHECK(d.active());
  CHECK(d.chunk("r2", chunk(7, 0, 4, {1, 2}), 1, 100) == outcome::ignored); // not the source
  CHECK(d.chunk("r1", chunk(8, 0, 4, {1, 2}), 1, 100) == outcome::ignored); // another transfer
  CHECK(d.chunk("r1", chunk(7, 0, 4, {1, 2}), 2, 100) == outcome::ignored); // another stage
  CHECK(d.chunk("r1", chunk(7, 0, 400, {1, 2}), 1, 100) == outcome::refused); // beyond the limit
  CHECK(d.chunk("r1", chunk(7, 3, 4, {1, 2}), 1, 100) == outcome::refused);   // past the end
  CHECK(d.chunk("r1", chunk(7, 2, 4, {3, 4}), 1, 100) == outcome::partial);  // any order
  CHECK(d.received() == 2);
  CHECK(d.chunk("r1", chunk(7, 2, 4, {3, 4}), 1, 100) == outcome::partial); // a duplicate counts once
  CHECK(d.received() == 2);
  CHECK(d.chunk("r1", chunk(7, 0, 4, {1, 2}), 1, 100) == outcome::complete);
  CHECK_FALSE(d.active());
  CHECK(d.take() == std::vector<std::uint8_t>{1, 2, 3, 4});
  CHECK(d.chunk("r1", chunk(7, 0, 4, {1, 2}), 1, 100) == outcome::ignored); // late, after completion
  // A new start forgets the old transfer; cancel ignores the rest of it.
  d.start("r2", 9);
  CHECK(d.chunk("r2", chunk(9, 0, 2, {5}), 1, 100) == outcome::partial);
  d.cancel();
  CHECK(d.chunk("r2", chunk(9, 1, 2, {6}), 1, 100) == outcome::ignored);
}

TEST_CASE("state download: an empty chunk of the source says it has none, other empty chunks are ignored") {
  using outcome = state_download::outcome;
  state_download d;
  d.start("r4", 11, true);
  CHECK(d.checkpoint());
  CHECK(d.chunk("r5", wire::state_chunk{11, 3, 0, 0, {}}, 3, 100) == outcome::ignored); // not the source
  CHECK(d.chunk("r4", wire::state_chunk{12, 3, 0, 0, {}}, 3, 100) == outcome::ignored); // another transfer
  CHECK(d.active());
  CHECK(d.chunk("r4", wire::state_chunk{11, 3, 0, 0, {}}, 3, 100) == outcome::declined);
  CHECK_FALSE(d.active());
  CHECK(d.source() == "r4"); // where the next source is counted from
  CHECK(d.chunk("r4", wire::state_chunk{11, 3, 0, 4, {1, 2, 3, 4}}, 3, 100) == outcome::ignored); // ended
}

TEST_CASE("state source: live replicas first, then every other host's kept checkpoint, then a new round") {
  std::vector<std::string> replicas{"r3a", "r3b"}, others{"dh1", "r1", "r2"};
  auto next = [&](const std::string& host, bool checkpoint, bool copies = true) {
    return choose_state_source(replicas, others, copies, {host, checkpoint});
  };
  auto first = next("", false);
  REQUIRE(first);
  CHECK(first->source == state_source{"r3a", false});
  CHECK_FALSE(first->wrapped);
  CHECK(next("r3a", false)->source == state_source{"r3b", false});
  CHECK(next("r3b", false)->source == state_source{"dh1", true}); // replicas done: the copies
  CHECK(next("dh1", true)->source == state_source{"r1", true});
  CHECK(next("r1", true)->source == state_source{"r2", true});
  auto round = next("r2", true);
  CHECK(round->wrapped); // everybody asked once: the caller waits before a new round
  CHECK(round->source == state_source{"r3a", false});
  // A source that left meanwhile is passed by its place in the order.
  CHECK(next("r10", true)->source == state_source{"r2", true});
  CHECK(next("r3aa", false)->source == state_source{"r3b", false});
  // Without copies (no iteration to resume at): the replicas only, as any joiner asks.
  CHECK(next("r3a", false, false)->source == state_source{"r3b", false});
  CHECK(next("r3b", false, false)->wrapped);
  // Nobody to ask.
  CHECK_FALSE(choose_state_source({}, others, false, {}).has_value());
  auto only_copies = choose_state_source({}, others, true, {});
  REQUIRE(only_copies);
  CHECK(only_copies->source == state_source{"dh1", true});
}

TEST_CASE("link estimator: queued probes do not swing the estimate, only the least round trips count") {
  link_estimator e{4};
  CHECK_FALSE(e.bulk(0.030, 65536)); // no small round trip yet
  e.small(0.020);
  auto first = e.bulk(0.030, 65536); // 64 KiB in 10 ms
  REQUIRE(first);
  CHECK(first->latency_s == doctest::Approx(0.010));
  CHECK(first->bandwidth_bytes_s == doctest::Approx(65536 / 0.010));
  // A small probe that waited behind an activation (would have given 65536 / 1 us), and a
  // bulk probe that waited too (65536 / 480 ms): neither moves the estimate.
  e.small(0.029);
  auto a = e.bulk(0.500, 65536);
  REQUIRE(a);
  CHECK(a->latency_s == doctest::Approx(0.010));
  CHECK(a->bandwidth_bytes_s == doctest::Approx(65536 / 0.010));
  // After the window, the link really got slower: the estimate follows.
  for (int i = 0; i < 4; ++i) {
    e.small(0.040);
    a = e.bulk(0.080, 65536);
  }
  REQUIRE(a);
  CHECK(a->latency_s == doctest::Approx(0.020));
  CHECK(a->bandwidth_bytes_s == doctest::Approx(65536 / 0.040));
  // Bad input is ignored.
  CHECK_FALSE(e.bulk(-1, 65536));
  CHECK_FALSE(e.bulk(0.1, 0));
  e.small(std::nan(""));
  CHECK(*e.least_small() == doctest::Approx(0.040));
}

namespace {

// A 4-stage cluster as its heartbeats describe it: holders at 0, relays at 1..3, each host
// keeping checkpoints of the given (stage, iteration) pairs.
restore_host holder(std::string name, std::vector<wire::held_checkpoint> held) {
  return {std::move(name), true, 0, std::move(held)};
}
restore_host relay(std::string name, std::int32_t stage, std::vector<wire::held_checkpoint> held) {
  return {std::move(name), false, stage, std::move(held)};
}

} // namespace

TEST_CASE("stage restore: the live data holder with the lowest name decides, relays never") {
  std::vector<restore_host> live{holder("dh-b", {}), holder("dh-a", {}), relay("a-relay", 1, {})};
  CHECK(decides_restore("dh-a", live));
  CHECK_FALSE(decides_restore("dh-b", live));
  CHECK_FALSE(decides_restore("a-relay", live)); // the lowest name, but no data holder
  live.erase(live.begin() + 1);                  // dh-a is gone: dh-b decides
  CHECK(decides_restore("dh-b", live));
}

TEST_CASE("stage restore: the cut is the newest iteration every stage has somewhere, copies included") {
  // Stage 3 is lost; its checkpoints survive as copies on r1 (iterations 2, 4) and dh-b (6).
  // Stage 2 has 4 and 6 but not 8; stage 0 has 8: the cut is 6 (stage 3's copy on dh-b).
  std::vector<restore_host> live{
    holder("dh-a", {{0, 4}, {0, 6}, {0, 8}}), holder("dh-b", {{0, 6}, {3, 6}}),
    relay("r1", 1, {{1, 4}, {1, 6}, {1, 8}, {3, 2}, {3, 4}}), relay("r1b", 1, {{1, 6}}),
    relay("r2", 2, {{2, 4}, {2, 6}}), relay("r2b", 2, {{2, 4}})};
  CHECK(lost_stages(4, live) == std::vector<std::uint32_t>{3});
  auto plan = plan_restore(4, 3, "dh-a", live, {"dh-a", "dh-b"});
  REQUIRE(std::holds_alternative<wire::restore>(plan));
  auto r = std::get<wire::restore>(plan);
  CHECK(r.stage == 3);
  CHECK(r.iteration == 6);
  CHECK(r.decided_by == "dh-a");
  // Stages 1 and 2 have two live relays each: the lower stage gives its first name.
  CHECK(r.restorer == "r1");
  CHECK(r.from_stage == 1);
  // Without dh-b's copy of 6, the cut falls back to 4 (r1's copy).
  live[1].checkpoints = {{0, 6}};
  CHECK(std::get<wire::restore>(plan_restore(4, 3, "dh-a", live, {"dh-a", "dh-b"})).iteration == 4);
}

TEST_CASE("stage restore: a relay without a stage restores first, else only a stage with a spare relay") {
  std::vector<wire::held_checkpoint> all{{0, 2}, {1, 2}, {2, 2}, {3, 2}};
  std::vector<restore_host> live{holder("dh-a", all), relay("r1", 1, {}), relay("r2", 2, {}), relay("r2b", 2, {}),
                                 relay("r2c", 2, {}), relay("r1b", 1, {})};
  auto from_stage_2 = std::get<wire::restore>(plan_restore(4, 3, "dh-a", live, {"dh-a", "dh-b"}));
  CHECK(from_stage_2.restorer == "r2"); // stage 2 has three, stage 1 two
  CHECK(from_stage_2.from_stage == 2);
  live.push_back(relay("zz-joiner", -1, {}));
  auto joiner = std::get<wire::restore>(plan_restore(4, 3, "dh-a", live, {"dh-a", "dh-b"}));
  CHECK(joiner.restorer == "zz-joiner");
  CHECK(joiner.from_stage == -1);
  // One relay per stage and nobody without a stage: nobody to spare.
  std::vector<restore_host> thin{holder("dh-a", all), relay("r1", 1, {}), relay("r2", 2, {})};
  auto none = plan_restore(4, 3, "dh-a", thin, {"dh-a", "dh-b"});
  REQUIRE(std::holds_alternative<std::string>(none));
  CHECK(std::get<std::string>(none)
        == "no relay to spare for stage 3: no relay without a stage and no stage with two live relays");
}

TEST_CASE("stage restore: no cut, a stage that is not lost, and orders a host refuses are named") {
  std::vector<restore_host> live{holder("dh-a", {{0, 4}, {1, 4}, {2, 4}}), relay("r1", 1, {}), relay("r1b", 1, {}),
                                 relay("r2", 2, {})};
  auto no_copy = plan_restore(4, 3, "dh-a", live, {"dh-a", "dh-b"});
  REQUIRE(std::holds_alternative<std::string>(no_copy));
  CHECK(std::get<std::string>(no_copy) == "no live host keeps a checkpoint of stage 3: stage 3 cannot be restored");
  live[0].checkpoints.push_back({3, 2});
  auto no_cut = plan_restore(4, 3, "dh-a", live, {"dh-a", "dh-b"});
  REQUIRE(std::holds_alternative<std::string>(no_cut));
  CHECK(std::get<std::string>(no_cut).rfind("no iteration of which every stage has a checkpoint on a live host", 0) == 0);
  auto served = plan_restore(4, 2, "dh-a", live, {"dh-a", "dh-b"});
  REQUIRE(std::holds_alternative<std::string>(served));
  CHECK(std::get<std::string>(served) == "stage 2 is not lost: r2 serves it");
  CHECK(std::holds_alternative<std::string>(plan_restore(4, 4, "dh-a", live, {"dh-a", "dh-b"})));

  wire::restore order{3, 4, "r1", 1, "dh-a"};
  CHECK_FALSE(check_restore(order, 4, "r1", 1, false).has_value()); // the restorer, where the order says
  CHECK_FALSE(check_restore(order, 4, "r2", 2, false).has_value()); // another relay
  CHECK_FALSE(check_restore(order, 4, "dh-b", 0, false).has_value());
  CHECK(check_restore(order, 4, "r1", 2, false).value()
        == "it names this host as the restorer from stage 1, but this host is at stage 2");
  CHECK(check_restore(order, 4, "r3", 3, false).value() == "this host serves stage 3, which it calls lost");
  CHECK(check_restore(wire::restore{5, 4, "r1", 1, "dh-a"}, 4, "r2", 2, false).value()
        == "stage 5 is not a relay stage of this model (1..3)");
}

TEST_CASE("stage restore: a cluster started with plain --resume agrees on its cut once everyone is there") {
  // Every host's newest files differ: dh-a and r1 reached 8, the rest 6; stage 3's only
  // host kept 4 and 6. The cut is 6, not any host's newest.
  std::vector<restore_host> live{holder("dh-a", {{0, 6}, {0, 8}}), relay("r1", 1, {{1, 6}, {1, 8}}),
                                 relay("r2", 2, {{2, 4}, {2, 6}})};
  std::vector<std::string> holders{"dh-a", "dh-b"};
  auto early = plan_resume(4, holders, "dh-a", live);
  REQUIRE(std::holds_alternative<std::string>(early));
  CHECK(std::get<std::string>(early) == "data holder dh-b is not here yet");
  live.push_back(holder("dh-b", {{0, 6}}));
  CHECK(std::get<std::string>(plan_resume(4, holders, "dh-a", live)) == "no live host of stage 3 yet");
  live.push_back(relay("r3", 3, {{3, 4}, {3, 6}}));
  auto order = plan_resume(4, holders, "dh-a", live);
  REQUIRE(std::holds_alternative<wire::restore>(order));
  CHECK(std::get<wire::restore>(order) == wire::restore{0, 6, "", -1, "dh-a"});
  // Only a host waiting for its cut follows a resume order; a waiting host follows nothing else.
  auto resume = std::get<wire::restore>(order);
  CHECK_FALSE(check_restore(resume, 4, "r2", 2, true).has_value());
  CHECK(check_restore(resume, 4, "r2", 2, false).value() == "this host is not waiting for the cluster's cut to resume at");
  CHECK(check_restore(wire::restore{3, 4, "r1", 1, "dh-a"}, 4, "r2", 2, true).value()
        == "this host is waiting for the cluster's cut to resume at, not training");
}

TEST_CASE("stage restore: only the side of a partition with a quorum of the data holders restores") {
  std::vector<std::string> roster{"dh-b", "dh-a", "dh-c"};
  std::vector<wire::held_checkpoint> all{{0, 2}, {1, 2}, {2, 2}, {3, 2}};
  std::vector<restore_host> with_a{holder("dh-a", all), relay("r1", 1, {}), relay("r1b", 1, {}), relay("r2", 2, {})};
  CHECK_FALSE(holder_quorum(roster, with_a)); // 1 of 3
  auto refused = plan_restore(4, 3, "dh-a", with_a, roster);
  REQUIRE(std::holds_alternative<std::string>(refused));
  CHECK(std::get<std::string>(refused)
        == "this host sees 1 of the 3 data holders, no quorum (a partition?): only the side with more than half of "
           "them (half with the lowest-named) restores a stage");
  with_a.push_back(holder("dh-c", {}));
  CHECK(holder_quorum(roster, with_a)); // 2 of 3
  CHECK(std::holds_alternative<wire::restore>(plan_restore(4, 3, "dh-a", with_a, roster)));
  // Two holders split one and one: the side of the lowest name (dh-a) has it, the other not.
  std::vector<std::string> two{"dh-b", "dh-a"};
  CHECK(holder_quorum(two, {holder("dh-a", {})}));
  CHECK_FALSE(holder_quorum(two, {holder("dh-b", {}), relay("r1", 1, {})}));
  // A holder that is not in the roster counts for nothing.
  CHECK_FALSE(holder_quorum(two, {holder("dh-x", {}), holder("dh-b", {})}));
}

TEST_CASE("push pacer: pieces round robin over the copies, at the pace of each, a newer checkpoint replacing an older") {
  auto blob = [](std::size_t n, std::uint8_t v) { return std::make_shared<const std::vector<std::uint8_t>>(n, v); };
  push_pacer p{4, 1000.0}; // 4-byte pieces, 1000 bytes/s per copy
  p.add("r2", 7, 1, 4, blob(10, 1));
  p.add("dh-b", 8, 1, 4, blob(6, 2));
  std::vector<std::string> order;
  std::vector<std::uint64_t> offsets;
  std::vector<std::int64_t> gaps;
  std::size_t bytes = 0;
  while (auto piece = p.next()) {
    order.push_back(piece->to);
    offsets.push_back(piece->offset);
    CHECK(piece->total == (piece->to == "r2" ? 10u : 6u));
    CHECK(piece->data == std::vector<std::uint8_t>(piece->data.size(), piece->to == "r2" ? 1 : 2));
    bytes += piece->data.size();
    gaps.push_back(p.gap_us(piece->data.size()));
  }
  CHECK(order == std::vector<std::string>{"r2", "dh-b", "r2", "dh-b", "r2"});
  CHECK(offsets == std::vector<std::uint64_t>{0, 0, 4, 4, 8});
  CHECK(bytes == 16);
  // Two copies under way: a 4-byte piece every 2 ms (each copy at 1000 bytes/s); one left:
  // its 2-byte pieces 2 ms apart.
  CHECK(gaps == std::vector<std::int64_t>{2000, 2000, 2000, 2000, 2000});
  CHECK(p.empty());

  // The checkpoint of iteration 6 replaces the unfinished push of 4 to the same peer, not
  // another peer's, nor another stage's.
  p.add("r2", 9, 1, 4, blob(12, 3));
  p.add("r3", 10, 1, 4, blob(12, 3));
  p.add("r2", 11, 2, 4, blob(12, 3));
  REQUIRE(p.next()->transfer == 9);
  p.add("r2", 12, 1, 6, blob(8, 4));
  CHECK(p.pushes() == 3);
  std::vector<std::uint64_t> transfers;
  while (auto piece = p.next())
    transfers.push_back(piece->transfer);
  CHECK(std::count(transfers.begin(), transfers.end(), 9) == 0);
  CHECK(std::count(transfers.begin(), transfers.end(), 12) == 2);
  CHECK(std::count(transfers.begin(), transfers.end(), 10) == 3);
  CHECK(std::count(transfers.begin(), transfers.end(), 11) == 3);
}

namespace {

// What catch_up_messages returns, as (kind, iteration) pairs in order.
std::vector<std::pair<std::string, std::uint64_t>> kinds(const std::vector<wire::message>& ms) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (auto& m : ms) {
    std::uint64_t it = 0;
    if (auto* d = std::get_if<wire::iteration_done>(&m))
      it = d->iteration;
    else if (auto* n = std::get_if<wire::norm_share>(&m))
      it = n->iteration;
    else if (auto* g = std::get_if<wire::gradient_chunk>(&m))
      it = g->iteration;
    else if (auto* h = std::get_if<wire::replica_hash>(&m))
      it = h->iteration;
    out.emplace_back(wire::kind_name(m), it);
  }
  return out;
}

} // namespace

// A host met a peer late (a joiner, a replica that came up after this host had sent its
// part): the peer must get what it may still wait for. The share of the iteration just
// applied is the case a launch run once stalled on for good (a replica shared, averaged and
// stepped before it knew its stage-mate, which waited for that share).
TEST_CASE("catch-up: a peer met late gets the holder's report, the norms of this and the last iteration, and a stage-mate the shares and the hash") {
  using P = std::pair<std::string, std::uint64_t>;
  wire::iteration_done done;
  done.iteration = 7;
  std::map<std::uint64_t, wire::norm_share> norms;
  for (std::uint64_t i : {5, 6, 7})
    norms[i].iteration = i;
  wire::gradient_chunk last, now;
  last.iteration = 6;
  now.iteration = 7;
  wire::replica_hash hash;
  hash.iteration = 6;

  catch_up_state c;
  c.current = 7;
  c.same_stage = true;
  c.last_done = &done;
  c.norms = &norms;
  c.last_share = &last;
  c.current_share = &now;
  c.last_hash = &hash;
  CHECK(kinds(catch_up_messages(c)) == std::vector<P>{{"iteration_done", 7}, {"norm_share", 6}, {"norm_share", 7},
                                                      {"gradient_chunk", 6}, {"gradient_chunk", 7}, {"replica_hash", 6}});

  // A peer of another stage: no shares, no hash (they are its stage's business).
  c.same_stage = false;
  CHECK(kinds(catch_up_messages(c)) == std::vector<P>{{"iteration_done", 7}, {"norm_share", 6}, {"norm_share", 7}});

  // Older than the iteration just applied, or a report of another iteration: not sent.
  c.same_stage = true;
  last.iteration = 5;
  done.iteration = 6;
  c.current_share = nullptr;
  CHECK(kinds(catch_up_messages(c)) == std::vector<P>{{"norm_share", 6}, {"norm_share", 7}, {"replica_hash", 6}});

  // Nothing held yet (a fresh host at iteration 0): nothing to send.
  CHECK(catch_up_messages(catch_up_state{}).empty());
}

TEST_CASE("key digest: order-free, a doubled or missing microbatch changes it, holders' 0..n-1 as expected") {
  using gwtf::model::microbatch_id;
  auto key = [](std::uint32_t h, std::uint32_t j) { return microbatch_id{7, h, j}.key(); };
  // Holder 0's microbatches 0..2 and holder 2's 0..1, split over two replicas in any order.
  std::vector<std::uint64_t> a{key(0, 2), key(2, 1), key(0, 0)}, b{key(2, 0), key(0, 1)};
  auto expected = expected_digest(7, {{0, 3}, {2, 2}});
  CHECK(key_digest(a) + key_digest(b) == expected);
  std::reverse(a.begin(), a.end());
  CHECK(key_digest(a) + key_digest(b) == expected);
  // One added twice (the count is the same: the set skipped nothing it could see).
  auto doubled = b;
  doubled.push_back(key(0, 1));
  CHECK(key_digest(a) + key_digest(doubled) != expected);
  // One missing, one of another iteration, one of another holder.
  CHECK(key_digest(a) != expected - key_digest(b) + 1);
  auto other_iteration = b;
  other_iteration[0] = microbatch_id{8, 2, 0}.key();
  CHECK(key_digest(a) + key_digest(other_iteration) != expected);
  CHECK(key_digest(a) + key_digest({key(2, 0), key(1, 1)}) != expected);
  CHECK(key_digest({}) == 0);
  CHECK(expected_digest(7, {}) == 0);
}

TEST_CASE("SWARM's rebalancing: the lowest live data holder looks once a period, one move at a time") {
  rebalance_state s;
  // Off: never.
  CHECK(rebalance_due(s, 1000, 0, 20000, true, -1) == rebalance_turn::not_due);
  // The first look arms the clock: a period of measuring first.
  CHECK(rebalance_due(s, 1000, 10000, 20000, true, -1) == rebalance_turn::not_due);
  CHECK(s.next_ms == 11000);
  CHECK(rebalance_due(s, 10999, 10000, 20000, true, -1) == rebalance_turn::not_due);
  // Another holder decides: this one never looks (and keeps its clock).
  CHECK(rebalance_due(s, 11000, 10000, 20000, false, -1) == rebalance_turn::not_deciding);
  CHECK(s.next_ms == 11000);
  CHECK(rebalance_due(s, 11000, 10000, 20000, true, -1) == rebalance_turn::look);
  CHECK(s.next_ms == 21000);
  s.move = rebalance_state::ordered_move{"r3", 2, 11000};
  // Its mover still downloads (not live at 2 yet): no new move for a period, until it
  // serves stage 2 or the settle time passes.
  CHECK(rebalance_due(s, 21000, 10000, 20000, true, -1) == rebalance_turn::move_under_way);
  REQUIRE(s.move.has_value());
  CHECK(rebalance_due(s, 31000, 10000, 20000, true, 2) == rebalance_turn::look);
  CHECK_FALSE(s.move.has_value());
  s.move = rebalance_state::ordered_move{"r1", 3, 31000};
  CHECK(rebalance_due(s, 41000, 10000, 20000, true, 1) == rebalance_turn::move_under_way); // refused: still at 1
  CHECK(rebalance_due(s, 51000, 10000, 20000, true, 1) == rebalance_turn::look);           // 20 s: given up
  CHECK_FALSE(s.move.has_value());
}

TEST_CASE("SWARM's rebalancing: a relay follows a STAGE_MOVE only from a live data holder, for its stage, with a stage-mate left") {
  move_order_context c;
  c.swarm = true;
  c.from_live_holder = true;
  c.stage = 3;
  c.stages = 4;
  c.ready = true;
  c.stage_mates = 1;
  wire::stage_move m{2, 3, 40, "dh-a"};
  CHECK_FALSE(stage_move_refusal(m, "dh-a", c).has_value());
  auto refused = [&](move_order_context x, wire::stage_move order = wire::stage_move{2, 3, 40, "dh-a"}) {
    auto why = stage_move_refusal(order, "dh-a", x);
    REQUIRE(why.has_value());
    return *why;
  };
  auto x = c;
  x.swarm = false;
  CHECK(refused(x) == "this cluster routes with gwtf (routing.router), which moves no relay between stages");
  x = c;
  x.from_live_holder = false;
  CHECK(refused(x) == "dh-a is not a live data holder");
  x = c;
  x.stage = 1; // moved meanwhile, or a stale order
  CHECK(refused(x) == "this host is at stage 1, not 3");
  x = c;
  x.stage = 0; // a data holder never moves
  CHECK(refused(x, wire::stage_move{2, 1, 40, "dh-a"}) == "this host is at stage 0, not 1");
  CHECK(refused(c, wire::stage_move{4, 3, 40, "dh-a"}) == "the model has no relay stage 4");
  x = c;
  x.draining = true;
  CHECK(refused(x) == "it is leaving already");
  x = c;
  x.ready = false;
  CHECK(refused(x) == "it has no weights yet");
  x = c;
  x.stage_mates = 0;
  CHECK(refused(x) == "it is the last live replica of stage 3");
}
