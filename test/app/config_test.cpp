// Config loading: every error path with real YAML files, the shipped configs, round trips.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "app/config/cluster_config.hpp"
#include "app/config/derive.hpp"

namespace fs = std::filesystem;
using namespace gwtf::app;

namespace {

const fs::path source_dir{GWTF_SOURCE_DIR};
const fs::path test_dir = source_dir / "test" / "app";

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
                    source_dir / "configs" / "gpt2-small.yaml", source_dir / "configs" / "llama-350m.yaml",
                    test_dir / "good_configs" / "minimal.yaml"}) {
    auto result = load_cluster_config(file);
    INFO(file.string() << "\n" << all_errors(result.errors));
    CHECK(result.errors.empty());
    CHECK(result.config.has_value());
  }
}

TEST_CASE("every shipped network matrix loads, and the starved gcp-12 keeps 50 Mbit/s between regions") {
  int files = 0;
  for (auto& e : fs::directory_iterator(source_dir / "configs" / "networks")) {
    if (e.path().extension() != ".yaml")
      continue;
    ++files;
    auto net = load_network_matrix(e.path());
    INFO(e.path().string() << "\n" << all_errors(net.errors));
    CHECK(net.errors.empty());
    REQUIRE(net.network.has_value());
    CHECK(net.network->name == e.path().stem().string());
  }
  CHECK(files >= 3);
  auto full = load_network_matrix(source_dir / "configs" / "networks" / "gcp-12.yaml");
  auto starved = load_network_matrix(source_dir / "configs" / "networks" / "gcp-12-starved.yaml");
  REQUIRE(full.network.has_value());
  REQUIRE(starved.network.has_value());
  CHECK(starved.network->regions == full.network->regions);
  CHECK(starved.network->latency_ms == full.network->latency_ms);
  auto n = full.network->regions.size();
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b)
      if (a != b)
        CHECK(starved.network->link(a, b).bandwidth_mbps == 50);
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
  gwtf::app::cluster_config cfg;
  cfg.training.lr = 0.1 + 0.2; // 0.30000000000000004
  cfg.training.min_lr = 1e-5;
  cfg.training.beta1 = 1.0;
  auto text = to_yaml(cfg);
  CHECK(text.find("lr: 0.30000000000000004") != std::string::npos);
  CHECK(text.find("min_lr: 1e-05") != std::string::npos);
  CHECK(text.find("beta1: 1.0\n") != std::string::npos);
}

namespace {

env_lookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>{it->second};
  };
}

const char* node_text = R"(node:
  listen: "0.0.0.0:${PORT:-4242}"
  advertise: "${POD_NAME}.peers:${PORT:-4242}"
  bootstrap: ["dh-0.peers:4242"]
  tls: {certificate: host.crt, key: host.key, ca: ca.crt}
hosts:
  - name: ${POD_NAME}
    role: relay
    stage: ${STAGE:--1}
model: {stages: 3}
training: {data_holders: [dh-0]}
)";

} // namespace

TEST_CASE("expand_env replaces variables, applies defaults and rejects what it cannot expand") {
  auto env = fake_env({{"A", "x"}, {"EMPTY", ""}});
  std::string why;
  CHECK(expand_env("a${A}b${A}", env, why) == "axbx");
  CHECK(expand_env("${MISSING:-d}/${EMPTY:-e}/${A:-f}", env, why) == "d/e/x");
  CHECK(expand_env("cost $5, $$HOME, ${A:-}", env, why) == "cost $5, $HOME, x");
  CHECK(expand_env("${MISSING:-}", env, why) == "");
  CHECK_FALSE(expand_env("${MISSING}", env, why));
  CHECK(why.find("environment variable MISSING is not set") != std::string::npos);
  CHECK_FALSE(expand_env("${A", env, why));
  CHECK(why.find("unterminated") != std::string::npos);
  CHECK_FALSE(expand_env("${1A}", env, why));
  CHECK_FALSE(expand_env("${A-B}", env, why));
  CHECK(why.find("${NAME:-default}") != std::string::npos);
}

TEST_CASE("one cluster.yaml serves every pod: environment variables in values and --set overrides") {
  config_overrides extra;
  extra.env = fake_env({{"POD_NAME", "relay-3"}, {"PORT", "5000"}});
  auto r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
  INFO(all_errors(r.errors));
  REQUIRE(r.config);
  CHECK(r.config->node.listen == "0.0.0.0:5000");
  CHECK(r.config->node.advertise == "relay-3.peers:5000");
  CHECK(r.config->hosts.at(0).name == "relay-3");
  CHECK(r.config->hosts.at(0).stage == -1);
  // --set wins over the file, in order; lists and maps are YAML values.
  extra.sets = {"hosts[0].stage=2", "node.bootstrap=[a:1, b:2]", "training.iterations=5",
                "training.iterations=6", "faults={heartbeat_interval_ms: 300, connection_timeout_ms: 900}"};
  r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
  INFO(all_errors(r.errors));
  REQUIRE(r.config);
  CHECK(r.config->hosts.at(0).stage == 2);
  CHECK(r.config->node.bootstrap == std::vector<std::string>{"a:1", "b:2"});
  CHECK(r.config->training.iterations == 6);
  CHECK(r.config->faults.connection_timeout_ms == 900);
  // A whole config from --set alone.
  config_overrides only;
  only.sets = {"hosts=[{name: r, role: relay, stage: 1}]", "model.stages=2", "training.data_holders=[d]"};
  auto empty = parse_cluster_config("", "empty.yaml", test_dir, only);
  INFO(all_errors(empty.errors));
  CHECK(empty.config);
}

TEST_CASE("hosts' emulated network cards: both in the embedded cluster and in node mode") {
  config_overrides embedded;
  embedded.sets = {"hosts=[{name: d, role: data_holder, uplink_mbit: 100, downlink_mbit: 500}, {name: r, role: relay, stage: 1}]",
                   "model.stages=2", "data.path=good_configs/corpus.txt"};
  auto ok = parse_cluster_config("", "e.yaml", test_dir, embedded);
  INFO(all_errors(ok.errors));
  REQUIRE(ok.config);
  CHECK(ok.config->hosts.at(0).uplink_mbit == 100);
  CHECK(ok.config->hosts.at(0).downlink_mbit == 500);
  CHECK(ok.config->hosts.at(1).uplink_mbit == 0);

  config_overrides node;
  node.sets = {"hosts=[{name: r, role: relay, stage: 1, uplink_mbit: 20, downlink_mbit: 200}]", "model.stages=2",
               "training.data_holders=[d]"};
  auto one = parse_cluster_config("", "n.yaml", test_dir, node); // the receiving host emulates its downlink
  INFO(all_errors(one.errors));
  REQUIRE(one.config);
  CHECK(one.config->hosts.at(0).downlink_mbit == 200);
  CHECK(one.config->hosts.at(0).uplink_mbit == 20);
  node.sets[0] = "hosts=[{name: r, role: relay, stage: 1, uplink_mbit: -1}]";
  auto negative = parse_cluster_config("", "n.yaml", test_dir, node);
  REQUIRE_FALSE(negative.config);
  CHECK(all_errors(negative.errors).find("hosts[0].uplink_mbit: expected Mbit/s, 0 = no limit") != std::string::npos);
}

TEST_CASE("errors from the environment name the file's line, errors from --set name the argument") {
  config_overrides extra;
  extra.env = fake_env({{"PORT", "5000"}});
  auto r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
  REQUIRE_FALSE(r.config);
  INFO(all_errors(r.errors));
  REQUIRE(r.errors.size() == 2); // POD_NAME in advertise and in hosts[0].name
  CHECK(r.errors[0].to_string()
        == "cm.yaml:3:14: node.advertise: environment variable POD_NAME is not set (write ${POD_NAME:-default} for a default)");
  CHECK(r.errors[1].key == "hosts[0].name");
  CHECK(r.errors[1].line == 7);

  extra.env = fake_env({{"POD_NAME", "r"}, {"STAGE", "9"}});
  extra.sets = {"node.advertize=x:1"};
  r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
  REQUIRE_FALSE(r.config);
  INFO(all_errors(r.errors));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].file == "--set node.advertize=x:1");
  CHECK(r.errors[0].key == "node.advertize");
  CHECK(r.errors[0].message.find("did you mean 'advertise'") != std::string::npos);

  // A semantic error in an expanded value still points at the file; one from --set at --set.
  extra.sets = {};
  r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
  REQUIRE_FALSE(r.config);
  INFO(all_errors(r.errors));
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].key == "hosts[0].stage");
  CHECK(r.errors[0].line == 9);
  extra.sets = {"hosts[0].stage=7"};
  r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].to_string().rfind("--set hosts[0].stage=7: hosts[0].stage: expected a relay stage in [1, 2]", 0) == 0);

  for (auto [arg, text] : std::vector<std::pair<std::string, std::string>>{
         {"hosts[4].stage=1", "no hosts[4]: hosts has 1 item(s)"},
         {"node.listen.x=1", "'node.listen' is not a map of keys"},
         {"node..listen=1", "malformed key"},
         {"hosts[x].stage=1", "expected a list index"},
         {"node.listen=[a", "not valid YAML"},
         {"training.iterations=many", "expected an integer"}}) {
    extra.sets = {arg};
    r = parse_cluster_config(node_text, "cm.yaml", test_dir, extra);
    INFO(arg << "\n" << all_errors(r.errors));
    REQUIRE_FALSE(r.config);
    REQUIRE(r.errors.size() >= 1);
    CHECK(r.errors[0].file == "--set " + arg);
    CHECK(r.errors[0].message.find(text) != std::string::npos);
  }
}

TEST_CASE("placement.policy dtfm: the founding relays as DT-FM places them, late joiners by the bottleneck rule") {
  std::string text = "hosts:\n"
                     "  - {name: dh-a, region: virginia, role: data_holder}\n"
                     "  - {name: dh-b, region: frankfurt, role: data_holder}\n"
                     "  - {name: r4, region: virginia, role: relay}\n"
                     "  - {name: r1, region: ohio, role: relay}\n"
                     "  - {name: r3, region: frankfurt, role: relay}\n"
                     "  - {name: r2, region: oregon, role: relay}\n"
                     "  - {name: r5, region: tokyo, role: relay}\n"
                     "  - {name: r6, region: london, role: relay}\n"
                     "  - {name: j1, region: seoul, role: relay}\n"
                     "placement: {policy: dtfm}\n"
                     "model: {arch: gpt, layers: 6, hidden: 128, heads: 4, seq_len: 64, stages: 4}\n"
                     "data: {path: ../good_configs/corpus.txt}\n"
                     "training: {seed: 42, iterations: 8}\n"
                     "faults: {script: [{at_iteration: 3, action: join, host: j1}]}\n"
                     "emulation: {network: ../../../configs/networks/aws-8.yaml}\n";
  auto loaded = parse_cluster_config(text, "dtfm.yaml", test_dir / "bad_configs");
  INFO(all_errors(loaded.errors));
  REQUIRE(loaded.config.has_value());
  auto& cfg = *loaded.config;
  REQUIRE(cfg.placement_network.has_value()); // emulation.network's matrix
  auto placed = placed_hosts(cfg);
  // What every founding relay computes from the full view: the relays in name order.
  auto req = dtfm_request_for(cfg);
  req.holder_regions = {"virginia", "frankfurt"};
  req.relay_regions = {"ohio", "oregon", "frankfurt", "virginia", "tokyo", "london"}; // r1..r6
  auto expected = gwtf::routing::dtfm_stages(*cfg.placement_network, req);
  REQUIRE(expected.size() == 6);
  std::map<std::string, int> stage;
  for (auto& h : placed)
    stage[h.name] = h.stage;
  for (int i = 0; i < 6; ++i)
    CHECK_MESSAGE(stage["r" + std::to_string(i + 1)] == expected[static_cast<std::size_t>(i)], "r" << i + 1);
  for (int s = 1; s <= 3; ++s) // balanced: two per relay stage
    CHECK(std::count(expected.begin(), expected.end(), s) == 2);
  CHECK(stage["j1"] >= 1); // the joiner: the bottleneck rule
  CHECK(stage["dh-a"] == 0);
  // Two GPT blocks of hidden 128 per relay stage, fp32: (12 d^2 + 13 d) parameters per block
  // (model/sizing.cpp; test/model checks the count against the torch modules).
  CHECK(req.gradient_bytes == doctest::Approx((12.0 * 128 * 128 + 13 * 128) * 2 * 4));
  // The policy is part of the cluster hash (every host must place alike), its file is not.
  auto other = cfg;
  other.placement.policy = placement_policy::gwtf;
  CHECK(cluster_hash(other) != cluster_hash(cfg));
  auto moved = cfg;
  moved.placement.network = "/elsewhere/aws-8.yaml";
  CHECK(cluster_hash(moved) == cluster_hash(cfg));
}

TEST_CASE("configs stay within what a microbatch key holds: 4096 data holders and 4096 microbatches each") {
  auto text = [](int holders, int microbatches) {
    std::string t = "hosts:\n";
    for (int h = 0; h < holders; ++h)
      t += "  - {name: dh" + std::to_string(h) + ", role: data_holder}\n";
    t += "  - {name: r1, role: relay, stage: 1}\n  - {name: r2, role: relay, stage: 2}\n"
         "data: {path: corpus.txt}\ntraining: {microbatches_per_holder: " + std::to_string(microbatches) + "}\n";
    return t;
  };
  auto at_limit = parse_cluster_config(text(2, 4096), "limit.yaml", test_dir / "good_configs");
  INFO(all_errors(at_limit.errors));
  CHECK(at_limit.config.has_value());
  auto holders = parse_cluster_config(text(4097, 4), "holders.yaml", test_dir / "good_configs");
  REQUIRE_FALSE(holders.config.has_value());
  CHECK(std::any_of(holders.errors.begin(), holders.errors.end(), [](const config_error& e) {
    return e.key == "hosts"
           && e.message == "expected at most 4096 data holders (a microbatch id keeps 12 bits for its holder), got 4097";
  }));
  // Exact sums hold 65536 microbatches per iteration (data holders x microbatches_per_holder).
  auto exact = [&](int holders) {
    auto t = text(holders, 4096);
    return t.replace(t.find("training: {"), 11, "training: {reproducible_sums: exact, share_compression: fp32, ");
  };
  auto exact_limit = parse_cluster_config(exact(16), "exact.yaml", test_dir / "good_configs");
  INFO(all_errors(exact_limit.errors));
  CHECK(exact_limit.config.has_value());
  auto exact_over = parse_cluster_config(exact(17), "exact.yaml", test_dir / "good_configs");
  REQUIRE_FALSE(exact_over.config.has_value());
  CHECK(std::any_of(exact_over.errors.begin(), exact_over.errors.end(), [](const config_error& e) {
    return e.key == "training.reproducible_sums"
           && e.message == "expected key_order or off for more than 65536 microbatches per iteration (exact sums are "
                           "int64 and hold that many), got exact with 17 data holders x 4096 microbatches_per_holder = "
                           "69632";
  }));
}

TEST_CASE("a relay's memory budget lowers its capacity, and placement sees the lowered capacity") {
  // Two blocks of d = 128 per relay stage (6.3 MB of state): a 4 MiB budget swaps stage 1's
  // r1, whose stash of 4 x 64-token microbatches (2 blocks x 128 KiB each) then fits 3 beside
  // one resident block. Stage 1 (capacity 3) becomes the bottleneck, so the stage-less r3
  // goes there; without the budget stage 2 (capacity 4 < 8) would get it.
  auto text = [](const std::string& budget) {
    return "hosts:\n"
           "  - {name: dh-a, region: local, role: data_holder}\n"
           "  - {name: r1, region: local, role: relay, stage: 1, capacity: 8" + budget + "}\n"
           "  - {name: r2, region: local, role: relay, stage: 2, capacity: 4}\n"
           "  - {name: r3, region: local, role: relay, capacity: 4}\n"
           "model: {arch: gpt, layers: 4, hidden: 128, heads: 4, seq_len: 64, stages: 3}\n"
           "data: {path: corpus.txt}\n"
           "training: {seed: 42, iterations: 8, microbatch_size: 4}\n";
  };
  auto place = [&](const std::string& budget) {
    auto loaded = parse_cluster_config(text(budget), "budget.yaml", test_dir / "good_configs");
    INFO(all_errors(loaded.errors));
    REQUIRE(loaded.config.has_value());
    std::map<std::string, gwtf::actors::host_config> by_name;
    for (auto& h : placed_hosts(*loaded.config))
      by_name[h.name] = h;
    return by_name;
  };
  auto free = place("");
  CHECK(free["r1"].capacity == 8);
  CHECK(free["r3"].stage == 2);
  auto tight = place(", memory_budget_mb: 4");
  CHECK(tight["r1"].capacity == 3);
  CHECK(tight["r2"].capacity == 4);
  CHECK(tight["r3"].stage == 1);
  CHECK(tight["dh-a"].capacity == free["dh-a"].capacity);
}
