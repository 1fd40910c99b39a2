// `caf-gwtf sim --from-config`: a cluster config becomes the simulator's scenario host for
// host: names, regions, stages, capacities, cards, compute x compute_scale, the emulated
// network with its time scale, and the trainer's faults (the script's, and the random crashes
// the trainer's driver draws: the same hosts at the same iterations).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "app/run/random_crashes.hpp"
#include "app/sim/from_config.hpp"

namespace fs = std::filesystem;
using namespace gwtf::app;
using gwtf::sim::sim_event_kind;

namespace {

const fs::path configs = fs::path{GWTF_SOURCE_DIR} / "configs";
const measured_compute compute{0.002, 0.020};

cluster_config load(const std::string& file, std::vector<std::string> sets = {}) {
  auto r = load_cluster_config(configs / file, config_overrides{std::move(sets), {}});
  for (auto& e : r.errors)
    INFO(e.to_string());
  REQUIRE(r.config.has_value());
  return std::move(*r.config);
}

// The single error of a config that cannot be simulated, as printed.
std::string error_of(const cluster_config& cfg) {
  auto r = scenario_from_config(cfg, "c.yaml", compute);
  CHECK_FALSE(r.scenario.has_value());
  REQUIRE(r.errors.size() >= 1);
  return r.errors.front().to_string();
}

} // namespace

TEST_CASE("sim --from-config: every host of the config is a simulated host with its name, stage, card and scaled compute") {
  auto cfg = load("compare.yaml", {"faults.crash_rate=0"});
  auto r = scenario_from_config(cfg, "configs/compare.yaml", compute);
  REQUIRE(r.scenario.has_value());
  auto& s = r.scenario->sim;
  CHECK(r.scenario->config.name == "compare");
  REQUIRE(s.hosts.size() == cfg.hosts.size());
  CHECK(s.stages == cfg.model.stages);
  CHECK(s.iterations == cfg.training.iterations);
  CHECK(s.microbatches_per_holder == cfg.training.microbatches_per_holder);
  CHECK(s.detect_s == doctest::Approx(cfg.faults.connection_timeout_ms / 1000.0));
  CHECK(s.activation_bytes == doctest::Approx(4.0 * cfg.training.microbatch_size * cfg.model.seq_len * cfg.model.hidden));
  CHECK(s.script.empty());
  CHECK(s.stash_bytes == 0);        // capacity counts microbatches, as the trainer's
  CHECK(s.swarm_via_trainer);       // the runtime's SWARM calls every stage from the holder
  CHECK(s.protocol_latency);        // the trainer's averaging is a protocol of messages
  for (std::size_t i = 0; i < cfg.hosts.size(); ++i) {
    auto& h = cfg.hosts[i];
    auto& sh = s.hosts[i];
    INFO(h.name);
    CHECK(sh.name == h.name);
    CHECK(s.net.regions[sh.region] == h.region);
    CHECK(sh.capacity == h.capacity);
    bool holder = h.role == gwtf::actors::host_role::data_holder;
    CHECK(sh.stage == (holder ? 0 : h.stage));
    CHECK(sh.compute_s == doctest::Approx((holder ? compute.holder_s : compute.relay_s) * h.compute_scale));
    CHECK(sh.uplink_bytes_s == doctest::Approx(h.uplink_mbit * 1e6 / 8));
    CHECK(sh.downlink_bytes_s == doctest::Approx(h.downlink_mbit * 1e6 / 8));
  }
  CHECK(s.hosts[4].compute_s == doctest::Approx(4 * compute.relay_s)); // r1-tokyo, compute_scale 4
  CHECK(s.net.link(0, 1).latency_ms == doctest::Approx(cfg.network->link(0, 1).latency_ms));
}

TEST_CASE("sim --from-config: emulation.time_scale scales the network's delays, bandwidths and cards as the trainer's emulator") {
  auto full = load("compare.yaml", {"faults.crash_rate=0"});
  auto tenth = load("compare.yaml", {"faults.crash_rate=0", "emulation.time_scale=0.1"});
  auto a = scenario_from_config(full, "c.yaml", compute);
  auto b = scenario_from_config(tenth, "c.yaml", compute);
  REQUIRE(a.scenario.has_value());
  REQUIRE(b.scenario.has_value());
  auto& na = a.scenario->sim.net;
  auto& nb = b.scenario->sim.net;
  CHECK(nb.link(0, 2).latency_ms == doctest::Approx(na.link(0, 2).latency_ms * 0.1));
  CHECK(nb.link(0, 2).bandwidth_mbps == doctest::Approx(na.link(0, 2).bandwidth_mbps * 10));
  CHECK(nb.link(1, 1).bandwidth_mbps == doctest::Approx(na.link(1, 1).bandwidth_mbps * 10));
  CHECK(b.scenario->sim.hosts[0].uplink_bytes_s == doctest::Approx(a.scenario->sim.hosts[0].uplink_bytes_s * 10));
  CHECK(error_of(load("compare.yaml", {"emulation.time_scale=0"})).find("emulation.time_scale: expected a scale above 0")
        != std::string::npos);
}

TEST_CASE("sim --from-config: random crashes are the trainer's draw, once per relay, never a stage's last relay") {
  for (std::uint64_t seed : {42u, 43u, 44u, 7u}) {
    auto cfg = load("compare.yaml", {"faults.crash_rate=0.05"});
    auto r = scenario_from_config(cfg, "c.yaml", compute, seed);
    INFO("seed " << seed);
    REQUIRE(r.scenario.has_value());
    auto& s = r.scenario->sim;
    CHECK(s.seed == seed);
    std::set<std::size_t> crashed;
    std::map<int, int> live; // per relay stage
    for (auto& h : s.hosts)
      live[h.stage] += h.stage > 0;
    int last_iteration = 0;
    for (auto& e : s.script) {
      REQUIRE(e.kind == sim_event_kind::crash);
      auto& h = s.hosts.at(e.host);
      CHECK(h.stage > 0);                          // never a data holder
      CHECK(crashed.insert(e.host).second);        // once
      CHECK(e.iteration >= last_iteration);        // in order
      last_iteration = e.iteration;
      auto phase = random_crash_draw(seed, static_cast<std::uint64_t>(e.iteration), h.name, 0.05);
      REQUIRE(phase.has_value());                  // the trainer's draw struck it then
      CHECK(e.at_fraction == doctest::Approx(*phase == gwtf::actors::fault_phase::forward ? 0.25 : 0.6));
      CHECK(--live[h.stage] >= 1);                 // the stage keeps a relay
    }
    CHECK_FALSE(s.script.empty()); // 9 relays x 40 iterations at 5%
    // and no relay the draw struck went unpunished while its stage had another live relay
    for (std::size_t i = 0; i < s.hosts.size(); ++i) {
      if (s.hosts[i].stage == 0 || crashed.count(i) > 0)
        continue;
      for (int it = 0; it < cfg.training.iterations; ++it)
        if (random_crash_draw(seed, static_cast<std::uint64_t>(it), s.hosts[i].name, 0.05)) {
          INFO(s.hosts[i].name << " drawn at iteration " << it);
          CHECK(live[s.hosts[i].stage] == 1); // spared: the last of its stage
        }
    }
  }
}

TEST_CASE("sim --from-config: the script's crashes, joins and slow links become the simulator's events") {
  auto cfg = load("local.yaml");
  auto r = scenario_from_config(cfg, "configs/local.yaml", compute);
  for (auto& e : r.errors)
    INFO(e.to_string());
  REQUIRE(r.scenario.has_value());
  auto& s = r.scenario->sim;
  REQUIRE(s.hosts.size() == cfg.hosts.size() - 1); // r2-tokyo joins at iteration 25
  for (auto& h : s.hosts)
    CHECK(h.name != "r2-tokyo");
  REQUIRE(s.script.size() == 4);
  CHECK(s.script[0].kind == sim_event_kind::crash);
  CHECK(s.script[0].iteration == 15);
  CHECK(s.hosts[s.script[0].host].name == "r1-london");
  CHECK(s.script[0].at_fraction == doctest::Approx(0.25)); // phase forward
  CHECK(s.script[1].kind == sim_event_kind::join);
  CHECK(s.script[1].iteration == 25);
  CHECK(s.script[1].joiner.name == "r2-tokyo");
  CHECK(s.net.regions[s.script[1].joiner.region] == "tokyo");
  CHECK(s.script[1].joiner.stage == 2);
  CHECK(s.script[1].joiner.compute_s == doctest::Approx(compute.relay_s));
  CHECK(s.script[2].kind == sim_event_kind::crash);
  CHECK(s.hosts[s.script[2].host].name == "r2-ireland");
  CHECK(s.script[2].at_fraction == doctest::Approx(0.6)); // phase backward
  CHECK(s.script[3].kind == sim_event_kind::degrade);
  CHECK(s.net.regions[s.script[3].region_a] == "ohio");
  CHECK(s.net.regions[s.script[3].region_b] == "oregon");
  CHECK(s.script[3].factor == doctest::Approx(0.25)); // slowdown 4
  // A crash of the joiner after it joined names the simulator's joiner index.
  auto later = load("local.yaml", {"faults.script[3]={at_iteration: 30, action: crash, host: r2-tokyo, phase: forward}"});
  auto r2 = scenario_from_config(later, "c.yaml", compute);
  REQUIRE(r2.scenario.has_value());
  auto& sc = r2.scenario->sim.script;
  REQUIRE(sc.size() == 4);
  CHECK(sc[2].kind == sim_event_kind::crash);
  CHECK(sc[2].iteration == 30);
  CHECK(sc[2].host == r2.scenario->sim.hosts.size()); // the first joiner
}

TEST_CASE("sim --from-config: what the simulator cannot run is refused, naming the key") {
  auto cfg = load("local.yaml");
  cfg.emulation.reset();
  cfg.network.reset();
  CHECK(error_of(cfg) == "c.yaml: emulation.network: expected a network matrix: the simulator models the network "
                         "the cluster emulates");
  CHECK(error_of(load("local.yaml", {"faults.script[0].action=hang", "faults.script[0].phase=any", "faults.script[0].duration_ms=100"}))
        == "c.yaml: faults.script[0].action: crash, leave, join or slow_link: the simulator has no hang (leave it out "
           "to simulate this config)");
  CHECK(error_of(load("local.yaml", {"faults.script[0].host=dh-virginia"}))
        == "c.yaml: faults.script[0].host: expected a relay: the simulator's data holders do not crash or leave, got "
           "'dh-virginia'");
  CHECK(error_of(load("local.yaml", {"faults.script[2].host=r1-london"}))
        .find("faults.script[2].host: expected a live host at iteration 35") != std::string::npos);
  auto unknown = load("local.yaml");
  unknown.faults.script[3].peer = "nobody"; // past the loader: refused, not thrown
  CHECK(error_of(unknown) == "c.yaml: faults.script[3]: expected hosts declared in hosts, got 'r1-ohio' and peer 'nobody'");
  auto zero = scenario_from_config(load("local.yaml"), "c.yaml", measured_compute{0, 0.01});
  CHECK_FALSE(zero.scenario.has_value());
}
