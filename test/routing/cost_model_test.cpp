#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "routing/cost_model.hpp"

using namespace gwtf::routing;

TEST_CASE("d_ij = (c_i + c_j)/2 + (lat_ij + lat_ji)/2 + 2*size/(bw_ij + bw_ji)") {
  link_estimate ij{0.010, 1e6};
  link_estimate ji{0.030, 3e6};
  // 0.2 + 0.02 + 2e6 / 4e6
  CHECK(edge_cost(0.1, 0.3, ij, ji, 1e6) == doctest::Approx(0.72));
  // Forward and backward averaged: the cost does not depend on the direction.
  CHECK(edge_cost(0.3, 0.1, ji, ij, 1e6) == doctest::Approx(edge_cost(0.1, 0.3, ij, ji, 1e6)));
}

TEST_CASE("matrix units convert to seconds and bytes per second") {
  auto e = to_estimate(link_params{20.0, 8.0});
  CHECK(e.latency_s == doctest::Approx(0.020));
  CHECK(e.bandwidth_bytes_s == doctest::Approx(1e6));
}

TEST_CASE("a link with no bandwidth either way is unusable") {
  CHECK(std::isinf(edge_cost(0, 0, link_estimate{0.01, 0}, link_estimate{0.01, 0}, 100)));
}

TEST_CASE("along a ring path the costs count every compute once and every link once") {
  // Ring 0 -> 1 -> 2 -> 3 -> 0 with distinct computes and links.
  std::vector<double> c{0.05, 0.2, 0.3, 0.1};
  std::vector<link_estimate> fwd{{0.01, 1e6}, {0.02, 2e6}, {0.03, 3e6}, {0.04, 4e6}};
  std::vector<link_estimate> back{{0.015, 2e6}, {0.025, 1e6}, {0.035, 5e6}, {0.045, 2e6}};
  double size = 5e5;
  double sum = 0;
  double expected_links = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    sum += edge_cost(c[k], c[(k + 1) % 4], fwd[k], back[k], size);
    expected_links += (fwd[k].latency_s + back[k].latency_s) / 2
                      + 2 * size / (fwd[k].bandwidth_bytes_s + back[k].bandwidth_bytes_s);
  }
  CHECK(sum == doctest::Approx(0.05 + 0.2 + 0.3 + 0.1 + expected_links));
}
