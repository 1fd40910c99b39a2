#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "app/config/cluster_config.hpp"
#include "routing/network.hpp"

using namespace gwtf;

namespace {
const std::string src = GWTF_SOURCE_DIR;
}

TEST_CASE("network matrices: both shipped scenarios load, with the file's values") {
  auto aws = app::load_network_matrix(src + "/configs/networks/aws-8.yaml");
  REQUIRE(aws.network);
  CHECK(aws.network->name == "aws-8");
  CHECK(aws.network->regions.size() == 8);
  auto oregon = *aws.network->region_index("oregon");
  auto virginia = *aws.network->region_index("virginia");
  CHECK(aws.network->link(oregon, virginia).latency_ms == doctest::Approx(33.5));
  CHECK(aws.network->link(oregon, virginia).bandwidth_mbps == doctest::Approx(790));
  // Inside a region the intra-region link applies, not the matrix's zero diagonal.
  CHECK(aws.network->link(oregon, oregon).latency_ms == doctest::Approx(2.5));
  CHECK(aws.network->link(oregon, oregon).bandwidth_mbps == doctest::Approx(2000));

  auto gcp = app::load_network_matrix(src + "/configs/networks/gcp-12.yaml");
  REQUIRE(gcp.network);
  CHECK(gcp.network->regions.size() == 12);
  CHECK(gcp.network->intra_region.latency_ms == doctest::Approx(1));
  CHECK_FALSE(gcp.network->region_index("mars").has_value());
}

TEST_CASE("network matrices: shape and value errors name the file, line and cell") {
  auto path = src + "/test/app/networks/broken-2-regions-3-rows.yaml";
  auto r = app::load_network_matrix(path);
  CHECK_FALSE(r.network);
  auto has = [&](const std::string& key, int line, const std::string& text) {
    return std::any_of(r.errors.begin(), r.errors.end(), [&](const app::config_error& e) {
      return e.key == key && e.line == line && e.file == path && e.message.find(text) != std::string::npos;
    });
  };
  for (auto& e : r.errors)
    INFO(e.to_string());
  CHECK(has("latency_ms", 5, "a 2 x 2 matrix (one row per region), got 3 rows"));
  CHECK(has("bandwidth_mbps[1][0]", 10, "a positive bandwidth in Mbit/s, got 0"));
  CHECK(r.errors.size() == 2);
}

TEST_CASE("network matrices: any region list works, no code needed for new regions") {
  routing::network_matrix net;
  net.name = "three";
  net.regions = {"a", "b", "c"};
  net.latency_ms = {{0, 1, 2}, {1, 0, 3}, {2, 3, 0}};
  net.bandwidth_mbps = {{0, 10, 20}, {10, 0, 30}, {20, 30, 0}};
  int issues = 0;
  net.validate([&](const std::string&, const std::string&) { ++issues; });
  CHECK(issues == 0);
  net.regions.push_back("a");
  std::vector<std::string> keys;
  net.validate([&](const std::string& k, const std::string&) { keys.push_back(k); });
  CHECK(std::find(keys.begin(), keys.end(), "regions[3]") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "latency_ms") != keys.end());
}
