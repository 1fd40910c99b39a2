#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>

#include "app/config/check_report.hpp"
#include "app/config/derive.hpp"

using namespace gwtf::app;

namespace {

cluster_config load(const std::filesystem::path& file) {
  auto r = load_cluster_config(file);
  REQUIRE(r.config);
  return *r.config;
}

const std::filesystem::path src{GWTF_SOURCE_DIR};

} // namespace

TEST_CASE("--check derivations for the embedded cluster: partition, bottleneck, batch") {
  auto cfg = load(src / "test/app/good_configs/minimal.yaml");
  cfg.hosts[1].capacity = 2; // stage 1 becomes the bottleneck
  auto text = derived_report(cfg);
  INFO(text);
  // The defaults: GPT, 4 blocks of width 128 (MLP 512), seq_len 64, vocab 256. Stage 0:
  // wte 256 x 128 + wpe 64 x 128 + final norm 2 x 128 + head 256 x 128; its step multiplies
  // only in the head: 3 x 2 x 128 x 256 FLOP per token. A block: 12 x 128^2 + 13 x 128; its
  // step 3 x 2 x (24 x 128^2 + 4 x 64 x 128) per token.
  CHECK(text.find("#   stage 0: embedding + final norm, LM head, loss (73984 parameters, 0.20 MFLOP per token "
                  "forward + backward); hosts: dh (capacity 4)") != std::string::npos);
  CHECK(text.find("#   stage 1: blocks 0-1 (396544 parameters, 2.56 MFLOP per token forward + backward); "
                  "hosts: r1 (capacity 2)") != std::string::npos);
  CHECK(text.find("#   stage 2: blocks 2-3 (396544 parameters, 2.56 MFLOP per token forward + backward); "
                  "hosts: r2 (capacity 4)") != std::string::npos);
  CHECK(text.find("MLP width 512, 867072 parameters") != std::string::npos);
  CHECK(text.find("at most 2 microbatches in flight (bottleneck: stage 1, capacity 2)") != std::string::npos);
  CHECK(text.find("global batch: 4 microbatches per iteration (16 sequences)") != std::string::npos);
  // Memory per host: stage 1 holds 396544 parameters (1.59 MB in fp32): weights 2, Adam 3,
  // gradients plus one sum per data holder (1) 3, shares of 2 replicas (r1 and the assumed
  // second one) 3; activations of 2 microbatches x 2 blocks x (b 4 x s 64 x h 128) x (68 +
  // 10 x 4 heads x 64 / 128) bytes = 11.5 MB: 23 MB.
  CHECK(text.find("#   r1: 23 (2 + 3 + 3 + 3 + 12)") != std::string::npos);
  CHECK(text.find("need about") != std::string::npos);
  CHECK(text.find("# warning:") == std::string::npos);
  auto small = derived_report(cfg, 1000000); // a 1 MB machine
  CHECK(small.find("# warning: more than this machine's memory") != std::string::npos);
  auto remat = cfg;
  remat.routing.gwtf.backward = gwtf::routing::gwtf_backward::rematerialize;
  // Rematerialised: 2 inputs of 4 x 64 x 128 x 4 bytes, plus one microbatch's 2 blocks: 6 MB.
  CHECK(derived_report(remat, 0).find("#   r1: 17 (2 + 3 + 3 + 3 + 6)") != std::string::npos);
  // Key order keeps one sum per microbatch counted, at most the iteration's 4: gradients
  // 1.59 x 5 = 8 MB. Exact keeps int64 sums per holder (1.59 x 3 = 5) and int64 shares (6).
  auto keyed = cfg;
  keyed.training.reproducible_sums = gwtf::model::sum_order::key_order;
  auto keyed_text = derived_report(keyed, 0);
  CHECK(keyed_text.find("#   r1: 27 (2 + 3 + 8 + 3 + 12)") != std::string::npos);
  CHECK(keyed_text.find("one sum per microbatch counted (reproducible_sums: key_order)") != std::string::npos);
  auto exact = cfg;
  exact.training.reproducible_sums = gwtf::model::sum_order::exact;
  CHECK(derived_report(exact, 0).find("#   r1: 27 (2 + 3 + 5 + 6 + 12)") != std::string::npos);
  // Every line is a YAML comment, so that --check output stays a loadable config.
  std::size_t pos = 0;
  while (pos < text.size()) {
    CHECK(text[pos] == '#');
    pos = text.find('\n', pos) + 1;
  }
}

TEST_CASE("--check counts a swapped relay's resident blocks, not its whole state") {
  auto cfg = load(src / "test/app/good_configs/minimal.yaml");
  // Stage 1: 2 blocks of 198272 parameters, 3.2 MB of state each (16 bytes a parameter):
  // a budget of 2 MiB keeps one resident, the rest in the swap file.
  cfg.hosts[1].memory_budget_mb = 2;
  auto text = derived_report(cfg);
  INFO(text);
  auto line = text.substr(text.find("#   r1: "));
  line = line.substr(0, line.find('\n'));
  CHECK(line.find("(swapped: 1 of 2 blocks resident, 3 + ") != std::string::npos);
  // The stash of a microbatch in flight (2 blocks x 128 KiB) beside one resident block
  // leaves room for one of its four: the capacity drops, and the stage's line and the flow
  // bound say so.
  CHECK(line.find(" in its swap file; capacity 1 of 4 in its budget)") != std::string::npos);
  CHECK(text.find("blocks 0-1 (396544 parameters, 2.56 MFLOP per token forward + backward); hosts: r1 (capacity 1)")
        != std::string::npos);
  CHECK(text.find("at most 1 microbatches in flight (bottleneck: stage 1, capacity 1)") != std::string::npos);
  auto r2 = text.substr(text.find("#   r2: "));
  CHECK(r2.substr(0, r2.find('\n')).find("swapped") == std::string::npos);
  cfg.hosts[1].memory_budget_mb = 7; // above its state: in memory, but not 4 stashing microbatches beside it
  auto whole = derived_report(cfg);
  CHECK(whole.find("swapped") == std::string::npos);
  CHECK(whole.find("capacity 1 of 4 in its budget") != std::string::npos);
  cfg.hosts[1].memory_budget_mb = 100; // room for everything: nothing lowered
  CHECK(derived_report(cfg).find("in its budget") == std::string::npos);
}

TEST_CASE("--check on one host of a real cluster does not pretend to know the flows") {
  auto cfg = load(src / "configs/cluster.yaml");
  auto text = derived_report(cfg);
  CHECK(text.find("node mode: this process is one host") != std::string::npos);
  CHECK(text.find("microbatches in flight") == std::string::npos);
  // The cluster hash printed is the one hosts compare: it changes with a shared section
  // and not with a per-host one.
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cluster_hash(cfg)));
  CHECK(text.find(std::string{"cluster hash "} + hash) != std::string::npos);
  auto other_host = cfg;
  other_host.hosts[0].name = "relay-elsewhere";
  other_host.node.listen = "0.0.0.0:5000";
  other_host.training.loss_out = "/tmp/x.csv";
  CHECK(cluster_hash(other_host) == cluster_hash(cfg));
  auto other_model = cfg;
  other_model.model.layers += 1;
  CHECK(cluster_hash(other_model) != cluster_hash(cfg));
  auto other_roster = cfg;
  other_roster.training.data_holders.pop_back();
  CHECK(cluster_hash(other_roster) != cluster_hash(cfg));
  // Failure detection is shared: a host timing out sooner than its peers would declare
  // them dead. What the launcher changes per host (its fault script) is not.
  for (auto change : {&gwtf::actors::fault_config::heartbeat_interval_ms, &gwtf::actors::fault_config::connection_timeout_ms,
                      &gwtf::actors::fault_config::hop_timeout_ms}) {
    auto other_timing = cfg;
    other_timing.faults.*change += 100;
    CHECK(cluster_hash(other_timing) != cluster_hash(cfg));
  }
  auto scripted = cfg;
  scripted.faults.crash_rate = 0.5;
  scripted.faults.script.push_back({});
  CHECK(cluster_hash(scripted) == cluster_hash(cfg));
}

TEST_CASE("--check reports the network part of the optimal routing on the emulated network") {
  auto cfg = load(src / "configs/local.yaml");
  auto text = derived_report(cfg);
  CHECK(text.find("network 'aws-8', time scale 0.1: optimal routing costs") != std::string::npos);
}
