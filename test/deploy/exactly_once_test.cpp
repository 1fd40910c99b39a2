// The drivers' exactly-once check (deploy/exactly_once), fed the way the runtime reports.
#include <doctest/doctest.h>

#include "deploy/exactly_once.hpp"
#include "model/data.hpp"

using namespace gwtf;
using gwtf::deploy::exactly_once_violation;

namespace {

std::uint64_t key(std::uint64_t i, std::uint32_t h, std::uint32_t j) { return model::microbatch_id{i, h, j}.key(); }

const std::vector<std::string> roster = {"dh-a", "dh-b"};

} // namespace

TEST_CASE("exactly once: every finished microbatch counted once by the averaged replicas passes") {
  deploy::share_reports reports{{"r1", {key(7, 0, 0), key(7, 1, 1)}}, {"r1b", {key(7, 0, 1), key(7, 1, 0)}}};
  CHECK_FALSE(exactly_once_violation(1, 7, roster, {{"dh-a", 2}, {"dh-b", 2}}, {"r1", "r1b"}, reports));
}

TEST_CASE("exactly once: an injected double count and a lost microbatch are caught and named") {
  // r1b counted dh-a's microbatch 0 as well: counted twice.
  deploy::share_reports doubled{{"r1", {key(7, 0, 0), key(7, 1, 1)}},
                                {"r1b", {key(7, 0, 0), key(7, 0, 1), key(7, 1, 0)}}};
  CHECK(exactly_once_violation(1, 7, roster, {{"dh-a", 2}, {"dh-b", 2}}, {"r1", "r1b"}, doubled)
        == std::optional<std::string>{"stage 1 iteration 7: 0 missing, 1 counted twice"});
  // dh-b's microbatch 1 is in nobody's share.
  deploy::share_reports lost{{"r1", {key(7, 0, 0)}}, {"r1b", {key(7, 0, 1), key(7, 1, 0)}}};
  CHECK(exactly_once_violation(2, 7, roster, {{"dh-a", 2}, {"dh-b", 2}}, {"r1", "r1b"}, lost)
        == std::optional<std::string>{"stage 2 iteration 7: 1 missing, 0 counted twice"});
  // A key of another iteration does not stand in for this one's.
  deploy::share_reports stale{{"r1", {key(6, 0, 0), key(7, 0, 1)}}};
  CHECK(exactly_once_violation(1, 7, roster, {{"dh-a", 2}}, {"r1"}, stale)
        == std::optional<std::string>{"stage 1 iteration 7: 1 missing, 0 counted twice"});
}

TEST_CASE("exactly once: only the averaged replicas count, holders without a report are skipped") {
  // r1b crashed after counting dh-a's microbatch 0; its share was dropped (not a
  // contributor) and r1 counted the re-sent microbatch: once.
  deploy::share_reports reports{{"r1", {key(3, 0, 0), key(3, 0, 1)}}, {"r1b", {key(3, 0, 0)}}};
  CHECK_FALSE(exactly_once_violation(1, 3, roster, {{"dh-a", 2}}, {"r1"}, reports));
  // The same reports with r1b averaged too: a double count.
  CHECK(exactly_once_violation(1, 3, roster, {{"dh-a", 2}}, {"r1", "r1b"}, reports).has_value());
}
