// The discovery core of node mode (actors/peer_directory): binding connections to names,
// refusing other clusters and spoofed names, gossip spreading, dial back-off.
#include <doctest/doctest.h>

#include "actors/core/peer_directory.hpp"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

wire::hello host(const std::string& name, const std::string& address, std::uint64_t incarnation = 1,
                 std::uint64_t cluster = 77) {
  wire::hello h;
  h.peer_id = name;
  h.address = address;
  h.capacity = 4;
  h.stage = 1;
  h.incarnation = incarnation;
  h.cluster = cluster;
  return h;
}

wire::gossip from(const wire::hello& sender, std::vector<wire::hello> others = {}) {
  wire::gossip g;
  g.peers.push_back({sender, 0, false});
  for (auto& o : others)
    g.peers.push_back({o, 0, false});
  return g;
}

peer_directory make(std::vector<std::string> bootstrap = {"10.0.0.1:4242"}) {
  return peer_directory{host("me", "10.0.0.9:4242"), std::move(bootstrap), 100, 800};
}

} // namespace

TEST_CASE("peer directory: a gossip binds its connection to the sender and spreads the peers it names") {
  auto d = make();
  auto out = d.on_gossip(1, from(host("a", "10.0.0.1:4242"), {host("b", "10.0.0.2:4242"), host("me", "x:1")}), 0);
  CHECK(out.error.empty());
  CHECK(out.peer == "a");
  CHECK(out.newly_bound);
  CHECK(out.learned == std::vector<std::string>{"a", "b"}); // never itself
  CHECK(d.bound_name(1) == std::optional<std::string>{"a"});
  CHECK(d.connection("a") == std::optional<std::uint64_t>{1});
  CHECK_FALSE(d.connection("b").has_value());
  CHECK(d.bound() == std::vector<std::string>{"a"});
  CHECK(d.known() == std::vector<std::string>{"a", "b"});
  // b is known but not connected: it is due for a dial; the bootstrap address is not (a,
  // connected, has it).
  CHECK(d.due(0) == std::vector<std::string>{"10.0.0.2:4242"});
  CHECK(d.due(0).empty()); // in flight
  auto g = d.gossip();
  REQUIRE(g.peers.size() == 3);
  CHECK(g.peers[0].peer.peer_id == "me");
  CHECK_FALSE(g.peers[1].suspected); // a: connected
  CHECK(g.peers[2].suspected);       // b: not (yet)
  // The same connection gossiping again binds nothing new.
  CHECK_FALSE(d.on_gossip(1, from(host("a", "10.0.0.1:4242")), 5).newly_bound);
}

TEST_CASE("peer directory: another cluster, a spoofed name, a stolen name and this host's own name are refused") {
  auto d = make();
  auto other = d.on_gossip(1, from(host("x", "10.0.0.5:1", 1, 78)), 0);
  CHECK(other.error.find("belongs to another cluster") != std::string::npos);
  CHECK_FALSE(d.bound_name(1).has_value());
  // Peers of another cluster named in a valid gossip are not learned either.
  auto a = d.on_gossip(2, from(host("a", "10.0.0.1:4242"), {host("y", "10.0.0.6:1", 1, 78)}), 0);
  CHECK(a.learned == std::vector<std::string>{"a"});
  // The connection of a cannot turn into b.
  auto spoof = d.on_gossip(2, from(host("b", "10.0.0.2:4242")), 0);
  CHECK(spoof.error.find("now claims to be 'b'") != std::string::npos);
  CHECK(d.bound_name(2) == std::optional<std::string>{"a"});
  // b is not bound, but its address is dialled (a true claim routed through a's node
  // then arrives over b's own connection), and no longer once b is bound there.
  CHECK(d.connection("b") == std::nullopt);
  auto due = d.due(0);
  CHECK(std::find(due.begin(), due.end(), "10.0.0.2:4242") != due.end());
  d.dial_done("10.0.0.2:4242", true, 0);
  CHECK(d.on_gossip(5, from(host("b", "10.0.0.2:4242")), 0).newly_bound);
  due = d.due(1000000);
  CHECK(std::find(due.begin(), due.end(), "10.0.0.2:4242") == due.end());
  // Another connection cannot take a's name with the same incarnation...
  auto steal = d.on_gossip(3, from(host("a", "10.6.6.6:1")), 0);
  CHECK(steal.error.find("already connected elsewhere") != std::string::npos);
  CHECK(d.connection("a") == std::optional<std::uint64_t>{2});
  // ...but a restarted a (newer incarnation) does, and the old connection is unbound.
  auto restarted = d.on_gossip(4, from(host("a", "10.0.0.1:4242", 2)), 0);
  CHECK(restarted.error.empty());
  CHECK(restarted.newly_bound);
  CHECK(d.connection("a") == std::optional<std::uint64_t>{4});
  CHECK_FALSE(d.bound_name(2).has_value());
  auto self = d.on_gossip(5, from(host("me", "10.0.0.7:1")), 0);
  CHECK(self.error.find("claims this host's name") != std::string::npos);
  CHECK(d.on_gossip(6, wire::gossip{}, 0).error == "gossip without a sender record");
}

TEST_CASE("peer directory: a bootstrap address is dialled until a connected peer has it") {
  auto d = make({"10.0.0.1:4242", "10.0.0.2:4242"});
  CHECK(d.due(0).size() == 2);
  d.dial_done("10.0.0.1:4242", false, 0); // not up yet
  d.dial_done("10.0.0.2:4242", true, 0);
  d.on_gossip(1, from(host("b", "10.0.0.2:4242")), 0);
  // b is connected, but the first bootstrap host may be in a part of the cluster b does not
  // know: it is still dialled (after its back-off), b's address is not.
  CHECK(d.due(100) == std::vector<std::string>{"10.0.0.1:4242"});
  d.dial_done("10.0.0.1:4242", true, 100);
  d.on_gossip(2, from(host("a", "10.0.0.1:4242")), 100);
  CHECK(d.due(10000).empty());
}

TEST_CASE("peer directory: unreachable bootstrap addresses are retried with doubling back-off") {
  auto d = make({"10.0.0.1:4242", "10.0.0.2:4242"});
  CHECK(d.due(0) == std::vector<std::string>{"10.0.0.1:4242", "10.0.0.2:4242"});
  d.dial_done("10.0.0.1:4242", false, 0);
  d.dial_done("10.0.0.2:4242", false, 0);
  CHECK(d.due(99).empty());
  CHECK(d.due(100).size() == 2); // first back-off: 100 ms
  d.dial_done("10.0.0.1:4242", false, 100);
  d.dial_done("10.0.0.2:4242", false, 100);
  CHECK(d.due(299).empty());
  CHECK(d.due(300).size() == 2); // doubled: 200 ms
  // 400, 800, then capped at 800 (backoff_max).
  std::int64_t t = 300;
  for (std::int64_t expect : {400, 800, 800}) {
    d.dial_done("10.0.0.1:4242", false, t);
    d.dial_done("10.0.0.2:4242", false, t);
    CHECK(d.due(t + expect - 1).empty());
    CHECK(d.due(t + expect).size() == 2);
    t += expect;
  }
  // A successful dial resets the back-off of that address.
  d.dial_done("10.0.0.1:4242", true, t);
  d.dial_done("10.0.0.2:4242", false, t);
  CHECK(d.due(t + 100) == std::vector<std::string>{"10.0.0.1:4242"});
}

TEST_CASE("peer directory: a lost connection is redialled at the peer's address after the shortest back-off") {
  auto d = make();
  d.on_gossip(1, from(host("a", "10.0.0.1:4242")), 0);
  CHECK(d.connection_lost(1, 1000) == std::optional<std::string>{"a"});
  CHECK_FALSE(d.connection_lost(1, 1000).has_value());
  CHECK(d.bound().empty());
  CHECK(d.due(1099).empty());
  CHECK(d.due(1100) == std::vector<std::string>{"10.0.0.1:4242"}); // also the bootstrap address
}

TEST_CASE("peer directory: two hosts that dial each other at once hold two connections, and losing one loses nothing") {
  auto d = make();
  REQUIRE(d.on_gossip(1, from(host("a", "10.0.0.1:4242")), 0).newly_bound);
  // a's answer on the connection this host dialled: the same incarnation and address.
  auto second = d.on_gossip(2, from(host("a", "10.0.0.1:4242"), {host("b", "10.0.0.2:4242")}), 0);
  CHECK(second.error.empty());
  CHECK_FALSE(second.newly_bound);
  CHECK(second.learned == std::vector<std::string>{"b"});
  CHECK(d.bound_name(2) == std::optional<std::string>{"a"});
  CHECK(d.connection("a") == std::optional<std::uint64_t>{1});
  // Another address with the same incarnation is not the same peer.
  CHECK(d.on_gossip(3, from(host("a", "10.6.6.6:1")), 0).error.find("already connected elsewhere")
        != std::string::npos);
  CHECK_FALSE(d.bound_name(3).has_value());
  // Losing the first connection moves a to the second; losing that one too loses a.
  CHECK_FALSE(d.connection_lost(1, 10).has_value());
  CHECK(d.connection("a") == std::optional<std::uint64_t>{2});
  CHECK(d.bound() == std::vector<std::string>{"a"});
  CHECK(d.connection_lost(2, 20) == std::optional<std::string>{"a"});
  CHECK(d.bound().empty());
  // A restart (newer incarnation) unbinds both old connections.
  REQUIRE(d.on_gossip(4, from(host("a", "10.0.0.1:4242")), 30).newly_bound);
  REQUIRE(d.on_gossip(5, from(host("a", "10.0.0.1:4242")), 30).error.empty());
  CHECK(d.on_gossip(6, from(host("a", "10.0.0.1:4242", 2)), 40).error.empty());
  CHECK(d.connection("a") == std::optional<std::uint64_t>{6});
  CHECK_FALSE(d.bound_name(4).has_value());
  CHECK_FALSE(d.bound_name(5).has_value());
}

TEST_CASE("peer directory: a peer no dial reaches for the give-up time is forgotten, and suspected gossip does not bring it back") {
  peer_directory d{host("me", "10.0.0.9:4242"), {}, 100, 800, 5000};
  REQUIRE(d.on_gossip(1, from(host("a", "10.0.0.1:4242"), {host("b", "10.0.0.2:4242")}), 0).error.empty());
  REQUIRE(d.on_gossip(2, from(host("b", "10.0.0.2:4242")), 0).error.empty());
  // b leaves (or dies): its connection is lost and every redial fails.
  REQUIRE(d.connection_lost(2, 1000) == std::optional<std::string>{"b"});
  std::int64_t t = 1000;
  int dials = 0;
  while (t < 7000) {
    for (auto& a : d.due(t)) {
      CHECK(a == "10.0.0.2:4242");
      ++dials;
      d.dial_done(a, false, t);
    }
    t += 50;
  }
  CHECK(dials >= 3);  // redialled with back-off for a while...
  CHECK(d.known() == std::vector<std::string>{"a"}); // ...then given up on
  CHECK(d.due(t + 100000).empty());
  // a still gossips b as suspected (it lost it too): b stays forgotten.
  wire::gossip g = from(host("a", "10.0.0.1:4242"));
  g.peers.push_back({host("b", "10.0.0.2:4242"), 0, true});
  CHECK(d.on_gossip(1, g, t).learned.empty());
  CHECK(d.known() == std::vector<std::string>{"a"});
  // A peer connected to b (not suspected) brings it back, and so would b itself.
  g.peers.back().suspected = false;
  CHECK(d.on_gossip(1, g, t).learned == std::vector<std::string>{"b"});
  CHECK(d.due(t) == std::vector<std::string>{"10.0.0.2:4242"});
}

TEST_CASE("peer directory: a host refused while an impostor held its name is dialled and bound once the impostor is gone") {
  auto d = make({});
  // The impostor claims "a" first, with a higher incarnation.
  REQUIRE(d.on_gossip(1, from(host("a", "10.0.0.66:4242", 9)), 0).error.empty());
  // The real a is refused: the name is bound elsewhere with a newer incarnation.
  auto refused = d.on_gossip(2, from(host("a", "10.0.0.1:4242", 1)), 10);
  CHECK(refused.error.find("already connected elsewhere") != std::string::npos);
  CHECK(d.bound_name(2) == std::nullopt);
  // The impostor goes; the real a's address is dialled, and its introduction binds.
  REQUIRE(d.connection_lost(1, 20) == std::optional<std::string>{"a"});
  auto due = d.due(200);
  CHECK(std::find(due.begin(), due.end(), "10.0.0.1:4242") != due.end());
  d.dial_done("10.0.0.1:4242", true, 210);
  auto back = d.on_gossip(3, from(host("a", "10.0.0.1:4242", 1)), 220);
  CHECK(back.error.empty());
  CHECK(back.newly_bound);
  CHECK(d.connection("a") == std::optional<std::uint64_t>{3});
}

TEST_CASE("peer directory: with TLS a connection is bound only to a name its certificate carries") {
  auto d = make();
  d.require_certificates();
  // No certificate told for the connection: never bound (fail closed).
  auto bare = d.on_gossip(1, from(host("a", "10.0.0.1:4242")), 0);
  CHECK(bare.error.find("without a verified certificate") != std::string::npos);
  CHECK_FALSE(d.bound_name(1).has_value());
  // b's certificate on a connection that introduces itself as a: refused, nothing learned.
  d.certified(2, {"b"});
  auto impostor = d.on_gossip(2, from(host("a", "10.6.6.6:1"), {host("c", "10.0.0.3:1")}), 0);
  CHECK(impostor.error == "a peer at 10.6.6.6:1 introduced itself as 'a', but its certificate names b "
                          "(a host may introduce only a name its certificate carries)");
  CHECK_FALSE(d.bound_name(2).has_value());
  CHECK(d.known().empty());
  // The same certificate introducing its own name is bound; the real a is bound on its own.
  CHECK(d.on_gossip(2, from(host("b", "10.0.0.2:4242")), 0).newly_bound);
  d.certified(3, {"a", "a-spare"});
  CHECK(d.on_gossip(3, from(host("a", "10.0.0.1:4242")), 0).newly_bound);
  CHECK(d.connection("a") == std::optional<std::uint64_t>{3});
  // A lost connection forgets its certificate: an id reused later is not trusted by it.
  d.connection_lost(3, 10);
  auto reused = d.on_gossip(3, from(host("a", "10.0.0.1:4242", 2)), 20);
  CHECK(reused.error.find("without a verified certificate") != std::string::npos);
  // Without TLS (not required), names are taken as introduced.
  auto plain = make();
  CHECK(plain.on_gossip(1, from(host("a", "10.0.0.1:4242")), 0).newly_bound);
}
