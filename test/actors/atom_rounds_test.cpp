// ATOM's rounds at one peer (actors/core/atom_rounds.hpp): which iterations make a round, whom
// a round waits for through a crash and a join, and the exactly-once check of a round's
// contributions, without threads.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/core/atom_rounds.hpp"
#include "actors/core/key_digest.hpp"
#include "doctest/doctest.h"

using namespace gwtf::actors;

namespace {

const std::vector<std::string> roster{"a", "b", "c", "d"};

// What `peer` (roster index `index`) sends after training iterations [first, end) with
// `per` microbatches each, every one once.
atom_rounds::contribution trained(std::uint32_t index, std::uint64_t first, std::uint64_t end, int per) {
  atom_rounds::contribution c{first, end, 0, 0};
  std::vector<std::uint64_t> keys;
  for (auto i = first; i < end; ++i)
    for (int j = 0; j < per; ++j)
      keys.push_back(i << 24 | std::uint64_t{index} << 12 | static_cast<std::uint64_t>(j)); // microbatch_id::key
  c.microbatches = static_cast<std::int64_t>(keys.size());
  c.keys_digest = key_digest(keys);
  return c;
}

} // namespace

TEST_CASE("atom rounds: every sync_every local iterations make a round, the run's last ends one") {
  atom_rounds r{roster, "a", 3, 8, 2};
  CHECK(r.round_of(0) == 0);
  CHECK(r.round_of(5) == 1);
  CHECK(r.iterations_of(1) == std::pair<std::uint64_t, std::uint64_t>{3, 6});
  CHECK(r.iterations_of(2) == std::pair<std::uint64_t, std::uint64_t>{6, 8}); // the last is shorter
  std::vector<std::uint64_t> ends;
  for (std::uint64_t i = 0; i < 8; ++i)
    if (r.ends_round(i))
      ends.push_back(i);
  CHECK(ends == std::vector<std::uint64_t>{2, 5, 7});
  atom_rounds every{roster, "a", 1, 3, 2};
  CHECK(every.ends_round(0));
  CHECK(every.ends_round(2));
}

TEST_CASE("atom rounds: a round waits for every live member, not for a crashed one, and a joiner from its first round") {
  atom_rounds r{roster, "a", 2, 10, 2};
  for (auto& p : {"b", "c"})
    r.member(p, 0);
  r.member("stranger", 0); // not in the roster: never waited for
  CHECK(r.waiting(0) == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(r.contributed("a", 0, trained(0, 0, 2, 2)));
  REQUIRE(r.contributed("b", 0, trained(1, 0, 2, 2)));
  CHECK_FALSE(r.contributed("stranger", 0, trained(1, 0, 2, 2)));
  CHECK_FALSE(r.complete(0));
  CHECK(r.waiting(0) == std::vector<std::string>{"c"});
  r.down("c"); // crashed before its contribution: the round goes on without it
  auto done = r.complete(0);
  REQUIRE(done);
  CHECK(*done == std::vector<std::string>{"a", "b"});
  CHECK(r.check(0, *done).empty());
  r.close(0);
  CHECK(r.open_from() == 1);
  CHECK_FALSE(r.contributed("b", 0, trained(1, 0, 2, 2))); // a closed round takes nothing
  // d joins after downloading round 1's average: a member from round 2, not of round 1.
  r.member("d", 2);
  REQUIRE(r.contributed("a", 1, trained(0, 2, 4, 2)));
  CHECK(r.waiting(1) == std::vector<std::string>{"b"});
  REQUIRE(r.contributed("b", 1, trained(1, 2, 4, 2)));
  REQUIRE(r.complete(1));
  r.close(1);
  REQUIRE(r.contributed("a", 2, trained(0, 4, 6, 2)));
  REQUIRE(r.contributed("b", 2, trained(1, 4, 6, 2)));
  CHECK(r.waiting(2) == std::vector<std::string>{"d"});
  // A contribution that came before its sender died stays in the round.
  REQUIRE(r.contributed("d", 2, trained(3, 4, 6, 2)));
  r.down("d");
  auto with_d = r.complete(2);
  REQUIRE(with_d);
  CHECK(*with_d == std::vector<std::string>{"a", "b", "d"});
  CHECK(r.check(2, *with_d).empty());
  r.down("a"); // this peer never stops waiting for itself
  CHECK(r.waiting(3) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("atom rounds: a peer that crashed while sending is left out of the round at every live peer") {
  // d sent its parameters of round 0 to a and b, then crashed before c got them: a and b
  // completed {a, b, c, d}, c completed {a, b, c}. Each lands what every live contributor
  // holds: {a, b, c}, whichever order the announcements come in.
  atom_rounds r{roster, "a", 1, 10, 2};
  for (auto& p : {"b", "c", "d"})
    r.member(p, 0);
  for (std::uint32_t k = 0; k < 4; ++k)
    REQUIRE(r.contributed(roster[k], 0, trained(k, 0, 1, 2)));
  r.down("d");
  auto mine = r.complete(0);
  REQUIRE(mine);
  CHECK(*mine == roster);
  CHECK_FALSE(r.agreed(0, *mine)); // b and c have not said what they hold
  r.holds("b", 0, {"d", "c", "b", "a"});
  CHECK_FALSE(r.agreed(0, *mine));
  r.holds("stranger", 0, {"a"}); // not in the roster: ignored
  r.holds("c", 5, {"a"});        // not an open round: ignored
  CHECK_FALSE(r.agreed(0, *mine));
  r.holds("c", 0, {"a", "b", "c"});
  auto landed = r.agreed(0, *mine);
  REQUIRE(landed);
  CHECK(*landed == std::vector<std::string>{"a", "b", "c"});
  CHECK(r.check(0, *landed).empty());
  // A contributor that dies before it announces is not waited for: the others' holdings decide.
  r.close(0);
  CHECK_FALSE(r.agreed(0, *mine)); // closed
  for (std::uint32_t k = 0; k < 3; ++k)
    REQUIRE(r.contributed(roster[k], 1, trained(k, 1, 2, 2)));
  auto next = r.complete(1);
  REQUIRE(next);
  r.holds("b", 1, *next);
  CHECK_FALSE(r.agreed(1, *next));
  r.down("c");
  auto without_c = r.agreed(1, *next);
  REQUIRE(without_c);
  CHECK(*without_c == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("atom rounds: the exactly-once check names a peer whose contribution misses, repeats or misplaces a microbatch") {
  atom_rounds r{roster, "a", 2, 10, 2};
  r.member("b", 0);
  r.member("c", 0);
  REQUIRE(r.contributed("a", 1, trained(0, 2, 4, 2)));
  auto twice = trained(1, 2, 4, 2);
  twice.keys_digest += key_digest({std::uint64_t{2} << 24 | 1u << 12}); // one key added twice
  twice.microbatches += 1;
  REQUIRE(r.contributed("b", 1, twice));
  auto other_round = trained(2, 4, 6, 2); // iterations of round 2 sent as round 1's
  REQUIRE(r.contributed("c", 1, other_round));
  auto all = r.complete(1);
  REQUIRE(all);
  CHECK(r.check(1, {"a"}).empty());
  auto b = r.check(1, {"a", "b"});
  CHECK(b.find("b's 5 microbatches") != std::string::npos);
  auto c = r.check(1, {"c"});
  CHECK(c.find("not inside round 1") != std::string::npos);
  auto missing = trained(2, 2, 4, 2);
  missing.keys_digest -= key_digest({std::uint64_t{3} << 24 | 2u << 12 | 1u});
  missing.microbatches -= 1;
  REQUIRE(r.contributed("c", 1, missing)); // the latest counts
  CHECK(r.check(1, {"c"}).find("not each of its 4 once") != std::string::npos);
  CHECK(r.check(1, {"d"}).find("no contribution") != std::string::npos);
}
