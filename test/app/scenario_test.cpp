// Simulation scenarios: the shipped files load, the derived figures follow the model, bad
// input is reported with file:line:column and key, and the outputs hold what the runs measured.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <filesystem>
#include <map>
#include <unistd.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "app/sim/scenario.hpp"
#include "app/sim/sim_report.hpp"

namespace fs = std::filesystem;
using namespace gwtf::app;
using gwtf::sim::sim_router;

namespace {

const fs::path source_dir{GWTF_SOURCE_DIR};
const fs::path configs = source_dir / "configs";

// A scenario text with `extra` appended (YAML: later top-level keys are new keys).
std::string base(const std::string& churn = "churn: {crash_rate: 0}\n") {
  return "name: t\n"
         "network: networks/aws-8.yaml\n"
         "iterations: 4\n"
         "microbatches_per_holder: 4\n"
         "model: {layers: 6, hidden: 256, seq_len: 128, microbatch_size: 2, vocab: 1000, stages: 4}\n"
         "hosts:\n"
         "  - {role: data_holder, regions: [oregon], tflops: [10], capacity: [4]}\n"
         "  - {role: relay, regions: [oregon, tokyo, london], count: 2, tflops: [5, 15], capacity: [1, 3]}\n"
         + churn;
}

scenario_result parse(const std::string& text, std::optional<std::uint64_t> seed = {}) {
  return parse_scenario(text, "s.yaml", configs, seed);
}

// The single error of a bad scenario, as printed.
std::string error_of(const std::string& text) {
  auto r = parse(text);
  CHECK_FALSE(r.scenario.has_value());
  REQUIRE(r.errors.size() >= 1);
  return r.errors.front().to_string();
}

std::string slurp(const fs::path& p) {
  std::ifstream in{p};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("scenario: every shipped scenario loads, with the hosts and churn it declares") {
  int n = 0;
  for (auto& entry : fs::directory_iterator(configs / "scenarios")) {
    INFO(entry.path().string());
    auto r = load_scenario(entry.path());
    for (auto& e : r.errors)
      INFO(e.to_string());
    REQUIRE(r.scenario.has_value());
    auto& s = r.scenario->sim;
    CHECK(s.hosts.size() > static_cast<std::size_t>(s.stages));
    CHECK(s.activation_bytes > 0);
    CHECK(s.stage_weight_bytes > 0);
    ++n;
  }
  CHECK(n >= 9); // gcp-12 and aws-8 at four churn levels, and the scale run
}

TEST_CASE("scenario: derived figures follow the model, hosts are named, drawn and dealt to stages") {
  auto r = parse(base());
  REQUIRE(r.scenario.has_value());
  auto& s = r.scenario->sim;
  CHECK(s.stages == 4);
  CHECK(s.tokens_per_microbatch == 2 * 128);
  CHECK(s.activation_bytes == 2.0 * 128 * 256 * 2);          // tokens x hidden x fp16
  // A GPT block with the default MLP (4 d): 12 d^2 weights + 13 d biases and norms; 6 blocks
  // over 3 relay stages.
  double d = 256, stage_params = 2 * (12 * d * d + 13 * d);
  CHECK(s.stage_gradient_bytes == stage_params * 2);
  CHECK(s.stage_weight_bytes == stage_params * 10);
  // The data holders: embedding + positions, final norm (weight, bias) and the head.
  CHECK(s.holder_gradient_bytes == (1000 * d + 128 * d + 2 * d + 1000 * d) * 2);
  // Their step: forward 2 FLOP per multiply-add of the head, backward twice that, 10 TFLOP/s.
  CHECK(s.hosts[0].compute_s == doctest::Approx(3 * 2 * d * 1000 * 256 / 10e12));
  REQUIRE(s.hosts.size() == 7);
  CHECK(s.hosts[0].name == "oregon-dh0");
  CHECK(s.hosts[0].stage == 0);
  CHECK(s.hosts[1].name == "oregon-r0");
  CHECK(s.hosts[2].name == "oregon-r1");
  CHECK(s.hosts[3].name == "tokyo-r0");
  std::map<int, int> per_stage;
  for (std::size_t i = 1; i < s.hosts.size(); ++i) {
    ++per_stage[s.hosts[i].stage];
    CHECK(s.hosts[i].capacity >= 1);
    CHECK(s.hosts[i].capacity <= 3);
    // 3 x forward (24 d^2 + 4 seq_len d per block and token) x 256 tokens at 5..15 TFLOP/s.
    double flops = 3 * 2 * (24 * d * d + 4 * 128 * d) * 256;
    CHECK(s.hosts[i].compute_s >= flops / 15e12 * (1 - 1e-12));
    CHECK(s.hosts[i].compute_s <= flops / 5e12 * (1 + 1e-12));
  }
  CHECK(per_stage == std::map<int, int>{{1, 2}, {2, 2}, {3, 2}}); // round-robin
  // The seed draws the speeds: the same seed the same hosts, another seed others.
  auto again = parse(base());
  auto other = parse(base(), 99);
  REQUIRE(again.scenario);
  REQUIRE(other.scenario);
  CHECK(again.scenario->sim.hosts[1].compute_s == s.hosts[1].compute_s);
  CHECK(other.scenario->config.seed == 99);
  bool differs = false;
  for (std::size_t i = 1; i < s.hosts.size(); ++i)
    differs = differs || other.scenario->sim.hosts[i].compute_s != s.hosts[i].compute_s;
  CHECK(differs);
}

TEST_CASE("scenario: training.share_compression sizes the shares, hosts' cards cap their links, bad values are named") {
  double d = 256, stage_params = 2 * (12 * d * d + 13 * d);
  std::map<std::string, double> bytes;
  for (std::string c : {"fp32", "bf16", "int8"}) {
    auto r = parse(base() + "training: {share_compression: " + c + ", averaging: overlap}\n");
    REQUIRE_MESSAGE(r.scenario.has_value(), c);
    bytes[c] = r.scenario->sim.stage_gradient_bytes;
    CHECK(r.scenario->sim.averaging == gwtf::model::averaging_mode::overlap);
  }
  CHECK(bytes["fp32"] == stage_params * 4);
  CHECK(bytes["bf16"] == stage_params * 2);
  CHECK(bytes["int8"] == stage_params + 4 * std::ceil(stage_params / 128)); // a float32 scale per 128 values
  CHECK(parse(base()).scenario->sim.averaging == gwtf::model::averaging_mode::sync);

  auto text = base();
  text.replace(text.find("capacity: [1, 3]}"), 17, "capacity: [1, 3], uplink_mbit: 40, downlink_mbit: 200}");
  auto r = parse(text);
  REQUIRE(r.scenario.has_value());
  CHECK(r.scenario->sim.hosts[0].uplink_bytes_s == std::numeric_limits<double>::infinity()); // the holder: none
  CHECK(r.scenario->sim.hosts[1].uplink_bytes_s == 40e6 / 8);
  CHECK(r.scenario->sim.hosts[1].downlink_bytes_s == 200e6 / 8);

  auto negative = base();
  negative.replace(negative.find("capacity: [1, 3]}"), 17, "capacity: [1, 3], uplink_mbit: -5}");
  CHECK(error_of(negative).find("hosts[1].uplink_mbit: expected Mbit/s, 0 = no limit") != std::string::npos);
  CHECK(error_of(base() + "training: {share_compression: int4}\n").find("training.share_compression") != std::string::npos);
}

TEST_CASE("scenario: the atom keys size the whole model, the hosts' memory and swap, bad values are named") {
  auto text = base() + "training: {atom: {sync_every: 3, local_microbatches: 2}}\n";
  text.replace(text.find("capacity: [1, 3]}"), 17, "capacity: [1, 3], memory_gb: 8, swap_gbyte_s: 25}");
  auto r = parse(text);
  REQUIRE(r.scenario.has_value());
  auto& s = r.scenario->sim;
  double d = 256, params = 6 * (12 * d * d + 13 * d) + 1000 * d + 128 * d + 2 * d + 1000 * d;
  CHECK(s.atom.state_bytes == 16 * params);
  CHECK(s.atom.average_bytes == 2 * params); // bf16, as the shares
  CHECK(s.atom.download_bytes == 10 * params);
  CHECK(s.atom.block_state_bytes == 16 * (12 * d * d + 13 * d)); // a block is the largest part
  CHECK(s.atom.activation_bytes == 17.0 * 6 * s.activation_bytes + 3 * 256 * 1000 * 4.0);
  CHECK(s.atom.remat_activation_bytes == (6 + 17.0) * s.activation_bytes + 3 * 256 * 1000 * 4.0);
  CHECK(s.atom.sync_every == 3);
  CHECK(s.atom.local_microbatches == 2);
  // The whole model's step: the holders' stage and the 3 relay stages at the host's own speed
  // (the one its stage's step was drawn at).
  double relay = 3 * 2 * (24 * d * d + 4 * 128 * d) * 256, holder = 3 * 2 * d * 1000 * 256; // 2 blocks a stage
  for (auto& h : s.hosts) {
    CHECK(h.model_compute_s == doctest::Approx(h.compute_s * (holder + 3 * relay) / (h.stage == 0 ? holder : relay)));
    if (h.stage == 0) {
      CHECK(h.memory_bytes == std::numeric_limits<double>::infinity());
    } else {
      CHECK(h.memory_bytes == 8e9);
      CHECK(h.swap_bytes_s == 25e9);
    }
  }
  CHECK(parse(base()).scenario->sim.atom.local_microbatches == 4); // microbatches_per_holder
  CHECK(error_of(base() + "training: {atom: {sync_every: 0}}\n").find("training.atom.sync_every: expected global batches") != std::string::npos);
  auto bad = base();
  bad.replace(bad.find("capacity: [1, 3]}"), 17, "capacity: [1, 3], swap_gbyte_s: 0}");
  CHECK(error_of(bad).find("hosts[1].swap_gbyte_s: expected GB/s") != std::string::npos);
}

TEST_CASE("scenario: a LLaMA model is sized as the runtime builds it, a wrong arch is named") {
  auto text = base();
  auto at = text.find("model: {");
  text.insert(at + 8, "arch: llama, ");
  auto r = parse(text);
  REQUIRE(r.scenario.has_value());
  auto& s = r.scenario->sim;
  // SwiGLU at 8 d / 3 rounded up to 32 (704), no biases, two RMSNorm weights; 2 blocks per stage.
  double d = 256, f = 704;
  CHECK(s.stage_gradient_bytes == 2 * (4 * d * d + 3 * d * f + 2 * d) * 2);
  // No learned positions, one norm weight.
  CHECK(s.holder_gradient_bytes == (1000 * d + d + 1000 * d) * 2);
  text.replace(text.find("arch: llama"), 11, "arch: bert");
  auto e = error_of(text);
  CHECK(e.find("model.arch") != std::string::npos);
  CHECK(e.find("bert") != std::string::npos);
}

TEST_CASE("scenario: the script names hosts and regions, events reach the simulation") {
  auto r = parse(base("churn:\n"
                      "  script:\n"
                      "    - {iteration: 1, at: 0.2, action: crash, host: tokyo-r1}\n"
                      "    - {iteration: 2, action: join, region: london, tflops: 20, capacity: 2}\n"
                      "    - {iteration: 2, action: degrade, regions: [oregon, tokyo], factor: 0.1}\n"
                      "    - {iteration: 3, action: leave, host: oregon-r0}\n"));
  for (auto& e : r.errors)
    INFO(e.to_string());
  REQUIRE(r.scenario.has_value());
  auto& s = r.scenario->sim;
  REQUIRE(s.script.size() == 4);
  CHECK(s.script[0].kind == gwtf::sim::sim_event_kind::crash);
  CHECK(s.hosts[s.script[0].host].name == "tokyo-r1");
  CHECK(s.script[1].kind == gwtf::sim::sim_event_kind::join);
  CHECK(s.net.regions[s.script[1].joiner.region] == "london");
  CHECK(s.script[1].joiner.stage == -1);
  CHECK(s.script[2].factor == 0.1);
  CHECK(s.script[3].kind == gwtf::sim::sim_event_kind::leave);
  for (auto router : {sim_router::gwtf, sim_router::swarm, sim_router::swarm_restart, sim_router::centralized}) {
    INFO(gwtf::sim::to_string(router));
    auto res = gwtf::sim::simulate(s, router);
    REQUIRE_MESSAGE(res.completed, res.why);
    CHECK(res.crashes == 1);
    CHECK(res.leaves == 1);
    CHECK(res.joins == 1);
    CHECK(res.degrades == 1);
    CHECK(res.microbatches == 4 * 4);
  }
}

TEST_CASE("scenario: bad input names the file, line, key and what was expected") {
  CHECK(error_of(base() + "iteratoins: 3\n").find("s.yaml:10:1: iteratoins: unknown key (did you mean 'iterations'?)")
        != std::string::npos);
  CHECK(error_of("name: t\nhosts: []\n").find("network: missing") != std::string::npos);
  std::string seven = base();
  seven.replace(seven.find("layers: 6"), 9, "layers: 7");
  auto layers = error_of(seven);
  CHECK(layers.find("model.layers") != std::string::npos);
  CHECK(layers.find("a multiple of the relay stages") != std::string::npos);
  std::string bad_region = base();
  bad_region.replace(bad_region.find("[oregon, tokyo, london]"), 23, "[oregon, atlantis]");
  auto e = error_of(bad_region);
  CHECK(e.find("hosts[1].regions[1]") != std::string::npos);
  CHECK(e.find("got 'atlantis'") != std::string::npos);
  std::string bad_range = base();
  bad_range.replace(bad_range.find("tflops: [5, 15]"), 15, "tflops: [15, 5]");
  CHECK(error_of(bad_range).find("hosts[1].tflops: expected [min, max] with min <= max") != std::string::npos);
  auto host = error_of(base("churn: {script: [{iteration: 1, action: crash, host: nobody}]}\n"));
  CHECK(host.find("churn.script[0].host") != std::string::npos);
  CHECK(host.find("got 'nobody'") != std::string::npos);
  auto late = error_of(base("churn: {script: [{iteration: 4, action: leave, host: oregon-r0}]}\n"));
  CHECK(late.find("churn.script[0].iteration: expected an iteration below iterations (4)") != std::string::npos);
  auto rate = error_of(base("churn: {crash_rate: 1.5}\n"));
  CHECK(rate.find("churn.crash_rate: expected a probability in [0, 1], got 1.5") != std::string::npos);
  auto net = parse_scenario(base(), "s.yaml", "/nonexistent");
  REQUIRE_FALSE(net.errors.empty());
  CHECK(net.errors.front().to_string().find("network: expected a valid network matrix") != std::string::npos);
  auto missing = load_scenario("/definitely/not/here.yaml");
  REQUIRE(missing.errors.size() == 1);
  CHECK(missing.errors.front().message == "cannot read scenario: no such file");
}

TEST_CASE("sim report: the table, CSV, JSON and SVG hold what the runs measured") {
  auto r = parse(base("churn: {crash_rate: 0.1, join_rate: 0.1}\n"));
  REQUIRE(r.scenario.has_value());
  std::vector<gwtf::sim::sim_result> results;
  for (auto router : {sim_router::gwtf, sim_router::swarm, sim_router::swarm_restart, sim_router::centralized, sim_router::atom})
    results.push_back(gwtf::sim::simulate(r.scenario->sim, router));
  auto rows = summarize(r.scenario->sim, results);
  REQUIRE(rows.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) {
    auto& x = rows[k];
    INFO(x.router);
    REQUIRE(x.completed);
    CHECK(x.microbatches_per_s == doctest::Approx(static_cast<double>(results[k].microbatches) / results[k].total_s));
    if (k < 4)
      CHECK(results[k].microbatches == 16);
    CHECK(x.tokens_per_s == doctest::Approx(x.microbatches_per_s * 256));
    CHECK(x.iteration_p50_s <= x.iteration_p90_s);
    CHECK(x.iteration_p90_s <= x.iteration_max_s);
    CHECK(x.iteration_max_s == *std::max_element(results[k].iteration_s.begin(), results[k].iteration_s.end()));
  }
  CHECK(rows[3].vs_centralized == 1.0);
  CHECK(rows[0].vs_centralized == doctest::Approx(rows[0].microbatches_per_s / rows[3].microbatches_per_s));
  // One bound for the scenario, the highest of the pipeline runs' bounds; every router below
  // it. ATOM's whole-model peers are held to their own bound (the peers' compute alone).
  double bound = 0;
  for (std::size_t k = 0; k < 4; ++k)
    bound = std::max(bound, static_cast<double>(results[k].microbatches) / results[k].bound_s);
  for (std::size_t k = 0; k < 4; ++k) {
    auto& x = rows[k];
    CHECK(x.bound_microbatches_per_s == doctest::Approx(bound));
    CHECK(x.run_bound_microbatches_per_s <= x.bound_microbatches_per_s);
    CHECK(x.vs_bound == doctest::Approx(x.microbatches_per_s / bound));
    CHECK(x.vs_bound <= 1.0);
  }
  CHECK(rows[4].router == "atom");
  CHECK(rows[4].vs_bound == doctest::Approx(rows[4].microbatches_per_s / rows[4].run_bound_microbatches_per_s));
  CHECK(rows[4].vs_bound <= 1.0);
  auto table = comparison_table(rows);
  CHECK(table.find("gwtf ") != std::string::npos);
  CHECK(table.find("swarm ") != std::string::npos);

  auto dir = fs::temp_directory_path() / ("gwtf-sim-report-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  REQUIRE(write_sim_outputs(dir, *r.scenario, results).empty());
  auto summary = slurp(dir / "summary.csv");
  CHECK(std::count(summary.begin(), summary.end(), '\n') == 6); // header + 5 routers
  CHECK(summary.find(",vs_centralized,bound_microbatches_per_s,run_bound_microbatches_per_s,vs_bound,") != std::string::npos);
  CHECK(summary.rfind("scenario,seed,router,completed,", 0) == 0);
  auto iters = slurp(dir / "iterations.csv");
  CHECK(std::count(iters.begin(), iters.end(), '\n') == 1 + 5 * 4); // atom: a round per iteration (sync_every 1)
  CHECK(iters.rfind("router,iteration,start_s,end_s,duration_s,aggregation_s,flows\n", 0) == 0);
  for (auto& res : results) {
    INFO(to_string(res.router));
    REQUIRE(res.aggregation_s.size() == res.iteration_s.size());
    for (std::size_t i = 0; i < res.iteration_s.size(); ++i) {
      CHECK(res.aggregation_s[i] > 0); // every stage has replicas to average with
      CHECK(res.aggregation_s[i] < res.iteration_s[i]);
    }
  }
  auto json = slurp(dir / "result.json");
  CHECK(json.find("\"router\":\"gwtf\"") != std::string::npos);
  CHECK(json.find("\"iteration_s\":[") != std::string::npos);
  CHECK(json.find("\"reroutes\":") != std::string::npos);
  for (auto& res : results)
    if (res.router != sim_router::gwtf)
      CHECK(res.reroutes == 0); // only GWTF's balancers re-route flows
  for (const char* svg : {"throughput.svg", "iteration_times.svg"}) {
    auto text = slurp(dir / svg);
    INFO(svg);
    CHECK(text.rfind("<svg ", 0) == 0);
    CHECK(text.find("</svg>") != std::string::npos);
    std::size_t lines = 0;
    for (auto p = text.find("<polyline"); p != std::string::npos; p = text.find("<polyline", p + 1))
      ++lines;
    CHECK(lines == 5); // one per router
  }
  // Markers: one "x" per crash or leave and one "+" per join, per router.
  auto tp = slurp(dir / "throughput.svg");
  std::size_t marks = 0, expected = 0;
  for (auto p = tp.find("font-size=\"11\">x<"); p != std::string::npos; p = tp.find("font-size=\"11\">x<", p + 1))
    ++marks;
  for (auto& res : results)
    expected += res.crash_times_s.size();
  CHECK(marks == expected);
  fs::remove_all(dir);
  // An unwritable place is an error message, not a crash.
  CHECK(write_sim_outputs("/proc/gwtf-cannot-write-here", *r.scenario, results).find("cannot") == 0);
}

TEST_CASE("scenario: placement.policy places the relays without a stage: dealt, gwtf, DT-FM, random") {
  auto stages_of = [](const gwtf::sim::sim_scenario& s) {
    std::vector<int> out;
    for (auto& h : s.hosts)
      if (h.stage > 0)
        out.push_back(h.stage);
    return out;
  };
  auto load = [&](const std::string& policy, std::optional<std::uint64_t> seed = {}) {
    auto r = parse(base() + "placement: {policy: " + policy + "}\n", seed);
    INFO(policy);
    REQUIRE(r.scenario.has_value());
    return *r.scenario;
  };
  auto deal = load("deal");
  CHECK(stages_of(deal.sim) == std::vector<int>{1, 2, 3, 1, 2, 3}); // round-robin in host order
  REQUIRE(deal.dtfm.has_value());
  CHECK(deal.dtfm->cost > 0);
  CHECK(deal.config.placement.policy == sim_placement_policy::deal);
  // DT-FM: its own model rates its placement at most as costly as dealing, every stage used.
  auto dtfm = load("dtfm");
  REQUIRE(dtfm.dtfm.has_value());
  CHECK(dtfm.dtfm->cost <= deal.dtfm->cost + 1e-12);
  auto placed = stages_of(dtfm.sim);
  for (int st = 1; st <= 3; ++st)
    CHECK(std::count(placed.begin(), placed.end(), st) == 2); // balanced: 6 relays, 3 stages
  CHECK(stages_of(load("dtfm").sim) == placed);                // deterministic for the seed
  // gwtf: one by one into the stage with the least capacity, so every stage gets one first.
  auto g = stages_of(load("gwtf").sim);
  CHECK(std::set<int>(g.begin(), g.begin() + 3) == std::set<int>{1, 2, 3});
  // random: a seeded shuffle, dealt: balanced, reproducible, other seeds differ somewhere.
  auto r1 = stages_of(load("random", 1).sim);
  CHECK(r1 == stages_of(load("random", 1).sim));
  bool differs = false;
  for (std::uint64_t seed = 2; seed < 8 && !differs; ++seed)
    differs = stages_of(load("random", seed).sim) != r1;
  CHECK(differs);
  for (int st = 1; st <= 3; ++st)
    CHECK(std::count(r1.begin(), r1.end(), st) == 2);
  // Declared stages stay; DT-FM needs a relay per stage to place.
  auto few = base() + "placement: {policy: dtfm}\n";
  few.replace(few.find("  - {role: relay, regions: [oregon, tokyo, london], count: 2"), 60,
              "  - {role: relay, regions: [oregon], stage: 2}\n  - {role: relay, regions: [oregon, tokyo], count: 1");
  CHECK(error_of(few).find("placement.policy: dtfm needs at least one relay without a declared stage per relay stage (3), got 2")
        != std::string::npos);
  CHECK(error_of(base() + "placement: {policy: swarm}\n").find("placement.policy") != std::string::npos);
}

TEST_CASE("targets: on the shipped scenarios GWTF beats the best SWARM every seed, near the centralized router") {
  // The scenarios of docs/results.md, with SWARM at the settings its sweep found best for each
  // (scripts/swarm-sweep). Deterministic per seed: a change that makes GWTF lose to SWARM on
  // any seed, fall under 0.9 of the centralized router under churn or 0.95 without (the
  // issue's targets) or waste over 1% at crash rate 0.01 fails here, not only in a benchmark
  // nobody re-ran.
  for (std::string name : {"gcp-12-no-churn", "gcp-12-churn-0.01", "gcp-12-churn-0.05", "aws-8-no-churn",
                           "aws-8-churn-0.01", "aws-8-churn-0.05"}) {
    bool churn = name.find("no-churn") == std::string::npos;
    double time_ratio = 0, vs_central = 0, wasted = 0;
    const int seeds = 5;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      INFO(name << ", seed " << seed);
      auto r = load_scenario(configs / "scenarios" / (name + ".yaml"), seed);
      REQUIRE(r.scenario.has_value());
      auto gwtf = gwtf::sim::simulate(r.scenario->sim, sim_router::gwtf);
      auto swarm = gwtf::sim::simulate(r.scenario->sim, sim_router::swarm);
      auto central = gwtf::sim::simulate(r.scenario->sim, sim_router::centralized);
      REQUIRE_MESSAGE(gwtf.completed, gwtf.why);
      REQUIRE_MESSAGE(swarm.completed, swarm.why);
      REQUIRE_MESSAGE(central.completed, central.why);
      REQUIRE((gwtf.crashes > 0) == churn);
      CHECK(gwtf.total_s < swarm.total_s);
      time_ratio += gwtf.total_s / swarm.total_s / seeds;
      vs_central += central.total_s / gwtf.total_s / seeds; // same microbatches: throughput ratio
      wasted += gwtf.wasted_s / gwtf.compute_s / seeds;
    }
    INFO(name << ": GWTF time / SWARM " << time_ratio << ", throughput / centralized " << vs_central << ", wasted "
              << wasted * 100 << "%");
    CHECK(time_ratio < 0.95);
    CHECK(vs_central >= (churn ? 0.9 : 0.95));
    if (name.find("0.01") != std::string::npos)
      CHECK(wasted <= 0.01);
  }
}

TEST_CASE("defaults: a shipped scenario stripped of its routing block does not make GWTF lose to SWARM") {
  // What a new user's scenario gets: every router at its defaults (GWTF's `backward: auto`,
  // SWARM as its code runs: its refresh period, its call timeouts). Each shipped scenario
  // but the scale runs, 3 seeds: GWTF must finish sooner than SWARM on each seed. Before the
  // defaults were chosen, GWTF stashed by default and lost by 1.3-1.6x on gcp-12-churn-0.05.
  for (auto& entry : fs::directory_iterator(configs / "scenarios")) {
    auto name = entry.path().stem().string();
    if (name.rfind("scale-", 0) == 0)
      continue;
    std::ifstream in(entry.path());
    std::ostringstream kept;
    bool in_routing = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("routing:", 0) == 0) {
        in_routing = true;
        continue;
      }
      if (in_routing && (line.empty() || line[0] == ' '))
        continue;
      in_routing = false;
      kept << line << "\n";
    }
    REQUIRE(kept.str().find("routing:") == std::string::npos);
    double time_ratio = 0;
    const int seeds = 3;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      INFO(name << " without its routing block, seed " << seed);
      auto r = parse_scenario(kept.str(), entry.path().string(), entry.path().parent_path(), seed);
      REQUIRE(r.errors.empty());
      REQUIRE(r.scenario.has_value());
      CHECK(r.scenario->sim.gwtf.backward == gwtf::routing::gwtf_backward::automatic);
      auto gwtf = gwtf::sim::simulate(r.scenario->sim, sim_router::gwtf);
      auto swarm = gwtf::sim::simulate(r.scenario->sim, sim_router::swarm);
      REQUIRE_MESSAGE(gwtf.completed, gwtf.why);
      REQUIRE_MESSAGE(swarm.completed, swarm.why);
      CHECK(gwtf.total_s < swarm.total_s);
      time_ratio += gwtf.total_s / swarm.total_s / seeds;
    }
    MESSAGE(name << " without its routing block: GWTF time / SWARM " << time_ratio);
  }
}
