// The admission rules of a listening port (actors/net/port_guard.hpp), with time passed in:
// caps per port and per source address, idle connections displaced to make room, handshake
// and idle deadlines, and refusal lines rate-limited per source and kind.
#include <doctest/doctest.h>

#include "actors/net/port_guard.hpp"

using namespace gwtf::actors;
using namespace std::chrono_literals;

namespace {
using tp = port_guard::time_point;
const tp t0{};

port_limits small() {
  port_limits l;
  l.max_connections = 4;
  l.max_per_address = 2;
  l.handshake_timeout = 2000ms;
  l.idle_timeout = 10000ms;
  l.evictable_after = 1000ms;
  return l;
}
} // namespace

TEST_CASE("port guard: the cap per address displaces that address's idlest connection, or refuses when all are busy") {
  port_guard g{small()};
  CHECK(g.arrive(1, "10.0.0.1", t0).admitted);
  CHECK(g.arrive(2, "10.0.0.1", t0 + 100ms).admitted);
  // A third from the same address while both moved bytes within the last second: refused.
  auto busy = g.arrive(3, "10.0.0.1", t0 + 500ms);
  CHECK_FALSE(busy.admitted);
  CHECK(busy.evicted.empty());
  CHECK(busy.why == "the address is at its limit of connections (2 from 10.0.0.1), and none of them idle for 1000 ms");
  CHECK(g.open_from("10.0.0.1") == 2);
  // Another address is not affected.
  CHECK(g.arrive(4, "10.0.0.2", t0 + 500ms).admitted);
  // Later, connection 2 talks and 1 stays idle: the newcomer takes 1's place.
  g.active(2, t0 + 1900ms);
  auto in = g.arrive(5, "10.0.0.1", t0 + 2000ms);
  CHECK(in.admitted);
  CHECK(in.evicted == std::vector<std::uint64_t>{1});
  CHECK(g.open_from("10.0.0.1") == 2);
  CHECK(g.open() == 3);
}

TEST_CASE("port guard: the cap of the port displaces the idlest connection of any address") {
  port_guard g{small()};
  CHECK(g.arrive(1, "a", t0).admitted);
  CHECK(g.arrive(2, "b", t0).admitted);
  CHECK(g.arrive(3, "c", t0).admitted);
  CHECK(g.arrive(4, "d", t0).admitted);
  g.active(1, t0 + 1500ms);
  g.active(2, t0 + 1200ms);
  g.active(4, t0 + 1400ms);
  auto full = g.arrive(5, "e", t0 + 1600ms);
  CHECK(full.admitted);
  CHECK(full.evicted == std::vector<std::uint64_t>{3}); // idle since t0
  CHECK(g.open() == 4);
  auto none = g.arrive(6, "e", t0 + 1700ms); // 2 (idle 500 ms) is the idlest: too recent
  CHECK_FALSE(none.admitted);
  CHECK(none.why.find("the port is at its limit of connections (4)") == 0);
  g.left(2);
  CHECK(g.arrive(7, "f", t0 + 1700ms).admitted);
  CHECK(g.open() == 4);
}

TEST_CASE("port guard: handshake and idle deadlines, dialled connections exempt from caps and idling") {
  port_guard g{small()};
  REQUIRE(g.arrive(1, "a", t0).admitted);
  REQUIRE(g.arrive(2, "a", t0).admitted);
  g.dialled(9, t0);
  CHECK(g.next_deadline() == t0 + 2000ms);
  g.handshaken(2);
  g.handshaken(9);
  CHECK(g.expired(t0 + 1999ms).empty());
  auto late = g.expired(t0 + 2000ms);
  REQUIRE(late.size() == 1);
  CHECK(late[0] == std::pair<std::uint64_t, port_guard::lapse>{1, port_guard::lapse::handshake});
  CHECK(g.open() == 1);
  // 2 talks at 5 s, then nothing: idle at 15 s. The dialled connection never idles out.
  g.active(2, t0 + 5000ms);
  CHECK(g.next_deadline() == t0 + 15000ms);
  CHECK(g.expired(t0 + 14999ms).empty());
  auto idle = g.expired(t0 + 15000ms);
  REQUIRE(idle.size() == 1);
  CHECK(idle[0] == std::pair<std::uint64_t, port_guard::lapse>{2, port_guard::lapse::idle});
  CHECK(g.expired(t0 + 1h).empty());
  CHECK_FALSE(g.next_deadline().has_value());
  CHECK(g.open() == 0);
  CHECK(describe(port_guard::lapse::idle, small()) == "no byte in or out for 10000 ms");
  // A dialled connection does not count against the caps.
  for (std::uint64_t id = 20; id < 30; ++id)
    g.dialled(id, t0);
  CHECK(g.arrive(40, "a", t0).admitted);
  CHECK(g.arrive(41, "a", t0).admitted);
}

TEST_CASE("refusal log: one line per source and kind per window, the next one counts what was held back") {
  refusal_log log{10s, 4};
  auto from = [](const std::string& who) { return "closed the connection from " + who; };
  auto first = log.refuse("10.0.0.1:5000", "a frame announcing 99 bytes", from("10.0.0.1:5000"), t0);
  REQUIRE(first);
  CHECK(*first == "closed the connection from 10.0.0.1:5000");
  // The same kind from the same address (another port, another size): held back.
  for (int i = 0; i < 41; ++i)
    CHECK_FALSE(log.refuse("10.0.0.1:5001", "a frame announcing 12 bytes", from("10.0.0.1:5001"), t0 + 1s));
  // Another reason, another event (a connection this host dialled), or another address: said.
  CHECK(log.refuse("10.0.0.1:5002", "no hello within 2000 ms", from("10.0.0.1:5002"), t0 + 1s));
  CHECK(log.refuse("10.0.0.1:5003", "a frame announcing 99 bytes", "closed the connection to 10.0.0.1:5003", t0 + 1s));
  CHECK(log.refuse("10.0.0.2:5000", "a frame announcing 99 bytes", from("10.0.0.2:5000"), t0 + 1s));
  auto next = log.refuse("10.0.0.1:6000", "a frame announcing 7 bytes", from("10.0.0.1:6000"), t0 + 10s);
  REQUIRE(next);
  CHECK(*next == "closed the connection from 10.0.0.1:6000 (41 more like it from 10.0.0.1 since the last line, not logged)");
  // Memory is bounded: a fifth (address, kind) forgets the stalest, which is then said again
  // (10.0.0.1's "no hello", said at 1 s, would be held until 11 s had it been remembered).
  CHECK(log.refuse("10.0.0.3:1", "k", from("10.0.0.3:1"), t0 + 10500ms));
  CHECK(log.refuse("10.0.0.1:5002", "no hello within 2000 ms", from("10.0.0.1:5002"), t0 + 10600ms));
  CHECK_FALSE(log.refuse("10.0.0.1:5002", "no hello within 2000 ms", from("10.0.0.1:5002"), t0 + 10700ms));
  CHECK(source_address("[::1]:80") == "::1");
  CHECK(source_address("127.0.0.1:5") == "127.0.0.1");
  CHECK(source_address("::1") == "::1");
}
