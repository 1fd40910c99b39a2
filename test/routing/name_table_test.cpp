// The balancer's peer table (routing/name_table.hpp) against std::map on random operations:
// the same keys and values after every step, entries keeping their address until erased,
// copies independent of the original.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>

#include "routing/name_table.hpp"

using gwtf::routing::name_table;

namespace {

// Every entry of `want` is found with its value, nothing else is in `t`.
void same(const name_table<int>& t, const std::map<std::string, int>& want) {
  REQUIRE(t.size() == want.size());
  for (auto& [k, v] : want) {
    auto* e = t.find(k);
    REQUIRE(e != nullptr);
    CHECK(e->first == k);
    CHECK(e->second == v);
  }
  std::size_t seen = 0;
  t.each([&](const std::string& k, int v) {
    ++seen;
    auto it = want.find(k);
    REQUIRE(it != want.end());
    CHECK(it->second == v);
  });
  CHECK(seen == want.size());
}

} // namespace

TEST_CASE("name table: random inserts, finds and erases agree with std::map, addresses stay, copies are deep") {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng{seed};
    // Few distinct keys: many hits, re-inserts after erases and long probe runs.
    std::uniform_int_distribution<int> key{0, seed % 2 == 0 ? 40 : 300}, op{0, 9};
    name_table<int> t;
    std::map<std::string, int> want;
    std::map<std::string, const void*> where; // each live entry's address when it was added
    for (int step = 0; step < 2000; ++step) {
      auto k = "relay-" + std::to_string(key(rng)) + (step % 3 == 0 ? "-a-longer-name-beyond-sso" : "");
      int o = op(rng);
      if (o < 5) {
        auto [e, added] = t.try_emplace(k);
        CHECK(added == (want.count(k) == 0));
        if (added) {
          CHECK(e->second == 0);
          where[k] = e;
        }
        CHECK(static_cast<const void*>(e) == where[k]);
        e->second = step;
        want[k] = step;
      } else if (o < 8) {
        auto* e = t.find(k);
        REQUIRE((e != nullptr) == (want.count(k) > 0));
        if (e)
          CHECK(static_cast<const void*>(e) == where[k]);
        t.erase(e); // nullptr: nothing
        want.erase(k);
        where.erase(k);
      } else {
        CHECK((t.find(k) != nullptr) == (want.count(k) > 0));
      }
      if (step % 250 == 0) {
        same(t, want);
        auto copy = t;
        same(copy, want);
        if (auto* e = copy.find(k)) {
          CHECK(static_cast<const void*>(e) != static_cast<const void*>(t.find(k)));
          e->second = -1; // the original keeps its value
        }
        same(t, want);
        name_table<int> assigned;
        assigned.try_emplace("stale");
        assigned = t;
        same(assigned, want);
      }
    }
    same(t, want);
    for (auto& [k, v] : std::map<std::string, int>(want))
      t.erase(t.find(k));
    CHECK(t.empty());
    CHECK(t.find("relay-1") == nullptr);
  }
}
