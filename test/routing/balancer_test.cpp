#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "balancer_bus.hpp"
#include "routing/optimum.hpp"

using namespace gwtf;

namespace {

routing::optimum_result oracle(const test::flow_instance& in, const std::set<std::string>& dead = {}) {
  std::vector<routing::flow_node> nodes;
  std::vector<std::size_t> map;
  for (std::size_t i = 0; i < in.ids.size(); ++i)
    if (dead.count(in.ids[i]) == 0) {
      nodes.push_back({in.stage[i], in.capacity[i]});
      map.push_back(i);
    }
  return routing::max_flow_min_cost(nodes, in.stages, [&](std::size_t a, std::size_t b) {
    return in.cost[map[a]][map[b]];
  });
}

// What every converged state must satisfy.
void check_valid(const test::flow_audit& a) {
  for (auto& p : a.problems)
    INFO(p);
  CHECK_FALSE(a.over_capacity);
  CHECK_FALSE(a.through_dead);
  CHECK(a.broken == 0);
  CHECK(a.orphans == 0);
  CHECK(a.cost_mismatches == 0);
}

// Three hosts per ring: holder dh (capacity 2), a and b at stage 1, c and d at stage 2, all of
// capacity 1. Greedy building puts the first flow on dh-a-c (0.3) and leaves dh-b-d (1.2);
// the min-max optimum is dh-a-d and dh-b-c (0.5 each), one exchange away.
test::flow_instance crossed() {
  test::flow_instance in;
  in.stages = 3;
  in.ids = {"dh", "a", "b", "c", "d"};
  in.stage = {0, 1, 1, 2, 2};
  in.capacity = {2, 1, 1, 1, 1};
  in.cost.assign(5, std::vector<double>(5, 0.1));
  auto set = [&](int x, int y, double c) { in.cost[x][y] = in.cost[y][x] = c; };
  set(1, 3, 0.1); // a-c
  set(2, 4, 1.0); // b-d
  set(1, 4, 0.3); // a-d
  set(2, 3, 0.3); // b-c
  return in;
}

} // namespace

TEST_CASE("balancer: one ring through one relay per stage") {
  test::flow_instance in;
  in.stages = 3;
  in.ids = {"dh", "a", "b"};
  in.stage = {0, 1, 2};
  in.capacity = {2, 5, 5};
  in.cost = {{0, 0.1, 0.2}, {0.1, 0, 0.3}, {0.2, 0.3, 0}};
  test::balancer_bus bus{in, 1, 0.0};
  bus.run(5);
  auto a = test::audit(bus, in);
  CHECK(a.complete == 2); // the holder's capacity
  CHECK(a.broken == 0);
  CHECK(a.orphans == 0);
  CHECK(a.max_cost == doctest::Approx(0.1 + 0.3 + 0.2));
  CHECK(*bus.nodes().at("a").cost_to("dh") == doctest::Approx(0.3 + 0.2));
}

TEST_CASE("balancer: 100 random instances with reordered, delayed messages reach the maximum flow") {
  int reached = 0;
  std::vector<double> cost_ratio;
  std::vector<double> certified; // against the oracle's lower bound: a guaranteed distance
  int proposed = 0, redirects = 0, swaps = 0, worsening = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    auto in = test::flow_instance::random(seed);
    test::balancer_bus bus{in, seed, 0.1};
    bus.run(40);
    bus.settle();
    proposed += bus.moves().proposed;
    redirects += bus.moves().redirects;
    swaps += bus.moves().swaps;
    worsening += bus.moves().worsening;
    auto a = test::audit(bus, in);
    auto best = oracle(in);
    INFO("seed " << seed);
    check_valid(a);
    CHECK(a.complete <= best.flows);
    reached += a.complete == best.flows ? 1 : 0;
    auto mm = routing::max_flow_min_max(
      [&] {
        std::vector<routing::flow_node> v;
        for (std::size_t i = 0; i < in.ids.size(); ++i)
          v.push_back({in.stage[i], in.capacity[i]});
        return v;
      }(),
      in.stages, [&](std::size_t x, std::size_t y) { return in.cost[x][y]; });
    if (a.complete == best.flows && best.flows > 0) {
      cost_ratio.push_back(a.max_cost / mm.max_path_cost_s);
      certified.push_back(a.max_cost / mm.lower_bound_s);
    }
  }
  std::sort(cost_ratio.begin(), cost_ratio.end());
  std::sort(certified.begin(), certified.end());
  MESSAGE("moves: " << proposed << " proposed, " << redirects << " redirects, " << swaps << " swaps, "
          << worsening << " let through by the annealing (each counted by both sides)");
  MESSAGE("max flow reached on " << reached << " of 100; max ring cost / best known min-max: median "
          << cost_ratio[cost_ratio.size() / 2] << ", 90th percentile "
          << cost_ratio[cost_ratio.size() * 9 / 10] << "; / proven lower bound: median "
          << certified[certified.size() / 2] << ", 90th percentile "
          << certified[certified.size() * 9 / 10]);
  CHECK(reached >= 90);
  // With the annealing moves (greedy building alone: median 1.10, 90th percentile 1.24).
  CHECK(cost_ratio[cost_ratio.size() / 2] <= 1.08);
  CHECK(cost_ratio[cost_ratio.size() * 9 / 10] <= 1.22);
}

TEST_CASE("balancer: data holders share the flows max-min fairly (within one), with reordered and lost messages") {
  int cases = 0, unfair = 0;
  for (std::uint64_t seed = 1; seed <= 80; ++seed) {
    auto in = test::flow_instance::random(seed);
    if (std::count(in.stage.begin(), in.stage.end(), 0) < 2)
      continue;
    double drop = seed % 2 == 0 ? 0.02 : 0.0;
    test::balancer_bus bus{in, seed, 0.1, {}, {}, drop};
    bus.run(60);
    bus.heal();
    // 60 ticks after the losses end (40 were enough while moved flows bounced between
    // peers: completed moves keep the rings changing a little longer; at 40, 3 of 56 were
    // caught mid-way, at 60, 90 and 140 none).
    bus.run(60);
    bus.settle();
    auto a = test::audit(bus, in);
    INFO("seed " << seed << ", drop " << drop);
    check_valid(a);
    // Max-min fair within one: no holder that wants more (below its capacity) has two flows
    // fewer than another holder.
    std::vector<std::pair<int, int>> holders; // flows, capacity
    for (std::size_t i = 0; i < in.ids.size(); ++i)
      if (in.stage[i] == 0) {
        int built = 0;
        for (auto& [fid, f] : bus.nodes().at(in.ids[i]).flows())
          built += f.built ? 1 : 0;
        holders.emplace_back(built, in.capacity[i]);
      }
    bool fair = true;
    std::string shares;
    for (auto& [have, cap] : holders) {
      shares += " " + std::to_string(have) + "/" + std::to_string(cap);
      for (auto& [other, ocap] : holders)
        fair = fair && !(have < cap && other >= have + 2);
    }
    if (!fair)
      MESSAGE("not fair within one: seed " << seed << ", drop " << drop << ", flows/capacity per holder:" << shares);
    CHECK(a.complete == oracle(in).flows);
    ++cases;
    unfair += fair ? 0 : 1;
  }
  MESSAGE("max-min fair within one on " << cases - unfair << " of " << cases << " instances with 2-3 holders");
  REQUIRE(cases >= 30);
  // A snapshot catches some instance mid-way (a ring being rebuilt after an annealing move);
  // without the fair-share handovers 21 of these 56 are unfair.
  CHECK(unfair * 20 <= cases);
}

TEST_CASE("balancer: crashes of relays and data holders are absorbed, nothing runs through the dead") {
  int recovered = 0;
  int cases = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    auto in = test::flow_instance::random(seed);
    test::balancer_bus bus{in, seed, 0.1};
    bus.run(30);
    // Crash one node per relay stage that has a spare replica, and sometimes a data holder.
    std::mt19937_64 rng{seed * 7919};
    std::set<std::string> crashed;
    for (int s = 1; s < in.stages; ++s) {
      std::vector<std::string> at;
      for (std::size_t i = 0; i < in.ids.size(); ++i)
        if (in.stage[i] == s)
          at.push_back(in.ids[i]);
      if (at.size() > 1 && rng() % 2 == 0)
        crashed.insert(at[rng() % at.size()]);
    }
    int holders = static_cast<int>(std::count(in.stage.begin(), in.stage.end(), 0));
    if (holders > 1 && rng() % 3 == 0)
      crashed.insert("dh0");
    for (auto& id : crashed)
      bus.crash(id);
    bus.run(40);
    bus.settle();
    auto a = test::audit(bus, in);
    auto best = oracle(in, crashed);
    INFO("seed " << seed << ", crashed " << crashed.size());
    check_valid(a);
    ++cases;
    recovered += a.complete == best.flows ? 1 : 0;
  }
  MESSAGE("after crashes, max flow restored on " << recovered << " of " << cases << " instances");
  CHECK(recovered >= cases * 9 / 10);
}

TEST_CASE("balancer: a relay joining the bottleneck stage raises the flow count") {
  test::flow_instance in;
  in.stages = 3;
  in.ids = {"dh", "a", "b", "b2"};
  in.stage = {0, 1, 2, 2};
  in.capacity = {6, 6, 2, 3};
  in.cost.assign(4, std::vector<double>(4, 0.1));
  test::balancer_bus bus{in, 3, 0.1, {}, {"b2"}};
  bus.run(20);
  bus.settle();
  CHECK(test::audit(bus, in).complete == 2); // stage 2 (b, capacity 2) is the bottleneck
  bus.resume_moves();
  bus.join("b2");
  bus.run(20);
  bus.settle();
  auto a = test::audit(bus, in);
  CHECK(a.complete == 5);
  CHECK(a.orphans == 0);
}

TEST_CASE("balancer: with 2% of messages lost, anti-entropy leaves no orphans and the flow recovers") {
  int reached = 0;
  int cases = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    auto in = test::flow_instance::random(seed);
    test::balancer_bus bus{in, seed, 0.1, {}, {}, 0.02};
    bus.run(60);
    // Crash a relay while messages are being lost, then let the network heal and settle.
    for (std::size_t i = 0; i < in.ids.size(); ++i)
      if (in.stage[i] == 1 && std::count(in.stage.begin(), in.stage.end(), 1) > 1) {
        bus.crash(in.ids[i]);
        break;
      }
    bus.run(40);
    bus.heal();
    bus.run(40);
    bus.settle();
    auto a = test::audit(bus, in);
    auto best = oracle(in, bus.dead());
    INFO("seed " << seed);
    check_valid(a);
    ++cases;
    reached += a.complete == best.flows ? 1 : 0;
  }
  MESSAGE("with message loss and a crash, max flow reached on " << reached << " of " << cases);
  CHECK(reached >= cases * 9 / 10);
}

TEST_CASE("balancer: a SWAP takes the greedy flows to the min-max optimum, without moves they stay") {
  auto in = crossed();
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    INFO("seed " << seed);
    // b comes late: the first flow takes dh-a-c, the second can only take dh-b-d.
    test::balancer_bus still{in, seed, 0.1, {}, {"b"}};
    still.settle(10); // moves off from the start: greedy building only
    still.join("b");
    still.settle(30);
    auto greedy = test::audit(still, in);
    check_valid(greedy);
    CHECK(greedy.complete == 2);
    CHECK(greedy.max_cost == doctest::Approx(1.2));
    CHECK(still.moves().swaps == 0);

    test::balancer_bus bus{in, seed, 0.1, {}, {"b"}};
    bus.run(10);
    bus.join("b");
    bus.run(80);
    bus.settle();
    auto a = test::audit(bus, in);
    check_valid(a);
    CHECK(a.complete == 2);
    CHECK(a.max_cost == doctest::Approx(0.5));
    CHECK(bus.moves().swaps >= 2); // counted by both sides
  }
}

TEST_CASE("balancer: a REDIRECT hands a flow to a cheaper replica that joined with spare capacity") {
  // dh -> a -> dh built while a2 (cheaper, same stage) is offline; a2 joins: no new flow can
  // be built (dh's capacity is 1), only a move can use it.
  test::flow_instance in;
  in.stages = 2;
  in.ids = {"dh", "a", "a2"};
  in.stage = {0, 1, 1};
  in.capacity = {1, 3, 3};
  in.cost = {{0, 0.5, 0.2}, {0.5, 0, 0.1}, {0.2, 0.1, 0}};
  test::balancer_bus bus{in, 4, 0.1, {}, {"a2"}};
  bus.run(10);
  CHECK(test::audit(bus, in).max_cost == doctest::Approx(1.0));
  bus.join("a2");
  bus.run(20);
  bus.settle();
  auto a = test::audit(bus, in);
  check_valid(a);
  CHECK(a.complete == 1);
  CHECK(a.max_cost == doctest::Approx(0.4));
  CHECK(bus.moves().redirects >= 2);
  CHECK(bus.nodes().at("a2").flows().size() == 1);
  CHECK(bus.nodes().at("a").flows().empty());
}

TEST_CASE("balancer: one outstanding proposal per node, proposals about flows it does not hold are refused") {
  routing::gwtf_config cfg;
  routing::flow_balancer me{"a", 1, 3, 1, cfg, 7};
  me.add_peer("dh", 0, 0.1);
  me.add_peer("c", 2, 0.1);
  me.add_peer("b", 1, 0);
  me.add_peer("q", 1, 0);
  // b lists a flow that would be cheaper here (spare slot: a REDIRECT).
  wire::flow_entry g{42, "dh", "dh", "c", 0.0, 0.4, 0.9, 0.1};
  CHECK(me.handle("b", wire::flow_listing{"b", {g}}, 1).empty());
  auto out = me.tick(1);
  const wire::move_proposal* sent = nullptr;
  for (auto& o : out)
    if (auto* p = std::get_if<wire::move_proposal>(&o.msg); p && o.to == "b")
      sent = p;
  REQUIRE(sent != nullptr);
  CHECK(sent->kind == wire::move_kind::redirect);
  REQUIRE(sent->flows.size() == 1);
  CHECK(sent->flows[0].in_cost == doctest::Approx(0.1));  // our edges, for b to judge
  CHECK(sent->flows[0].out_cost == doctest::Approx(0.1));
  CHECK(me.spare() == 1); // proposing hides no capacity from flow building

  // While it waits, a proposal from q is refused, whatever it offers.
  auto answer = me.handle("q", wire::move_proposal{9, wire::move_kind::redirect, {g}, 1.4, 0.3, 1.7}, 1);
  REQUIRE(answer.size() == 1);
  auto* r = std::get_if<wire::move_response>(&answer[0].msg);
  REQUIRE(r != nullptr);
  CHECK_FALSE(r->accepted);
  auto second = me.tick(2);
  CHECK(std::none_of(second.begin(), second.end(), [](auto& o) {
    return std::holds_alternative<wire::move_proposal>(o.msg); // no second proposal
  }));
  CHECK(me.moves().proposed == 1);

  // b refuses: the slot is free again, and a later proposal about a flow a does not hold,
  // from b, is refused too (no state change).
  CHECK(me.handle("b", wire::move_response{sent->proposal_id, false, 0}, 2).empty());
  me.set_moves(false);
  auto bogus = me.handle("b", wire::move_proposal{10, wire::move_kind::redirect, {g}, 1.4, 0.3, 1.7}, 3);
  REQUIRE(bogus.size() == 1);
  CHECK_FALSE(std::get<wire::move_response>(bogus[0].msg).accepted);
  CHECK(me.flows().empty());
}

TEST_CASE("balancer: a freed path is handed only to a request from the hop that cancelled the flow") {
  routing::flow_balancer relay{"r2", 2, 4, 1, routing::gwtf_config{}};
  relay.add_peer("r1-a", 1, 0.2);
  relay.add_peer("r1-b", 1, 0.2);
  relay.add_peer("r3", 3, 0.2);
  relay.handle("r3", wire::message{wire::cost_advert{{wire::target_cost{"dh", 0.1, -1}}}}, 0);
  auto sent_to = [](const std::vector<routing::outgoing>& out, const std::string& to) {
    for (auto& o : out)
      if (o.to == to)
        return &o.msg;
    return static_cast<const wire::message*>(nullptr);
  };
  // Flow 7 for dh through r1-a -> r2 -> r3, built.
  auto out = relay.handle("r1-a", wire::message{wire::flow_request{7, "dh", 0.3, 0, 0}}, 1);
  REQUIRE(sent_to(out, "r3") != nullptr);
  relay.handle("r3", wire::message{wire::flow_response{7, true, wire::reject_reason::none, 0.1, 0}}, 1);
  REQUIRE(relay.flows().at(7).built);
  // r1-a gives it up for another holder's flow 8, which follows the cancel.
  relay.handle("r1-a", wire::message{wire::flow_sync{wire::sync_kind::cancel, 7, "dh", 0.0, {}, 0}}, 2);
  CHECK(relay.flows().count(7) == 0);
  // Another upstream naming the freed flow gets nothing from it (here: no path is advertised).
  out = relay.handle("r1-b", wire::message{wire::flow_request{9, "dh2", 0.3, 0, 7}}, 2);
  CHECK(relay.flows().count(9) == 0);
  REQUIRE(sent_to(out, "r1-b") != nullptr);
  CHECK_FALSE(std::get<wire::flow_response>(*sent_to(out, "r1-b")).accepted);
  // The hop that cancelled it hands the path on: the request goes to r3, still naming flow 7.
  out = relay.handle("r1-a", wire::message{wire::flow_request{8, "dh2", 0.0, 0, 7}}, 2);
  REQUIRE(relay.flows().count(8) == 1);
  auto* fwd = sent_to(out, "r3");
  REQUIRE(fwd != nullptr);
  CHECK(std::get<wire::flow_request>(*fwd).flow_id == 8);
  CHECK(std::get<wire::flow_request>(*fwd).replaces == 7);
}

// A holder with 4 flows and two first-stage relays; a is a little cheaper than b, and one
// microbatch occupies either link for 0.5 s. Without the link's load every flow takes a (the
// fourth waits 1.5 s behind the others on that link); with it they split 2-2. Building only:
// the annealing moves judge bare ring costs (docs/routing.md, "Link load") and would hand
// b's flows to a.
TEST_CASE("balancer: link load spreads a holder's flows over parallel links, without it they share one") {
  test::flow_instance in;
  in.stages = 2;
  in.ids = {"dh", "a", "b"};
  in.stage = {0, 1, 1};
  in.capacity = {4, 8, 8};
  in.cost = {{0, 1.0, 1.2}, {1.0, 0, 0}, {1.2, 0, 0}};
  in.link = {{0, 0.5, 0.5}, {0.5, 0, 0}, {0.5, 0, 0}};
  for (bool load : {true, false}) {
    INFO("link_load " << load);
    routing::gwtf_config cfg;
    cfg.link_load = load;
    test::balancer_bus bus{in, 3, 0.0, cfg};
    bus.settle(8);
    auto a = test::audit(bus, in);
    check_valid(a);
    CHECK(a.complete == 4);
    auto on = [&](const std::string& relay) {
      int n = 0;
      for (auto& [id, f] : bus.nodes().at("dh").flows())
        n += f.built && f.next == relay;
      return n;
    };
    CHECK(on("a") == (load ? 2 : 4));
    CHECK(on("b") == (load ? 2 : 0));
    // A relay's advert is the cost of one more flow: its own flows back to dh load its link.
    CHECK(*bus.nodes().at("a").cost_to("dh") == doctest::Approx(1.0 + (load ? 0.5 * on("a") : 0.0)));
  }
}

// One relay x (stage 1 of 3) carries a built flow of dh through a (0.2 there, 0.2 back to dh).
// A probe then finds its link to b far cheaper and b advertises 0.05 to dh: on the re-route
// tick x cancels the flow at a and requests it from b; with reroute_gain 0 it stays.
TEST_CASE("balancer: a built flow moves to a next hop that costs reroute_gain less, the old one is cancelled") {
  for (double gain : {0.3, 0.0}) {
    INFO("reroute_gain " << gain);
    routing::gwtf_config cfg;
    cfg.reroute_gain = gain;
    routing::flow_balancer x{"x", 1, 3, 4, cfg};
    x.add_peer("dh", 0, 0.1);
    x.add_peer("a", 2, 0.2);
    x.add_peer("b", 2, 1.0);
    x.handle("a", wire::cost_advert{{{"dh", 0.2, -4}}}, 0);
    x.handle("b", wire::cost_advert{{{"dh", 5.0, -4}}}, 0);
    auto fwd = x.handle("dh", wire::flow_request{7, "dh", 0.4, 1, 0}, 0);
    REQUIRE(fwd.size() == 1);
    CHECK(fwd[0].to == "a");
    x.handle("a", wire::flow_response{7, true, wire::reject_reason::none, 0.2, -3}, 0);
    REQUIRE(x.flows().at(7).built);
    x.add_peer("b", 2, 0.05);
    x.handle("b", wire::cost_advert{{{"dh", 0.05, -4}}}, 0);
    bool cancelled = false, requested = false;
    for (std::int64_t now = 1; now <= 3; ++now)
      for (auto& o : x.tick(now)) {
        if (auto* s = std::get_if<wire::flow_sync>(&o.msg); s && s->kind == wire::sync_kind::cancel)
          cancelled |= o.to == "a" && s->flow_id == 7;
        if (auto* r = std::get_if<wire::flow_request>(&o.msg))
          requested |= o.to == "b" && r->flow_id == 7;
      }
    CHECK(cancelled == (gain > 0));
    CHECK(requested == (gain > 0));
    CHECK(x.flows().at(7).next == (gain > 0 ? "b" : "a"));
    CHECK(x.moves().reroutes == (gain > 0 ? 1 : 0));
  }
}

// The re-route case above, with a microbatch of dh in flight at x during ticks 1-5
// (idle_moves): the re-route waits and happens at the first tick after; with idle_moves off
// it happens on the re-route tick, microbatch or not.
TEST_CASE("balancer: with idle_moves a re-route waits until no microbatch of the flow's holder is in flight") {
  for (bool idle : {true, false}) {
    INFO("idle_moves " << idle);
    routing::gwtf_config cfg;
    cfg.idle_moves = idle;
    routing::flow_balancer x{"x", 1, 3, 4, cfg};
    bool in_flight = true;
    std::vector<std::pair<std::string, std::string>> asked;
    x.set_in_flight([&](const std::string& target, const std::string& next) {
      asked.emplace_back(target, next);
      return in_flight;
    });
    x.add_peer("dh", 0, 0.1);
    x.add_peer("a", 2, 0.2);
    x.handle("a", wire::cost_advert{{{"dh", 0.2, -4}}}, 0);
    x.handle("dh", wire::flow_request{7, "dh", 0.4, 1, 0}, 0);
    x.handle("a", wire::flow_response{7, true, wire::reject_reason::none, 0.2, -3}, 0);
    REQUIRE(x.flows().at(7).built);
    x.add_peer("b", 2, 0.05);
    x.handle("b", wire::cost_advert{{{"dh", 0.05, -4}}}, 0);
    std::int64_t moved_at = -1;
    for (std::int64_t now = 1; now <= 9 && moved_at < 0; ++now) {
      in_flight = now <= 5;
      for (auto& o : x.tick(now))
        if (auto* s = std::get_if<wire::flow_sync>(&o.msg); s && s->kind == wire::sync_kind::cancel && o.to == "a")
          moved_at = now;
    }
    // The re-route tick is 1 (anti_entropy_ticks 3: ticks 1, 4, 7); waiting, every tick.
    CHECK(moved_at == (idle ? 6 : 1));
    CHECK(x.flows().at(7).next == "b");
    CHECK(x.moves().reroutes == 1);
    CHECK(x.moves().deferred == (idle ? 5 : 0));
    if (idle) {
      REQUIRE_FALSE(asked.empty());
      CHECK(std::all_of(asked.begin(), asked.end(), [](auto& t) { return t == std::pair<std::string, std::string>{"dh", "a"}; }));
    }
  }
}

// A same-stage peer offers to take flow 7 (REDIRECT, far cheaper there): while a microbatch
// of dh is in flight here the offer is refused and 7 stays; once none is, it is handed over.
TEST_CASE("balancer: with idle_moves a relay hands over no flow whose holder has a microbatch in flight") {
  routing::gwtf_config cfg;
  cfg.reroute_gain = 0;
  cfg.idle_moves = true;
  routing::flow_balancer a{"a", 1, 3, 1, cfg, 3};
  bool in_flight = true;
  a.set_in_flight([&](const std::string& target, const std::string& next) {
    return target == "dh" && next == "c" && in_flight;
  });
  a.add_peer("dh", 0, 0.1);
  a.add_peer("b", 1, 0);
  a.add_peer("c", 2, 0.5);
  a.handle("c", wire::cost_advert{{{"dh", 0.1, -4}}}, 0);
  a.handle("dh", wire::flow_request{7, "dh", 0.6, 1, 0}, 0);
  a.handle("c", wire::flow_response{7, true, wire::reject_reason::none, 0.1, -3}, 0);
  a.handle("dh", wire::flow_sync{wire::sync_kind::confirm, 7, "dh", 0.0, {}, 1}, 0);
  REQUIRE(a.flows().at(7).built);
  auto offer = [&](std::uint64_t id, std::int64_t now) {
    auto out = a.handle("b", wire::move_proposal{id, wire::move_kind::redirect,
                                                 {wire::flow_entry{7, "dh", "dh", "c", 0.0, 0.1, 0.1, 0.1}}, 0.8, 0.3, 0.8},
                        now);
    for (auto& o : out)
      if (auto* r = std::get_if<wire::move_response>(&o.msg))
        return r->accepted;
    return false;
  };
  CHECK_FALSE(offer(1, 1));
  CHECK(a.flows().count(7) == 1);
  CHECK(a.moves().deferred == 1);
  in_flight = false;
  CHECK(offer(2, 2));
  CHECK(a.flows().count(7) == 0);
}

// A SWAP offered to x: the proposer's flow f (holder dh2, of which x knows no flow: counted as
// one round) would cost 1.5 here instead of 1.0 there, x's flow g (holder dh1, its only
// flow: four rounds) 0.9 there instead of 1.2 here. The largest ring grows (1.2 -> 1.5): the
// ring objective refuses. dh1's time falls from 4 x 1.2 to 4 x 0.9 while dh2's grows from 1.0
// to 1.5: the completion objective accepts.
TEST_CASE("balancer: the completion objective weighs a ring by its holder's rounds, the ring objective does not") {
  for (auto objective : {routing::move_objective::completion, routing::move_objective::ring}) {
    INFO("objective " << static_cast<int>(objective));
    routing::gwtf_config cfg;
    cfg.objective = objective;
    cfg.initial_temperature = 0; // improving moves only
    cfg.min_temperature = 0;
    cfg.reroute_gain = 0;
    routing::flow_balancer x{"x", 1, 3, 1, cfg, 5};
    x.set_microbatches(4);
    x.add_peer("dh1", 0, 0.1);
    x.add_peer("dh2", 0, 0.5);
    x.add_peer("c", 2, 0.5);
    x.add_peer("p", 1, 0);
    x.handle("c", wire::cost_advert{{{"dh1", 0.6, -4}, {"dh2", 0.5, -4}}}, 0);
    x.handle("dh1", wire::flow_request{7, "dh1", 1.2, 0, 0}, 0);
    x.handle("c", wire::flow_response{7, true, wire::reject_reason::none, 0.6, -3}, 0);
    x.handle("dh1", wire::flow_sync{wire::sync_kind::confirm, 7, "dh1", 0.0, {}, 1, 0.0}, 0);
    REQUIRE(x.flows().at(7).built);
    REQUIRE(x.ring_cost(x.flows().at(7)));
    CHECK(*x.ring_cost(x.flows().at(7)) == doctest::Approx(1.2));
    wire::flow_entry f{9, "dh2", "dh2", "c", 0.0, 0.1, 0.4, 0.5}; // p's, 1.0 there (x knows no flow of dh2: one round)
    wire::flow_entry g{7, "dh1", "dh1", "c", 0.0, 0.1, 0.2, 0.6}; // x's, as it would be at p
    auto out = x.handle("p", wire::move_proposal{1, wire::move_kind::swap, {f, g}, 0, 0, 0}, 1);
    bool accepted = false;
    for (auto& o : out)
      if (auto* r = std::get_if<wire::move_response>(&o.msg))
        accepted = r->accepted && r->flow_id == 7;
    CHECK(accepted == (objective == routing::move_objective::completion));
    CHECK(x.flows().count(7) == (accepted ? 0U : 1U));
  }
}

// What a data holder's CONFIRM says (its built flows, its slowest other ring) a relay passes on
// downstream.
TEST_CASE("balancer: a data holder's flow count and slowest other ring travel down its rings to every relay") {
  auto in = crossed(); // two rings of different costs
  routing::gwtf_config cfg;
  cfg.initial_temperature = 0;
  cfg.min_temperature = 0;
  test::balancer_bus bus{in, 3, 0.0, cfg};
  bus.settle(12);
  auto a = test::audit(bus, in);
  check_valid(a);
  REQUIRE(a.complete == 2);
  auto& dh = bus.nodes().at("dh");
  std::map<std::uint64_t, double> ring;
  for (auto& [id, f] : dh.flows())
    ring[id] = *dh.ring_cost(f);
  REQUIRE(ring.size() == 2);
  for (auto& [id, node] : bus.nodes()) {
    if (node.stage() == 0)
      continue;
    for (auto& [fid, f] : node.flows()) {
      INFO(id << " flow " << fid);
      CHECK(f.holder_flows == 2);
      double other = 0;
      for (auto& [oid, c] : ring)
        if (oid != fid)
          other = c;
      CHECK(f.others == doctest::Approx(other));
    }
  }
}

// a (capacity 1) offers b a SWAP: its flow 7 for b's flow 8. Before the answer, 7 is cancelled
// upstream and a new flow 11 takes a's slot; then 8 arrives, handed over by b. a cannot free
// a slot for it any more (its half is gone): 8 is refused, a stays within its capacity. (It
// was admitted as the swap's flow: two flows on a slot, seen in the random-instance tests.)
TEST_CASE("balancer: a SWAP whose own half is gone admits the peer's flow only to a free slot") {
  routing::gwtf_config cfg;
  cfg.reroute_gain = 0;
  routing::flow_balancer a{"a", 1, 3, 1, cfg, 11};
  a.add_peer("dh", 0, 0.1);
  a.add_peer("c", 2, 1.0);
  a.add_peer("d", 2, 0.1);
  a.add_peer("b", 1, 0);
  a.handle("c", wire::cost_advert{{{"dh", 0.1, -4}}}, 0);
  a.handle("dh", wire::flow_request{7, "dh", 1.2, 1, 0}, 0);
  a.handle("c", wire::flow_response{7, true, wire::reject_reason::none, 0.1, -3}, 0);
  a.handle("dh", wire::flow_sync{wire::sync_kind::confirm, 7, "dh", 0.0, {}, 1, 0.0}, 0);
  REQUIRE(a.flows().at(7).built);
  a.handle("b", wire::flow_listing{"b", {wire::flow_entry{8, "dh", "dh", "d", 0.0, 0.1, 1.0, 0.1}}}, 1);
  bool proposed = false;
  for (auto& o : a.tick(1))
    if (auto* p = std::get_if<wire::move_proposal>(&o.msg); p && o.to == "b")
      proposed = p->kind == wire::move_kind::swap && p->flows.size() == 2 && p->flows[0].flow_id == 7
                 && p->flows[1].flow_id == 8;
  REQUIRE(proposed);
  a.handle("dh", wire::flow_sync{wire::sync_kind::cancel, 7, "dh", 0.0, {}, 0}, 1);
  REQUIRE(a.flows().empty());
  a.handle("d", wire::cost_advert{{{"dh", 0.1, -4}}}, 1);
  a.handle("dh", wire::flow_request{11, "dh", 0.3, 1, 0}, 1);
  REQUIRE(a.flows().count(11) == 1);
  auto handed = a.handle("dh", wire::flow_request{8, "dh", 0.3, 1, 0}, 2);
  bool refused = false;
  for (auto& o : handed)
    if (auto* r = std::get_if<wire::flow_response>(&o.msg))
      refused = o.to == "dh" && r->flow_id == 8 && !r->accepted;
  CHECK(refused);
  CHECK(a.flows().size() == 1);
  CHECK(a.spare() >= 0);
}

TEST_CASE("balancer: an unchanged cost advert or flow listing goes again only after refresh_ticks, a changed one at once") {
  routing::gwtf_config cfg;
  cfg.refresh_ticks = 5;
  routing::flow_balancer x{"x", 1, 3, 4, cfg};
  x.add_peer("dh", 0, 0.1);
  x.add_peer("y", 1, 0);   // same stage: gets listings
  x.add_peer("a", 2, 0.2);
  x.handle("a", wire::cost_advert{{{"dh", 0.2, -4}}}, 0);
  // What tick `now` sends to dh (advert or introduction) and to y (listing).
  auto sent = [&](std::int64_t now) {
    std::pair<int, int> n{0, 0};
    for (auto& o : x.tick(now)) {
      bool advert = std::holds_alternative<wire::cost_advert>(o.msg) || std::holds_alternative<wire::introduction>(o.msg);
      n.first += o.to == "dh" && advert;
      n.second += o.to == "y" && std::holds_alternative<wire::flow_listing>(o.msg);
    }
    return n;
  };
  CHECK(sent(0) == std::pair{1, 1}); // the introduction, the first listing
  for (std::int64_t now = 1; now < 5; ++now) {
    INFO("tick " << now);
    CHECK(sent(now) == std::pair{0, 0}); // nothing changed
  }
  CHECK(sent(5) == std::pair{1, 1}); // the refresh
  CHECK(sent(6) == std::pair{0, 0});
  // Its cost changes: the advert goes at the next tick; the listing (no flows) does not.
  x.handle("a", wire::cost_advert{{{"dh", 0.7, -4}}}, 6);
  CHECK(sent(7) == std::pair{1, 0});
  CHECK(sent(8) == std::pair{0, 0});
  // A peer added again (maybe a new incarnation that knows nothing) gets both at once.
  x.add_peer("dh", 0, 0.1);
  x.add_peer("y", 1, 0);
  CHECK(sent(9) == std::pair{1, 1});
  // refresh_ticks 1: every tick, as before.
  cfg.refresh_ticks = 1;
  routing::flow_balancer every{"x", 1, 3, 4, cfg};
  every.add_peer("dh", 0, 0.1);
  every.add_peer("a", 2, 0.2);
  every.handle("a", wire::cost_advert{{{"dh", 0.2, -4}}}, 0);
  for (std::int64_t now = 0; now < 4; ++now) {
    auto out = every.tick(now);
    CHECK(std::count_if(out.begin(), out.end(), [](auto& o) { return o.to == "dh"; }) == 1);
  }
}

// Each receiver has its own refresh schedule (a balancer skips the receivers at once only when
// none is due), and a copied or assigned balancer keeps to the same schedule.
TEST_CASE("balancer: peers met at different ticks are refreshed each on its own schedule, by a copy too") {
  routing::gwtf_config cfg;
  cfg.refresh_ticks = 5;
  routing::flow_balancer x{"x", 1, 3, 4, cfg};
  x.add_peer("dh", 0, 0.1);
  x.add_peer("a", 2, 0.2);
  x.handle("a", wire::cost_advert{{{"dh", 0.2, -4}}}, 0);
  // Who gets an advert (or the introduction) at tick `now`.
  auto adverts = [](routing::flow_balancer& b, std::int64_t now) {
    std::set<std::string> to;
    for (auto& o : b.tick(now))
      if (std::holds_alternative<wire::cost_advert>(o.msg) || std::holds_alternative<wire::introduction>(o.msg))
        to.insert(o.to);
    return to;
  };
  using names = std::set<std::string>;
  CHECK(adverts(x, 0) == names{"dh"});
  CHECK(adverts(x, 1) == names{});
  x.add_peer("dh2", 0, 0.1); // met at tick 2
  CHECK(adverts(x, 2) == names{"dh2"});
  CHECK(adverts(x, 3) == names{});
  CHECK(adverts(x, 4) == names{});
  CHECK(adverts(x, 5) == names{"dh"});
  CHECK(adverts(x, 6) == names{});
  CHECK(adverts(x, 7) == names{"dh2"});
  routing::flow_balancer y{"y", 1, 3, 4, cfg};
  y.add_peer("elsewhere", 0, 0.1);
  CHECK(adverts(y, 7) == names{"elsewhere"});
  y = x; // an assignment: x's peers and what went to each, none of y's own
  auto z = x;
  for (std::int64_t now = 8; now <= 12; ++now) {
    INFO("tick " << now);
    auto expected = now == 10 ? names{"dh"} : now == 12 ? names{"dh2"} : names{};
    CHECK(adverts(x, now) == expected);
    CHECK(adverts(y, now) == expected);
    CHECK(adverts(z, now) == expected);
  }
}

TEST_CASE("balancer: a flow handed to a peer and taken back is carried on, not bounced between the two") {
  // a hands its flow 7 (dh -> a -> c -> dh) to b (b's REDIRECT); then a's link to c gets
  // cheaper and a proposes to take 7 back. dh's request for 7, sent on by b, reaches a while
  // a still remembers handing 7 to b: a must carry it on to c. (It sent dh to b again, and b,
  // which had handed 7 to a, sent dh back: each request bounced between a and b until a's
  // handover record expired, ~723k redirects in a 100-host simulation.)
  routing::gwtf_config cfg;
  cfg.half_built_ttl_ticks = 20;
  cfg.reroute_gain = 0;
  routing::flow_balancer a{"a", 1, 3, 1, cfg, 3};
  a.add_peer("dh", 0, 0.1);
  a.add_peer("b", 1, 0);
  a.add_peer("c", 2, 0.5);
  a.handle("c", wire::cost_advert{{{"dh", 0.1, -4}}}, 0);
  auto fwd = a.handle("dh", wire::flow_request{7, "dh", 0.6, 1, 0}, 0);
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].to == "c");
  a.handle("c", wire::flow_response{7, true, wire::reject_reason::none, 0.1, -3}, 0);
  a.handle("dh", wire::flow_sync{wire::sync_kind::confirm, 7, "dh", 0.0, {}, 1}, 0);
  REQUIRE(a.flows().at(7).built);
  REQUIRE(a.ring_cost(a.flows().at(7)));
  // b offers a cheaper way for 7 (its edges 0.1 and 0.1 against a's 0.1 and 0.5): a hands it over.
  auto handed = a.handle("b", wire::move_proposal{1, wire::move_kind::redirect,
                                                  {wire::flow_entry{7, "dh", "dh", "c", 0.0, 0.1, 0.1, 0.1}}, 0.8, 0.3, 0.8},
                         1);
  bool redirected = false, accepted = false;
  for (auto& o : handed) {
    if (auto* s = std::get_if<wire::flow_sync>(&o.msg))
      redirected |= o.to == "dh" && s->kind == wire::sync_kind::redirect && s->node == "b";
    if (auto* r = std::get_if<wire::move_response>(&o.msg))
      accepted |= r->accepted;
  }
  REQUIRE(accepted);
  REQUIRE(redirected);
  CHECK(a.flows().empty());
  // a's link to c is now the cheapest; b lists 7: a proposes to take it back.
  a.add_peer("c", 2, 0.01);
  a.handle("b", wire::flow_listing{"b", {wire::flow_entry{7, "dh", "dh", "c", 0.0, 0.1, 0.1, 0.1}}}, 2);
  bool proposed = false;
  for (std::int64_t now = 2; now < 8 && !proposed; ++now)
    for (auto& o : a.tick(now))
      if (auto* p = std::get_if<wire::move_proposal>(&o.msg); p && o.to == "b")
        proposed = p->kind == wire::move_kind::redirect && !p->flows.empty() && p->flows[0].flow_id == 7;
  REQUIRE(proposed);
  // b accepted and sent dh here: dh's request arrives (before b's answer).
  auto taken = a.handle("dh", wire::flow_request{7, "dh", 0.2, 1, 0}, 8);
  bool bounced = false, carried = false;
  for (auto& o : taken) {
    if (auto* s = std::get_if<wire::flow_sync>(&o.msg))
      bounced |= s->kind == wire::sync_kind::redirect;
    if (auto* r = std::get_if<wire::flow_request>(&o.msg))
      carried |= o.to == "c" && r->flow_id == 7;
  }
  CHECK_FALSE(bounced);
  CHECK(carried);
  REQUIRE(a.flows().count(7) == 1);
  CHECK(a.flows().at(7).prev == "dh");
}

// The balancer keeps an index of its next-stage peers and updates a peer's advertised costs
// in place when the targets are the same: a copy, a removed peer, a peer met first through
// its advert, a peer moved to another stage and an advert naming other targets must all be
// seen by the next choice.
TEST_CASE("balancer: next-hop choices follow peers that come, go and move, in a copy too") {
  routing::gwtf_config cfg;
  cfg.link_load = false;
  routing::flow_balancer x{"x", 1, 3, 4, cfg};
  x.add_peer("dh", 0, 0.1);
  x.add_peer("a", 2, 0.2);
  x.add_peer("b", 2, 0.3);
  x.handle("a", wire::cost_advert{{{"dh", 0.2, -4}}}, 0);
  x.handle("b", wire::cost_advert{{{"dh", 0.3, -4}}}, 0);
  REQUIRE(x.cost_to("dh"));
  CHECK(*x.cost_to("dh") == doctest::Approx(0.4)); // through a
  auto copy = x;                                    // its own peers: a is removed from x only
  x.remove_peer("a", 1);
  CHECK(*x.cost_to("dh") == doctest::Approx(0.6)); // through b
  CHECK(*copy.cost_to("dh") == doctest::Approx(0.4));
  // An advert from a name never added makes it a peer of stage 0 (not a next hop here).
  x.handle("c", wire::cost_advert{{{"dh", 0.01, -4}}}, 1);
  CHECK(*x.cost_to("dh") == doctest::Approx(0.6));
  // Added at the next stage afterwards, it is a next hop, with the costs it advertised.
  x.add_peer("c", 2, 0.05);
  CHECK(*x.cost_to("dh") == doctest::Approx(0.06));
  // Moved to this stage, it is not.
  x.add_peer("c", 1, 0);
  CHECK(*x.cost_to("dh") == doctest::Approx(0.6));
  // b's next advert names another target as well, then only that one: dh is gone from it.
  x.handle("b", wire::cost_advert{{{"dh", 0.5, -4}, {"dh2", 0.1, -4}}}, 2);
  CHECK(*x.cost_to("dh") == doctest::Approx(0.8));
  REQUIRE(x.cost_to("dh2"));
  CHECK(*x.cost_to("dh2") == doctest::Approx(0.4));
  x.handle("b", wire::cost_advert{{{"dh2", 0.2, -4}}}, 3);
  CHECK_FALSE(x.cost_to("dh"));
  CHECK(*x.cost_to("dh2") == doctest::Approx(0.5));
  // The same targets again: costs overwritten in place.
  x.handle("b", wire::cost_advert{{{"dh2", 0.7, -4}}}, 4);
  CHECK(*x.cost_to("dh2") == doctest::Approx(1.0));
}
