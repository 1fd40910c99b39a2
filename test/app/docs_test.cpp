// docs/config.md must document every key the loader accepts, and nothing else.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "app/config/cluster_config.hpp"
#include "app/sim/scenario.hpp"
#include "app/config/yaml_fields.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// First backticked token of every table row: "| `training.lr` | ..." -> "training.lr".
std::set<std::string> documented_keys(const std::string& md) {
  std::set<std::string> out;
  std::istringstream in{md};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0)
      continue;
    auto end = line.find('`', 3);
    if (end != std::string::npos)
      out.insert(line.substr(3, end - 3));
  }
  return out;
}

} // namespace

TEST_CASE("docs/config.md documents exactly the keys the loader accepts") {
  auto md = read_file(std::string{GWTF_SOURCE_DIR} + "/docs/config.md");
  auto documented = documented_keys(md);
  std::set<std::string> accepted;
  for (auto& k : gwtf::app::config_key_paths())
    accepted.insert(k);
  // Keys of a network matrix file are documented in the same page.
  std::vector<std::string> net_keys;
  gwtf::routing::network_matrix net;
  gwtf::app::detail::key_collector collect{"", net_keys};
  visit_fields(collect, net);
  for (auto& k : net_keys)
    accepted.insert("network:" + k);
  CHECK(accepted.size() > 60);
  for (auto& k : accepted)
    CHECK_MESSAGE(documented.count(k) == 1, "undocumented key: " << k);
  for (auto& k : documented)
    CHECK_MESSAGE(accepted.count(k) == 1, "documented key that the loader does not accept: " << k);
}

TEST_CASE("docs/simulator.md documents exactly the keys a scenario accepts") {
  auto documented = documented_keys(read_file(std::string{GWTF_SOURCE_DIR} + "/docs/simulator.md"));
  std::set<std::string> accepted;
  for (auto& k : gwtf::app::scenario_key_paths())
    accepted.insert(k);
  CHECK(accepted.size() > 30);
  for (auto& k : accepted)
    CHECK_MESSAGE(documented.count(k) == 1, "undocumented scenario key: " << k);
  for (auto& k : documented)
    CHECK_MESSAGE(accepted.count(k) == 1, "documented key that a scenario does not accept: " << k);
}
