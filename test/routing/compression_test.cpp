#include <doctest/doctest.h>

#include <cmath>

#include "routing/compression.hpp"

using namespace gwtf::routing;

namespace {
// The demo model's activation: microbatch 2 x seq 64 x hidden 128 values.
constexpr std::int64_t n = 2 * 64 * 128;
constexpr double dense_bytes = n * 2.0;
} // namespace

TEST_CASE("adaptive compression: a link that keeps up with the receiver's compute stays dense") {
  compression_policy p;
  // Dense transfer 16384 * 2 B / 1 GB/s = 33 us, compute 10 ms.
  auto w = plan_wire(p, n, 1e9, 0.010);
  CHECK_FALSE(w.sparse);
  CHECK(w.keep == n);
  CHECK(w.bytes == dense_bytes);
}

TEST_CASE("adaptive compression: k follows the bandwidth of a slow link") {
  compression_policy p;
  p.min_density = 0.01;
  double compute = 0.001;
  // Dense bytes take 2x / 4x / 8x the compute: the kept values fill the compute time.
  std::int64_t last = n + 1;
  for (double slower : {2.0, 4.0, 8.0}) {
    double bw = dense_bytes / (slower * compute);
    auto w = plan_wire(p, n, bw, compute);
    CAPTURE(slower);
    REQUIRE(w.sparse);
    CHECK(w.keep < last);
    last = w.keep;
    CHECK(w.bytes == doctest::Approx(static_cast<double>(w.keep) * (2 + sparse_index_bytes)));
    // The transfer takes the compute time (within one value).
    CHECK(w.bytes / bw <= compute);
    CHECK((w.bytes + 6) / bw > compute);
  }
  // Half the bandwidth, about half the values.
  auto a = plan_wire(p, n, dense_bytes / (4 * compute), compute);
  auto b = plan_wire(p, n, dense_bytes / (8 * compute), compute);
  CHECK(static_cast<double>(b.keep) == doctest::Approx(static_cast<double>(a.keep) / 2).epsilon(0.01));
}

TEST_CASE("adaptive compression: never below the minimum density, never more bytes than dense") {
  compression_policy p;
  p.min_density = 0.1;
  // Extremely slow link: the minimum density holds.
  auto w = plan_wire(p, n, 1e3, 0.001);
  REQUIRE(w.sparse);
  CHECK(w.keep == static_cast<std::int64_t>(std::ceil(0.1 * n)));
  // Slower than compute by 1.5x: 2/3 of the dense bytes fit, as 6-byte values: 22% kept.
  auto d = plan_wire(p, n, dense_bytes / (1.5 * 0.001), 0.001);
  CHECK(d.sparse);
  CHECK(d.keep == static_cast<std::int64_t>(std::floor(dense_bytes / 1.5 / 6)));
  // Slower by only 1.2x: 5/6 of the bytes would fit, but the minimum density of 0.4 costs
  // 2.4 bytes per value, more than dense: dense.
  p.min_density = 0.4;
  auto e = plan_wire(p, n, dense_bytes / (1.2 * 0.001), 0.001);
  CHECK_FALSE(e.sparse);
  CHECK(e.bytes == dense_bytes);
  // A minimum density above 1/3 can never pay for its indices.
  p.min_density = 0.5;
  CHECK_FALSE(plan_wire(p, n, 1e3, 0.001).sparse);
}

TEST_CASE("adaptive compression: unmeasured links and computes stay dense unless every link is forced") {
  compression_policy p;
  CHECK_FALSE(plan_wire(p, n, std::nullopt, 0.001).sparse);
  CHECK_FALSE(plan_wire(p, n, 1e3, 0).sparse);
  CHECK_FALSE(plan_wire(p, n, 0.0, 0.001).sparse);
  p.every_link = true;
  p.min_density = 0.05;
  for (auto bw : {std::optional<double>{}, std::optional<double>{1e12}}) {
    auto w = plan_wire(p, n, bw, 0);
    CHECK(w.sparse);
    CHECK(w.keep == static_cast<std::int64_t>(std::ceil(0.05 * n)));
  }
  CHECK_FALSE(plan_wire(p, 0, 1e3, 1).sparse);
}
