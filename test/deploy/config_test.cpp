// Config loading: every error path with real YAML files, the shipped configs, round trips.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "deploy/cluster_config.hpp"

namespace fs = std::filesystem;
using namespace gwtf::deploy;

namespace {

const fs::path source_dir{GWTF_SOURCE_DIR};
const fs::path test_dir = source_dir / "test" / "deploy";

// "# expect: LINE:COL KEY | TEXT" on the first line of every file in bad_configs/.
struct expectation {
  int line = 0;
  int column = 0;
  std::string key;
  std::string text;
};

expectation read_expectation(const fs::path& file) {
  std::ifstream in{file};
  std::string first;
  std::getline(in, first);
  static const std::regex re{R"(^# expect: (\d+):(\d+) (\S+) \| (.+)$)"};
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_match(first, m, re), file.string() << ": first line must be '# expect: LINE:COL KEY | TEXT'");
  return expectation{std::stoi(m[1]), std::stoi(m[2]), m[3] == "-" ? "" : m[3].str(), m[4]};
}

std::string all_errors(const std::vector<config_error>& errors) {
  std::string out;
  for (auto& e : errors)
    out += "  " + e.to_string() + "\n";
  return out;
}

} // namespace

TEST_CASE("every bad config is rejected with the expected file:line:column, key path and text") {
  int files = 0;
  for (auto& entry : fs::directory_iterator(test_dir / "bad_configs")) {
    if (entry.path().extension() != ".yaml")
      continue;
    ++files;
    auto want = read_expectation(entry.path());
    auto result = load_cluster_config(entry.path());
    INFO("file: " << entry.path().filename().string() << "\nerrors:\n" << all_errors(result.errors));
    CHECK_FALSE(result.config.has_value());
    bool found = std::any_of(result.errors.begin(), result.errors.end(), [&](const config_error& e) {
      return e.line == want.line && e.column == want.column && e.key == want.key
             && e.message.find(want.text) != std::string::npos;
    });
    CHECK_MESSAGE(found, "expected " << want.line << ":" << want.column << " " << want.key << " | "
                                     << want.text);
    // Every error names a real file: this one, or one it refers to (a network matrix).
    for (auto& e : result.errors) {
      CHECK(fs::is_regular_file(e.file));
      CHECK(e.to_string().rfind(e.file + ":", 0) == 0);
    }
  }
  CHECK(files >= 25);
}

TEST_CASE("a misspelled key, a wrong type and an out-of-range value are all reported together") {
  std::string text = R"(hosts:
  - {name: dh, role: data_holder}
  - {name: r1, role: relay, stage: 1}
  - {name: r2, role: relay, stage: 2}
data: {path: corpus.txt}
model: {layerz: 4, hidden: big}
routing: {gwtf: {cooling: 1.5}, swarm: {refresh: 10}}
)";
  auto result = parse_cluster_config(text, "inline.yaml", test_dir / "good_configs");
  INFO(all_errors(result.errors));
  REQUIRE_FALSE(result.config);
  // Type errors stop before semantic checks: the typo and the bad type come back.
  std::vector<std::string> keys;
  for (auto& e : result.errors)
    keys.push_back(e.key);
  CHECK(std::count(keys.begin(), keys.end(), "model.layerz") == 1);
  CHECK(std::count(keys.begin(), keys.end(), "model.hidden") == 1);
  CHECK(std::count(keys.begin(), keys.end(), "routing.swarm.refresh") == 1);
}

TEST_CASE("several semantic errors are reported in one pass") {
  std::string text = R"(hosts:
  - {name: dh, role: data_holder}
  - {name: r1, role: relay, stage: 1}
  - {name: r2, role: relay, stage: 2}
data: {path: corpus.txt}
routing: {gwtf: {cooling: 1.5}}
training: {beta2: 1.0, warmup_iterations: -1}
)";
  auto result = parse_cluster_config(text, "inline.yaml", test_dir / "good_configs");
  INFO(all_errors(result.errors));
  REQUIRE(result.errors.size() == 3);
  CHECK(result.errors[0].key == "training.warmup_iterations");
  CHECK(result.errors[1].key == "training.beta2");
  CHECK(result.errors[2].key == "routing.gwtf.cooling");
  CHECK(result.errors[2].line == 6);
}

TEST_CASE("a missing config file is an error that names it") {
  auto result = load_cluster_config(test_dir / "no-such-file.yaml");
  REQUIRE(result.errors.size() == 1);
  CHECK(result.errors[0].to_string().find("no-such-file.yaml: cannot read config: no such file")
        != std::string::npos);
}

TEST_CASE("the shipped configs and the minimal test config are valid") {
  for (auto file : {source_dir / "configs" / "local.yaml", source_dir / "configs" / "cluster.yaml",
                    test_dir / "good_configs" / "minimal.yaml"}) {
    auto result = load_cluster_config(file);
    INFO(file.string() << "\n" << all_errors(result.errors));
    CHECK(result.errors.empty());
    CHECK(result.config.has_value());
  }
}

TEST_CASE("defaults fill every key left out, and relative paths resolve against the file") {
  auto result = load_cluster_config(test_dir / "good_configs" / "minimal.yaml");
  REQUIRE(result.config);
  auto& cfg = *result.config;
  CHECK(cfg.model.stages == 3);
  CHECK(cfg.training.lr == doctest::Approx(3e-3));
  CHECK(cfg.routing.gwtf.initial_temperature == doctest::Approx(1.7));
  CHECK(cfg.routing.gwtf.cooling == doctest::Approx(0.95));
  CHECK(cfg.routing.swarm.backward_factor == doctest::Approx(2.5));
  CHECK(cfg.hosts[0].stage == 0); // data holders are stage 0
  CHECK(cfg.hosts[0].capacity == 4);
  CHECK_FALSE(cfg.emulation.has_value());
  CHECK(fs::path{cfg.data.path}.is_absolute());
  CHECK(fs::equivalent(cfg.data.path, test_dir / "good_configs" / "corpus.txt"));
}

TEST_CASE("local.yaml loads its network matrix and places every host in one of its regions") {
  auto result = load_cluster_config(source_dir / "configs" / "local.yaml");
  REQUIRE(result.config);
  auto& cfg = *result.config;
  REQUIRE(cfg.emulation);
  REQUIRE(cfg.network);
  CHECK(cfg.network->name == "aws-8");
  CHECK(cfg.network->regions.size() == 8);
  for (auto& h : cfg.hosts)
    CHECK(cfg.network->region_index(h.region).has_value());
  CHECK(cfg.faults.script.size() == 4);
}

TEST_CASE("the resolved config printed by to_yaml loads again to the same config") {
  for (auto file : {source_dir / "configs" / "local.yaml", source_dir / "configs" / "cluster.yaml"}) {
    auto first = load_cluster_config(file);
    REQUIRE(first.config);
    auto printed = to_yaml(*first.config);
    auto second = parse_cluster_config(printed, "printed.yaml", file.parent_path());
    INFO(printed << all_errors(second.errors));
    REQUIRE(second.config);
    CHECK(to_yaml(*second.config) == printed);
  }
}

TEST_CASE("doubles print as the shortest text that reads back exactly") {
  gwtf::deploy::cluster_config cfg;
  cfg.training.lr = 0.1 + 0.2; // 0.30000000000000004
  cfg.training.min_lr = 1e-5;
  cfg.training.beta1 = 1.0;
  auto text = to_yaml(cfg);
  CHECK(text.find("lr: 0.30000000000000004") != std::string::npos);
  CHECK(text.find("min_lr: 1e-05") != std::string::npos);
  CHECK(text.find("beta1: 1.0\n") != std::string::npos);
}
