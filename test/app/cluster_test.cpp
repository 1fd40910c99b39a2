// The embedded local cluster end to end (issue 7's correctness tests): configs/local.yaml's
// hosts, model and network, shortened, against the reference trainer on the same data.
#include "model/reference.hpp"
#include "model/torch_runtime.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/config/cluster_config.hpp"
#include "app/run/embedded.hpp"
#include "model/checkpoint.hpp"

using namespace gwtf;

namespace {

app::cluster_config local(int iterations, std::vector<actors::fault_event> script) {
  model::configure_torch(1); // as caf-gwtf does: the actor threads are the parallelism
  auto r = app::load_cluster_config(std::string{GWTF_SOURCE_DIR} + "/configs/local.yaml");
  REQUIRE(r.config.has_value());
  auto cfg = *r.config;
  cfg.training.iterations = iterations;
  cfg.training.loss_out.clear();
  // Exact shares: these tests hold the runtime to the reference trainer within 1e-4, which a
  // rounded share (the default, bf16) would not; `gradient shares in bf16 or int8` tests those.
  cfg.training.share_compression = model::share_compression::fp32;
  cfg.emulation->time_scale = 0.02;
  cfg.faults.script = std::move(script);
  bool tokyo_joins = false;
  for (auto& f : cfg.faults.script)
    tokyo_joins = tokyo_joins || (f.action == actors::fault_action::join && f.host == "r2-tokyo");
  if (!tokyo_joins) // r2-tokyo is declared to join later; without its join it stays out
    cfg.hosts.erase(std::remove_if(cfg.hosts.begin(), cfg.hosts.end(),
                                   [](auto& h) { return h.name == "r2-tokyo"; }),
                    cfg.hosts.end());
  return cfg;
}

std::vector<double> reference_losses(const app::cluster_config& cfg) {
  std::vector<double> out;
  auto r = model::run_reference(cfg.model, cfg.training, cfg.data, 2,
                                [&](const model::reference_report& rep) { out.push_back(rep.loss); },
                                cfg.training.averaging);
  REQUIRE(std::holds_alternative<bool>(r));
  return out;
}

// The largest relative difference per iteration between the run's loss and the reference
// trainer's on the same config (every iteration of the run present).
double worst_vs_reference(const app::cluster_config& cfg, const app::embedded_result& r) {
  auto ref = reference_losses(cfg);
  REQUIRE(r.rows.size() == ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(r.rows[i].loss - ref[i]) / std::abs(ref[i]));
  return worst;
}

actors::fault_event fault(int at, actors::fault_action a, std::string host,
                          actors::fault_phase phase = actors::fault_phase::any) {
  actors::fault_event f;
  f.at_iteration = at;
  f.action = a;
  f.host = std::move(host);
  f.phase = phase;
  return f;
}

// Exactly once: every stage averaged every microbatch of every iteration exactly once.
// Band: recovery re-sends the same microbatches, so the curve stays on the reference's
// within 1e-3 relative (only the summation order of the gradient average differs).
// The stages' own exactly-once check (node mode's, without the driver) agrees: no line.
void check_no_stage_violation(const app::embedded_result& r) {
  for (auto& f : r.failures)
    CHECK_MESSAGE(f.find("exactly-once:") == std::string::npos, f);
}

// With overlap a microbatch repaired while the next iteration runs is computed on weights one
// step newer than its iteration's others (docs/runtime.md, "Overlapped averaging"): the band
// there is `band` (measured: 1.02e-3 at worst when a third of a stage's microbatches of one
// iteration were repaired).
void check_churn_run(const app::cluster_config& cfg, const app::embedded_result& r, double band = 1e-3) {
  for (auto& v : r.exactly_once_violations)
    FAIL_CHECK(v);
  check_no_stage_violation(r);
  auto ref = reference_losses(cfg);
  REQUIRE(r.rows.size() == ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    INFO("iteration " << i << ": cluster " << r.rows[i].loss << ", reference " << ref[i]);
    CHECK(std::abs(r.rows[i].loss - ref[i]) <= band * std::abs(ref[i]));
  }
}

void check_replicas_agree(const app::embedded_result& r) {
  for (auto& [stage, hashes] : r.final_hashes) {
    INFO("stage " << stage);
    std::uint64_t last = 0;
    for (auto& [host, iteration] : r.last_applied)
      last = std::max(last, iteration);
    std::set<std::uint64_t> distinct;
    for (auto& [host, h] : hashes)
      if (r.last_applied.at(host) == last)
        distinct.insert(h);
    CHECK(distinct.size() == 1);
  }
}

} // namespace

TEST_CASE("cluster: without churn the loss equals the reference trainer's within 1e-4 relative") {
  auto cfg = local(20, {});
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  auto ref = reference_losses(cfg);
  REQUIRE(r.rows.size() == ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    INFO("iteration " << i << ": cluster " << r.rows[i].loss << ", reference " << ref[i]);
    CHECK(std::abs(r.rows[i].loss - ref[i]) <= 1e-4 * std::abs(ref[i]));
  }
  CHECK(r.exactly_once_violations.empty());
  check_no_stage_violation(r);
  CHECK(r.crashes == 0);
  CHECK(r.wasted_s == 0);
  CHECK(r.failures.empty());
  check_replicas_agree(r);
}

// Runs `cfg` (which injects two crashes) to the end within `timeout_s`: both crashes
// happened, exactly once, the reference's loss band, replicas equal.
static app::embedded_result run_two_crashes_checked(const app::cluster_config& cfg, double timeout_s) {
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, timeout_s);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 2);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
  return r;
}

// 12 iterations with a relay crashing in a forward pass (iteration 3) and one in a backward
// pass (iteration 7), `backward` as given; checked for exactly-once, the loss band and agreement.
static app::embedded_result run_two_crashes(routing::gwtf_backward backward) {
  auto cfg = local(12, {fault(3, actors::fault_action::crash, "r1-london", actors::fault_phase::forward),
                        fault(7, actors::fault_action::crash, "r2-ireland", actors::fault_phase::backward)});
  cfg.routing.gwtf.backward = backward;
  // An armed crash strikes in the host's next forward (backward): re-routing for cost could
  // move every flow off r2-ireland before iteration 7 (it did once), and then nothing strikes.
  cfg.routing.gwtf.reroute_gain = 0;
  return run_two_crashes_checked(cfg, 90);
}

// training.averaging overlap (docs/runtime.md, "Overlapped averaging"): iteration t + 1
// computes on the weights before t's step, which comes at t + 1's boundary. Without churn the
// curve is the reference trainer's overlap within 1e-4, and not its sync curve.
TEST_CASE("cluster: with overlapped averaging the loss equals the reference trainer's overlap within 1e-4, every step one iteration late") {
  auto cfg = local(16, {});
  cfg.training.averaging = model::averaging_mode::overlap;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  auto ref = reference_losses(cfg);
  auto sync_cfg = cfg;
  sync_cfg.training.averaging = model::averaging_mode::sync;
  auto sync = reference_losses(sync_cfg);
  REQUIRE(r.rows.size() == ref.size());
  double from_sync = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    INFO("iteration " << i << ": cluster " << r.rows[i].loss << ", reference overlap " << ref[i] << ", sync " << sync[i]);
    CHECK(std::abs(r.rows[i].loss - ref[i]) <= 1e-4 * std::abs(ref[i]));
    from_sync = std::max(from_sync, std::abs(r.rows[i].loss - sync[i]) / std::abs(sync[i]));
  }
  CHECK(from_sync > 1e-3); // the steps came late: not sync's curve
  CHECK(r.exactly_once_violations.empty());
  check_no_stage_violation(r);
  CHECK(r.failures.empty());
  CHECK(r.last_applied.at("dh-frankfurt") == 15); // the last iteration's step too
  check_replicas_agree(r);
}

TEST_CASE("cluster: with overlapped averaging crashes in a forward and a backward lose no microbatch") {
  auto cfg = local(12, {fault(3, actors::fault_action::crash, "r1-london", actors::fault_phase::forward),
                        fault(7, actors::fault_action::crash, "r2-ireland", actors::fault_phase::backward)});
  cfg.training.averaging = model::averaging_mode::overlap;
  cfg.routing.gwtf.reroute_gain = 0;
  run_two_crashes_checked(cfg, 90);
}

TEST_CASE("cluster: with overlapped averaging a host that joins mid-run downloads the pending step and ends identical to its replicas") {
  auto cfg = local(10, {fault(4, actors::fault_action::join, "r2-tokyo")});
  cfg.training.averaging = model::averaging_mode::overlap;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  REQUIRE(std::count(r.joined.begin(), r.joined.end(), "r2-tokyo") >= 1);
  auto& stage2 = r.final_hashes.at(2);
  REQUIRE(stage2.count("r2-tokyo") == 1);
  REQUIRE(r.last_applied.at("r2-tokyo") == 9);
  for (auto& [host, h] : stage2) {
    INFO(host);
    CHECK(h == stage2.at("r2-tokyo"));
  }
  check_churn_run(cfg, r);
}

TEST_CASE("cluster: crashes during a forward and a backward lose no microbatch") {
  auto r = run_two_crashes(routing::gwtf_backward::stash);
  CHECK(r.wasted_s > 0);                    // the crashed hosts' work was lost...
  CHECK(r.wasted_s < 0.05 * r.compute_s);   // ...and little of it
  CHECK(r.rows.back().hosts_alive == 6);
}

TEST_CASE("cluster: relays that rematerialise train as the reference does, through crashes") {
  run_two_crashes(routing::gwtf_backward::rematerialize);
}

// Layer swapping (hosts[].memory_budget_mb, docs/model.md "Layer swapping"): every relay's
// stage (2 blocks of d=128, 6 MiB of state) over a budget of 1 MiB keeps its blocks in a
// file, one resident; with a crash in a forward, one in a backward and a joiner whose
// downloaded state lands in its file, the run is the reference's within the churn band.
TEST_CASE("cluster: relays over their memory budget swap their blocks and train as the reference does, through crashes and a join") {
  auto cfg = local(12, {fault(3, actors::fault_action::crash, "r1-london", actors::fault_phase::forward),
                        fault(4, actors::fault_action::join, "r2-tokyo"),
                        fault(7, actors::fault_action::crash, "r2-ireland", actors::fault_phase::backward)});
  cfg.routing.gwtf.reroute_gain = 0; // as run_two_crashes: the armed hosts keep their flows
  int relays = 0;
  for (auto& h : cfg.hosts)
    if (h.role == actors::host_role::relay) {
      h.memory_budget_mb = 1;
      ++relays;
    }
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 2);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
  std::size_t swapped = 0;
  for (auto at = log.str().find("layer swapping: stage "); at != std::string::npos;
       at = log.str().find("layer swapping: stage ", at + 1))
    ++swapped;
  CHECK(swapped == static_cast<std::size_t>(relays)); // the joiner too
  CHECK(log.str().find("1 block(s) resident") != std::string::npos);
}

// No frame is bounded by the model (node.chunk_bytes): with a frame limit below an activation
// (4 x 64 x 128 float32: 128 KiB) and a relay stage's gradient share (2 blocks of d=128: 1.6
// MB), the activations and their gradients cross in pieces, the shares, the joiner's state and
// the shares it is caught up with in chunks, and the run trains as the reference does.
TEST_CASE("cluster: activations and gradient shares larger than a frame cross in pieces, and the loss stays the reference's") {
  auto cfg = local(10, {fault(4, actors::fault_action::join, "r2-tokyo")});
  cfg.node.max_message_bytes = 64 << 10;
  cfg.node.chunk_bytes = 16 << 10;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed); // an activation or a share in one frame would be refused by every peer
  CHECK(r.failures.empty()); // no piece refused
  CHECK(std::count(r.joined.begin(), r.joined.end(), "r2-tokyo") >= 1);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
}

TEST_CASE("cluster: a host that joins mid-run ends with weights identical to its replicas") {
  auto cfg = local(10, {fault(4, actors::fault_action::join, "r2-tokyo")});
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.joins == 1);
  // It loads a state at least once; again when the others moved on during its download.
  REQUIRE(std::count(r.joined.begin(), r.joined.end(), "r2-tokyo") >= 1);
  REQUIRE(r.final_hashes.count(2) == 1);
  auto& stage2 = r.final_hashes.at(2);
  REQUIRE(stage2.count("r2-tokyo") == 1);
  REQUIRE(r.last_applied.at("r2-tokyo") == 9);
  for (auto& [host, h] : stage2) {
    INFO(host);
    CHECK(h == stage2.at("r2-tokyo"));
  }
  CHECK(r.exactly_once_violations.empty());
}

TEST_CASE("cluster: a failing local actor is restarted, and past its restart budget the host leaves") {
  auto cfg = local(10, {fault(3, actors::fault_action::actor_failure, "r3-virginia"),
                        fault(6, actors::fault_action::actor_failure, "r3-virginia")});
  cfg.faults.max_restarts = 1;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.restarts == 1);     // the first failure: restarted, state downloaded again
  CHECK(r.departures == 1);   // the second within the window: the host leaves cleanly
  CHECK(r.crashes == 0);
  // The restart loads the stage state; once more if its replica applied the iteration the
  // loaded state was in meanwhile (the behind rule, docs/runtime.md).
  auto loads = std::count(r.joined.begin(), r.joined.end(), "r3-virginia");
  CHECK(loads >= 1);
  CHECK(loads <= 2);
  // A second load is a designed recovery: counted as a reload, not as a peer's error.
  CHECK(r.reloads == loads - 1);
  for (auto& f : r.failures)
    CHECK_MESSAGE(f.find("behind replica") == std::string::npos, f);
  CHECK(r.rows.back().hosts_alive == 7);
  for (auto& v : r.exactly_once_violations)
    FAIL_CHECK(v);
  check_replicas_agree(r);
}

TEST_CASE("cluster: a data holder killed while its iteration is aggregated is left out at every stage") {
  // The driver injects iteration 4's faults once both holders reported iteration 3: while
  // stage 0 and the relays aggregate 3. The relays had counted dh-frankfurt's microbatches;
  // stage 0 loses them with it unless its share arrived first. Either way every stage must
  // average the same microbatches (stage 0's verdict), which the driver's check verifies.
  auto cfg = local(8, {fault(4, actors::fault_action::crash, "dh-frankfurt")});
  // A third data holder: stage 0's verdict then names two survivors, and the relays must
  // keep both of their microbatches while leaving dh-frankfurt's out.
  auto third = std::find_if(cfg.hosts.begin(), cfg.hosts.end(), [](auto& h) { return h.name == "dh-frankfurt"; });
  REQUIRE(third != cfg.hosts.end());
  auto tokyo = *third;
  tokyo.name = "dh-tokyo";
  tokyo.region = "tokyo";
  cfg.hosts.insert(third + 1, tokyo);
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 12);
  INFO(log.str());
  CHECK(r.completed);
  CHECK(r.crashes == 1);
  REQUIRE(r.rows.size() == 8);
  CHECK(r.exactly_once_violations.empty());
  CHECK(r.replica_disagreements.empty());
  check_no_stage_violation(r);
  // The survivors' microbatches all counted at stage 0: 4 per iteration each.
  CHECK(r.carried["dh-tokyo"] == 32);
  CHECK(r.carried["dh-virginia"] == 32);
  CHECK(r.carried["dh-frankfurt"] < 32);
}

// Also with routing.gwtf.idle_moves: each compute then tells its balancer which flows carry
// its microbatches (docs/routing.md) and moves wait for them.
TEST_CASE("cluster: random crashes at a per-iteration rate lose no microbatch and leave a host per stage") {
  for (bool idle : {false, true}) {
    auto cfg = local(12, {});
    cfg.faults.crash_rate = 0.1; // per relay and iteration, drawn from training.seed
    cfg.routing.gwtf.idle_moves = idle;
    INFO("seed " << cfg.training.seed << ", idle_moves " << idle);
    std::ostringstream log;
    auto r = app::run_embedded(cfg, log, 90);
    INFO(log.str());
    REQUIRE(r.completed);
    CHECK(r.crashes >= 1);
    CHECK(r.crashes <= 3); // 6 relays over 3 stages: one per stage survives
    check_churn_run(cfg, r);
    check_replicas_agree(r);
  }
}

TEST_CASE("cluster: what the runtime does not run (SWARM's stash, adaptive top-k under SWARM) is refused up front, naming the key") {
  for (std::string key : {"routing.swarm.backward", "compression.mode"}) {
    INFO(key);
    auto cfg = local(5, {});
    if (key == "routing.swarm.backward") {
      cfg.routing.router = routing::router_kind::swarm;
      cfg.routing.swarm.backward = routing::swarm_backward::stash;
    } else {
      cfg.routing.router = routing::router_kind::swarm;
      cfg.compression.mode = app::compression_mode::adaptive;
    }
    std::ostringstream log;
    auto r = app::run_embedded(cfg, log, 10);
    CHECK_FALSE(r.completed);
    REQUIRE(r.failures.size() == 1);
    CHECK(r.failures[0].find(key + ": ") == 0);
    CHECK(r.rows.empty());
  }
}

// SWARM in the runtime (routing.router: swarm; docs/runtime.md, "SWARM in the runtime"): the
// data holders call each stage, a relay crashes in a forward call (iteration 3) and another
// in a backward call (iteration 7). Either way of learning of the death: the cluster's failure
// detection (oracle), or SWARM's call timeouts (shortened here: its code's are 30 s and 75 s).
// Exactly once at every stage, the reference's loss, replicas identical, no flow built.
TEST_CASE("cluster: SWARM routing trains through a crash in a forward and one in a backward call, exactly once") {
  for (auto detection : {routing::swarm_detection::oracle, routing::swarm_detection::timeout}) {
    INFO("detection " << (detection == routing::swarm_detection::oracle ? "oracle" : "timeout"));
    auto cfg = local(12, {fault(3, actors::fault_action::crash, "r1-london", actors::fault_phase::forward),
                          fault(7, actors::fault_action::crash, "r2-ireland", actors::fault_phase::backward)});
    cfg.routing.router = routing::router_kind::swarm;
    cfg.routing.swarm.detection = detection;
    cfg.routing.swarm.forward_timeout_ms = 1500;
    cfg.routing.swarm.backward_timeout_ms = 3000;
    auto csv = std::filesystem::temp_directory_path() / ("gwtf-swarm-" + std::to_string(::getpid()) + ".csv");
    cfg.training.loss_out = csv.string(); // the driver then asks every host's `flows` at the end
    auto r = run_two_crashes_checked(cfg, 120);
    CHECK(r.rows.back().hosts_alive == 6);
    for (auto& row : r.rows)
      CHECK(row.flows == 0); // no GWTF flow: every call chose its own peer
    // The shell's `flows` at a data holder: SWARM's queue, the dead relays gone from it, the
    // live ones measured.
    REQUIRE(r.final_flows.count("dh-virginia") == 1);
    auto flows = nlohmann::json::parse(r.final_flows.at("dh-virginia"));
    REQUIRE(flows.contains("swarm"));
    std::set<std::string> queued, measured;
    for (auto& p : flows["swarm"]["queue"]) {
      queued.insert(p["peer"].get<std::string>());
      if (p["tasks_per_s"].is_number())
        measured.insert(p["peer"].get<std::string>());
    }
    std::set<std::string> live{"r1-ohio", "r2-oregon", "r3-frankfurt", "r3-virginia"};
    CHECK(std::includes(measured.begin(), measured.end(), live.begin(), live.end()));
    if (detection == routing::swarm_detection::oracle) // banned and forgotten at once
      CHECK(queued == live);
    else // SWARM's code: a timeout bans nobody; the peer-list refresh (30 s) drops them
      CHECK(std::includes(queued.begin(), queued.end(), live.begin(), live.end()));
    std::filesystem::remove(csv);
  }
}

// SWARM's own stack averages in the background too (hivemind's delay_optimizer_step): with
// overlap its replicas take each step one iteration late as GWTF's do, and the backwards a
// crashed replica counted of the iteration being averaged are called again elsewhere.
TEST_CASE("cluster: SWARM routing with overlapped averaging trains through crashes as the reference's overlap, exactly once") {
  auto cfg = local(12, {fault(3, actors::fault_action::crash, "r1-london", actors::fault_phase::forward),
                        fault(7, actors::fault_action::crash, "r2-ireland", actors::fault_phase::backward)});
  cfg.routing.router = routing::router_kind::swarm;
  cfg.routing.swarm.detection = routing::swarm_detection::oracle;
  cfg.training.averaging = model::averaging_mode::overlap;
  auto r = run_two_crashes_checked(cfg, 120);
  CHECK(r.rows.back().hosts_alive == 6);
}

// One replica per stage: which host computes a microbatch is then fixed (with several, the
// balancers' flows, built as gossip and timing go, decide it: docs/model.md, "Reproducible sums"),
// and key-order sums make each replica's sums independent of arrival order.
app::cluster_config one_per_stage(int iterations) {
  auto cfg = local(iterations, {});
  cfg.training.reproducible_sums = model::sum_order::key_order;
  cfg.hosts.erase(std::remove_if(cfg.hosts.begin(), cfg.hosts.end(),
                                 [](auto& h) { return h.name == "r1-london" || h.name == "r2-ireland" || h.name == "r3-frankfurt"; }),
                  cfg.hosts.end());
  return cfg;
}

// Runs `cfg` twice: both complete, with the same loss at every iteration and the same final
// weights at every replica, bit for bit. Returns the first run and its log for more checks.
std::pair<app::embedded_result, std::string> check_two_runs_alike(const app::cluster_config& cfg) {
  INFO("seed " << cfg.training.seed);
  std::ostringstream a_log, b_log;
  auto a = app::run_embedded(cfg, a_log, 90);
  auto b = app::run_embedded(cfg, b_log, 90);
  INFO(a_log.str() << "\n---\n" << b_log.str());
  REQUIRE(a.completed);
  REQUIRE(b.completed);
  REQUIRE(a.rows.size() == static_cast<std::size_t>(cfg.training.iterations));
  REQUIRE(b.rows.size() == a.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    INFO("iteration " << i << ": " << a.rows[i].loss << " and " << b.rows[i].loss);
    CHECK(a.rows[i].loss == b.rows[i].loss);
  }
  CHECK(a.final_hashes.size() == static_cast<std::size_t>(cfg.model.stages));
  CHECK(a.final_hashes == b.final_hashes);
  return {std::move(a), a_log.str()};
}

TEST_CASE("cluster: two runs of the same config without churn are bit-identical") {
  // Microbatches reach a host in whatever order the actors' threads and the emulated links
  // deliver them (two data holders feed every stage); the weights at the end and every
  // iteration's loss must not depend on it.
  check_two_runs_alike(one_per_stage(6));
}

TEST_CASE("cluster: a run stopped with --until resumes from its checkpoints and continues the uninterrupted run") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-cluster-resume-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto cfg = local(10, {});
  cfg.node.data_dir = (dir / "full").string();
  cfg.training.checkpoint_every = 3;
  cfg.training.checkpoint_keep = 2;
  std::ostringstream full_log;
  auto full = app::run_embedded(cfg, full_log, 90);
  INFO(full_log.str());
  REQUIRE(full.completed);
  REQUIRE(full.rows.size() == 10);
  // Every host wrote its stage after iterations 3, 6, 9 and the last (10); two are kept.
  CHECK(full.last_checkpoint == 10);
  CHECK(model::checkpoint_iterations(cfg.node.data_dir + "/r3-virginia", 3) == std::vector<std::uint64_t>{9, 10});

  // The same run stopped after 5 iterations (a checkpoint after 3 and at the stop), then resumed.
  cfg.node.data_dir = (dir / "sliced").string();
  std::ostringstream first_log;
  auto first = app::run_embedded(cfg, first_log, 90, {false, std::nullopt, 5});
  INFO(first_log.str());
  REQUIRE(first.completed);
  REQUIRE(first.rows.size() == 5);
  std::ostringstream second_log;
  auto second = app::run_embedded(cfg, second_log, 90, {true, std::nullopt, std::nullopt});
  INFO(second_log.str());
  REQUIRE(second.completed);
  CHECK(second_log.str().find("# resuming at iteration 5") != std::string::npos);
  REQUIRE(second.rows.size() == 5);
  CHECK(second.rows.front().iteration == 5);
  // Every host resumed at 5 with exactly the weights it had after applying iteration 4.
  std::size_t hosts = 0;
  for (auto& [stage, by_host] : first.final_hashes)
    for (auto& [host, hash] : by_host) {
      ++hosts;
      REQUIRE(second.resumed.count(host) == 1);
      CHECK(second.resumed[host].first == 5);
      CHECK_MESSAGE(second.resumed[host].second == hash, host << " resumed with other weights");
    }
  CHECK(hosts == cfg.hosts.size());
  // The loss goes on as the uninterrupted run's: the same weights, data and schedule; with two
  // replicas per stage the balancers may route a microbatch to the other replica than the
  // uninterrupted run did, which changes how the sums group (bit for bit with one replica per
  // stage: the next case).
  for (std::size_t i = 0; i < 5; ++i) {
    INFO("iteration " << 5 + i << ": resumed " << second.rows[i].loss << ", uninterrupted " << full.rows[5 + i].loss);
    CHECK(std::abs(second.rows[i].loss - full.rows[5 + i].loss) <= 1e-6 * std::abs(full.rows[5 + i].loss));
  }
  CHECK(second.exactly_once_violations.empty());
  check_replicas_agree(second);

  // Another seed is another run: its checkpoints are refused, naming why, and nothing starts.
  auto other = cfg;
  other.training.seed += 1;
  std::ostringstream refused_log;
  auto refused = app::run_embedded(other, refused_log, 30, {true, std::nullopt, std::nullopt});
  CHECK_FALSE(refused.completed);
  REQUIRE(refused.failures.size() == 1);
  CHECK(refused.failures[0].find("cannot resume: stage 0 has no valid checkpoint") != std::string::npos);
  CHECK(refused_log.str().find("(model, seed, data or schedule changed)") != std::string::npos);
  CHECK(refused.rows.empty());
  fs::remove_all(dir);
}

// Runs `cfg` for 8 iterations whole, then stopped after 5 with --until and resumed: the
// resumed iterations' losses and the final weights must equal the whole run's bit for bit.
void check_resume_bit_for_bit(app::cluster_config cfg, const std::string& name) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  cfg.training.iterations = 8;
  cfg.training.checkpoint_every = 2;
  INFO("seed " << cfg.training.seed);
  cfg.node.data_dir = (dir / "full").string();
  std::ostringstream full_log, first_log, second_log;
  auto full = app::run_embedded(cfg, full_log, 90);
  INFO(full_log.str());
  REQUIRE(full.completed);
  cfg.node.data_dir = (dir / "sliced").string();
  auto first = app::run_embedded(cfg, first_log, 90, {false, std::nullopt, 5});
  INFO(first_log.str());
  REQUIRE(first.completed);
  auto second = app::run_embedded(cfg, second_log, 90, {true, std::nullopt, std::nullopt});
  INFO(second_log.str());
  REQUIRE(second.completed);
  REQUIRE(full.rows.size() == 8);
  REQUIRE(second.rows.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("iteration " << 5 + i);
    CHECK(second.rows[i].loss == full.rows[5 + i].loss);
  }
  CHECK(second.final_hashes.size() == 4);
  CHECK(second.final_hashes == full.final_hashes);
  fs::remove_all(dir);
}

// With overlap a periodic checkpoint is written once the next iteration's average (the step it
// still owes) is in, carries that pending step, and is named by the iteration it resumes at.
// Resumed from it (--resume-at), the run continues the uninterrupted one bit for bit.
TEST_CASE("cluster: with overlapped averaging a checkpoint carries its pending step, and a run resumed from it is the uninterrupted run bit for bit") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-cluster-overlap-resume-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto cfg = one_per_stage(8);
  cfg.training.averaging = model::averaging_mode::overlap;
  cfg.training.checkpoint_every = 2;
  cfg.training.checkpoint_keep = 8;
  cfg.node.data_dir = (dir / "run").string();
  INFO("seed " << cfg.training.seed);
  std::ostringstream full_log, second_log;
  auto full = app::run_embedded(cfg, full_log, 90);
  INFO(full_log.str());
  REQUIRE(full.completed);
  REQUIRE(full.rows.size() == 8);
  // After steps 2, 4 and 6 with the next step pending (resume at 3, 5, 7), and the last.
  CHECK(model::checkpoint_iterations(cfg.node.data_dir + "/r2-oregon", 2) == std::vector<std::uint64_t>{3, 5, 7, 8});
  auto second = app::run_embedded(cfg, second_log, 90, {true, std::uint64_t{5}, std::nullopt});
  INFO(second_log.str());
  REQUIRE(second.completed);
  CHECK(second_log.str().find("# resuming at iteration 5") != std::string::npos);
  REQUIRE(second.rows.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("iteration " << 5 + i);
    CHECK(second.rows[i].loss == full.rows[5 + i].loss);
  }
  CHECK(second.final_hashes == full.final_hashes);
  CHECK(second.exactly_once_violations.empty());
  fs::remove_all(dir);
}

// Overlap on slow cards: shares of t and activations of t + 1 cross every host's card at
// once. Every due checkpoint is written with its pending step (also when a step is taken at
// once because its average landed after the next boundary), replicas agree, and the loss is
// the reference's overlap.
TEST_CASE("cluster: with overlapped averaging on slow cards every due checkpoint is written, each with its pending step") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-cluster-overlap-slow-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto cfg = local(6, {});
  cfg.training.averaging = model::averaging_mode::overlap;
  cfg.training.checkpoint_every = 1;
  cfg.training.checkpoint_keep = 10;
  cfg.training.microbatches_per_holder = 1; // little compute per iteration
  cfg.node.data_dir = dir.string();
  for (auto& h : cfg.hosts)
    h.uplink_mbit = 0.2; // 10 Mbit/s at time_scale 0.02: a relay's 1.6 MB share takes ~1.3 s
  // Heartbeats wait behind shares on the emulated card: the detection must outlast its queue.
  cfg.faults.connection_timeout_ms = 20000;
  cfg.faults.hop_timeout_ms = 40000;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  REQUIRE(r.completed);
  // After steps 1..4 with the next step pending (resume at 2..5), and the last (6, no pending).
  for (auto [host, stage] : {std::pair{"r1-ohio", 1}, {"dh-virginia", 0}, {"r3-virginia", 3}}) {
    INFO(host);
    CHECK(model::checkpoint_iterations(cfg.node.data_dir + "/" + host, stage)
          == std::vector<std::uint64_t>{2, 3, 4, 5, 6});
  }
  CHECK(worst_vs_reference(cfg, r) <= 1e-4);
  CHECK(r.replica_disagreements.empty());
  check_replicas_agree(r);
  fs::remove_all(dir);
}

TEST_CASE("cluster: with one replica per stage a run stopped with --until and resumed is the uninterrupted run bit for bit") {
  check_resume_bit_for_bit(one_per_stage(8), "gwtf-cluster-exact-resume");
}

TEST_CASE("cluster: with exact sums two runs with several replicas per stage are bit-identical, however the flows route") {
  // Two replicas at stages 1-3: which replica computes a microbatch follows the balancers'
  // flows, which follow timing. Exact sums add integers, so the grouping does not matter.
  auto cfg = local(6, {});
  cfg.training.reproducible_sums = model::sum_order::exact;
  auto run = check_two_runs_alike(cfg);
  auto& a = run.first;
  auto& log = run.second;
  INFO(log);
  CHECK(worst_vs_reference(cfg, a) <= 1e-4); // the reference with exact sums too
  CHECK(a.exactly_once_violations.empty());
  check_replicas_agree(a);
}

TEST_CASE("cluster: with exact sums and several replicas per stage a run stopped with --until and resumed is the uninterrupted run bit for bit") {
  auto cfg = local(8, {});
  cfg.training.reproducible_sums = model::sum_order::exact;
  check_resume_bit_for_bit(cfg, "gwtf-cluster-exact-sums-resume");
}

TEST_CASE("cluster: when every replica of a stage is gone the data holders say so and nothing trains on") {
  auto cfg = local(8, {fault(2, actors::fault_action::crash, "r3-virginia"),
                       fault(2, actors::fault_action::crash, "r3-frankfurt")});
  cfg.faults.hop_timeout_ms = 500; // the stall report comes after four hop timeouts
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 12);
  INFO(log.str());
  CHECK_FALSE(r.completed);
  CHECK(r.crashes == 2);
  // Iterations before the loss completed; none after it did.
  CHECK(r.rows.size() >= 2);
  CHECK(r.rows.size() <= 3);
  bool said = false;
  for (auto& f : r.failures)
    said = said || f.find("no live replica of stage 3: no ring can close (a whole stage lost") != std::string::npos;
  CHECK_MESSAGE(said, "no data holder named the lost stage");
  // Nothing was averaged twice or from the wrong weights meanwhile.
  CHECK(r.exactly_once_violations.empty());
  CHECK(r.replica_disagreements.empty());
}

TEST_CASE("cluster: a lost stage is restored from the checkpoints without an operator and trains on as the reference does") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-cluster-restore-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // Both stage-3 relays crash in iteration 5; checkpoints every 2 iterations, one copy each.
  auto cfg = local(10, {fault(5, actors::fault_action::crash, "r3-virginia"),
                        fault(5, actors::fault_action::crash, "r3-frankfurt")});
  cfg.node.data_dir = dir.string();
  cfg.training.checkpoint_every = 2;
  cfg.training.checkpoint_replicas = 1;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.recoveries == 1);
  CHECK(r.crashes == 2);
  CHECK(log.str().find("# every replica of stage 3 is gone") != std::string::npos);
  // The relay moved from the stage with the most replicas (ties: the lower stage, the first name).
  CHECK(log.str().find("# restoring stage 3: r1-london moves there from stage 1") != std::string::npos);
  CHECK(log.str().find("# resuming at iteration 4 ") != std::string::npos);
  REQUIRE(r.rows.size() == 10);
  for (std::size_t i = 0; i < r.rows.size(); ++i)
    CHECK(r.rows[i].iteration == static_cast<std::int64_t>(i));
  // Rolled back to the cut and trained again from the same data: the reference's curve.
  check_churn_run(cfg, r);
  check_replicas_agree(r);
  REQUIRE(r.final_hashes.count(3) == 1);
  CHECK(r.final_hashes.at(3).count("r1-london") == 1);
  CHECK(r.last_applied.at("r1-london") == 9);
  CHECK(r.wasted_s > 0); // the rolled-back iterations
  fs::remove_all(dir);
}

// The same loss with overlap: the checkpoints carry their pending steps (named by the
// iteration they resume at: 3, 5, ...), so the rolled-back run continues the reference's overlap.
TEST_CASE("cluster: with overlapped averaging a lost stage is restored from checkpoints that carry their pending steps") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-cluster-restore-overlap-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto cfg = local(10, {fault(5, actors::fault_action::crash, "r3-virginia"),
                        fault(5, actors::fault_action::crash, "r3-frankfurt")});
  cfg.training.averaging = model::averaging_mode::overlap;
  cfg.node.data_dir = dir.string();
  cfg.training.checkpoint_every = 2;
  cfg.training.checkpoint_replicas = 1;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.recoveries == 1);
  // Written after steps 2 and 4, each once the next average was in: the cut resumes at 3 or
  // 5 (5 when stage 3 had averaged iteration 4 before it died).
  bool at3 = log.str().find("# resuming at iteration 3 ") != std::string::npos;
  bool at5 = log.str().find("# resuming at iteration 5 ") != std::string::npos;
  CHECK((at3 || at5));
  REQUIRE(r.rows.size() == 10);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
  fs::remove_all(dir);
}

TEST_CASE("cluster: checkpoints are copied to hosts of other stages, and a stage whose files are all lost resumes from the copies") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-cluster-replicas-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto cfg = local(8, {});
  cfg.node.data_dir = dir.string();
  cfg.training.checkpoint_every = 3;
  cfg.training.checkpoint_replicas = 1;
  // Paced copies (chunk by chunk, each copy at 200 MB/s: 4.8 MB in about 24 ms, well within
  // the two iterations to the next checkpoint); the last checkpoint's go at once.
  cfg.training.checkpoint_push_mb_s = 200;
  std::ostringstream first_log;
  auto first = app::run_embedded(cfg, first_log, 90, {false, std::nullopt, 5});
  INFO(first_log.str());
  REQUIRE(first.completed);
  // Every checkpoint (8 hosts x iterations 3 and 5) went to one host of another stage.
  CHECK(first.checkpoints == 16);
  CHECK(first.checkpoint_replicas == 16);
  auto bytes = [](const fs::path& p) {
    std::ifstream f{p, std::ios::binary};
    return std::string{std::istreambuf_iterator<char>{f}, std::istreambuf_iterator<char>{}};
  };
  std::map<std::string, int> copies; // owner -> copies of its files of 3 (paced) and 5, byte-identical
  std::error_code ec;
  for (auto& holder : fs::directory_iterator(dir))
    for (auto& owner : fs::directory_iterator(holder.path() / "replicas", ec))
      for (auto& stage : fs::directory_iterator(owner.path()))
        for (auto file : {"iteration-0000000003.ckpt", "iteration-0000000005.ckpt"}) {
          auto copy = stage.path() / file;
          auto original = dir / owner.path().filename() / stage.path().filename() / file;
          REQUIRE(fs::exists(copy));
          CHECK_MESSAGE(bytes(copy) == bytes(original), copy);
          CHECK(holder.path().filename() != owner.path().filename());
          ++copies[owner.path().filename().string()];
        }
  CHECK(copies.size() == cfg.hosts.size());
  for (auto& [owner, n] : copies)
    CHECK_MESSAGE(n == 2, owner);
  // Both stage-3 hosts lose their disks; their stage survives in the copies.
  fs::remove_all(dir / "r3-virginia");
  fs::remove_all(dir / "r3-frankfurt");
  std::ostringstream second_log;
  auto second = app::run_embedded(cfg, second_log, 90, {true, std::nullopt, std::nullopt});
  INFO(second_log.str());
  REQUIRE(second.completed);
  CHECK(second_log.str().find("# resuming at iteration 5") != std::string::npos);
  for (auto host : {"r3-virginia", "r3-frankfurt"}) {
    REQUIRE(second.resumed.count(host) == 1);
    CHECK(second.resumed[host].second == first.final_hashes[3][host]);
    CHECK(second_log.str().find(std::string{"# "} + host + " resumed stage 3 at iteration 5 from " + dir.string())
          != std::string::npos);
  }
  CHECK(second_log.str().find("/replicas/r3-") != std::string::npos);
  CHECK(second.rows.size() == 3);
  CHECK(second.exactly_once_violations.empty());
  check_replicas_agree(second);
  fs::remove_all(dir);
}

TEST_CASE("cluster: activations in fp16 or bf16 on the wire train within a band of the reference") {
  // compression.mode rounds what stages send each other to 16 bits (half the bytes); the
  // receiver computes in fp32 again. Every replica rounds alike: they still agree exactly.
  for (auto [mode, band] : {std::pair{app::compression_mode::fp16, 0.005}, {app::compression_mode::bf16, 0.02}}) {
    INFO("mode " << static_cast<int>(mode));
    auto cfg = local(15, {});
    cfg.compression.mode = mode;
    std::ostringstream log;
    auto r = app::run_embedded(cfg, log, 90);
    INFO(log.str());
    REQUIRE(r.completed);
    auto worst = worst_vs_reference(cfg, r);
    INFO("worst relative difference " << worst);
    CHECK(worst <= band);
    CHECK(worst > 0); // rounded: not bit-identical to fp32 (the band test is not vacuous)
    CHECK(r.rows.back().loss < 0.8 * r.rows.front().loss);
    CHECK(r.exactly_once_violations.empty());
    CHECK(r.failures.empty());
    check_replicas_agree(r);
  }
}

TEST_CASE("cluster: gradient shares in bf16 or int8 train within a band of the reference, every replica identical") {
  // training.share_compression rounds what the replicas of a stage send each other; each one
  // averages its own share as its stage-mates decode it, so they still agree exactly. Small
  // frames: the shares cross in chunks (int8: at blocks, with their scales). int8 with a join:
  // the joiner loads a state and starts without a residual, and still agrees.
  for (auto [how, band] : {std::pair{model::share_compression::bf16, 0.02}, {model::share_compression::int8, 0.05}}) {
    INFO("share_compression " << static_cast<int>(how));
    bool int8 = how == model::share_compression::int8;
    auto cfg = local(15, int8 ? std::vector<actors::fault_event>{fault(4, actors::fault_action::join, "r2-tokyo")}
                              : std::vector<actors::fault_event>{});
    cfg.training.share_compression = how;
    cfg.node.max_message_bytes = 256 << 10;
    cfg.node.chunk_bytes = 64 << 10;
    std::ostringstream log;
    auto r = app::run_embedded(cfg, log, 120);
    INFO(log.str());
    REQUIRE(r.completed);
    auto worst = worst_vs_reference(cfg, r);
    MESSAGE("share_compression " << (int8 ? "int8" : "bf16") << ": worst relative loss difference to the fp32 reference "
                                 << worst);
    CHECK(worst <= band);
    CHECK(worst > 0); // rounded: not bit-identical to fp32 (the band test is not vacuous)
    CHECK(r.rows.back().loss < 0.8 * r.rows.front().loss);
    CHECK(r.exactly_once_violations.empty());
    CHECK(r.failures.empty());
    if (int8)
      CHECK(std::count(r.joined.begin(), r.joined.end(), "r2-tokyo") >= 1);
    check_replicas_agree(r);
  }
}

TEST_CASE("cluster: adaptive top-k compression forced on every link still trains") {
  // compression.mode adaptive with links: all: every activation and gradient crosses its link
  // as its 10% largest values (fp16, with positions), gradients with error feedback. Training
  // still lowers the loss clearly; the replicas still agree exactly (they average the same
  // shares); the loss differs from the uncompressed reference (it is not a no-op).
  auto cfg = local(15, {});
  cfg.compression.mode = app::compression_mode::adaptive;
  cfg.compression.links = app::compression_links::all;
  cfg.compression.min_density = 0.1;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  REQUIRE(r.completed);
  auto worst = worst_vs_reference(cfg, r);
  INFO("worst relative difference to the uncompressed reference " << worst);
  CHECK(worst > 0.001);
  CHECK(r.rows.back().loss < 0.85 * r.rows.front().loss);
  CHECK(r.exactly_once_violations.empty());
  CHECK(r.failures.empty());
  check_replicas_agree(r);
}

namespace {

// configs/local.yaml with a third replica at stages 1 and 3 (r1-tokyo, r3-oregon): those
// stages average by butterfly (training.share_exchange, from 3 replicas on).
app::cluster_config three_replicas(int iterations, std::vector<actors::fault_event> script) {
  auto cfg = local(iterations, std::move(script));
  for (auto [like, name, region] : {std::tuple{"r1-ohio", "r1-tokyo", "tokyo"}, {"r3-virginia", "r3-oregon", "oregon"}}) {
    auto it = std::find_if(cfg.hosts.begin(), cfg.hosts.end(), [&](auto& h) { return h.name == like; });
    REQUIRE(it != cfg.hosts.end());
    auto h = *it;
    h.name = name;
    h.region = region;
    cfg.hosts.push_back(h);
  }
  return cfg;
}

} // namespace

TEST_CASE("cluster: stages of three replicas average by butterfly and train as the reference does") {
  // Sync, and overlapped (a round of iteration t runs while t + 1 computes): each against the
  // reference's same mode.
  for (auto averaging : {model::averaging_mode::sync, model::averaging_mode::overlap}) {
    INFO("averaging " << (averaging == model::averaging_mode::sync ? "sync" : "overlap"));
    auto cfg = three_replicas(10, {});
    cfg.training.averaging = averaging;
    cfg.node.max_message_bytes = 256 << 10; // parts and sums cross in chunks too
    cfg.node.chunk_bytes = 64 << 10;
    std::ostringstream log;
    auto r = app::run_embedded(cfg, log, 90);
    INFO(log.str());
    REQUIRE(r.completed);
    for (auto [host, stage] : {std::pair{"r1-tokyo", 1}, {"r1-ohio", 1}, {"r3-oregon", 3}})
      CHECK(log.str().find(std::string{host} + ": iteration 0: stage " + std::to_string(stage)
                           + " averages by butterfly among 3 replicas") != std::string::npos);
    CHECK(log.str().find("r2-oregon: iteration 0: stage 2 averages by butterfly") == std::string::npos); // 2 replicas
    CHECK(log.str().find("falls back to whole shares") == std::string::npos);
    // The same additions in the same order as the all-to-all exchange: the reference's loss.
    CHECK(worst_vs_reference(cfg, r) <= 1e-4);
    CHECK(r.exactly_once_violations.empty());
    CHECK(r.replica_disagreements.empty());
    CHECK(r.failures.empty());
    check_replicas_agree(r);
  }
}

TEST_CASE("cluster: with exact sums stages of three replicas average by butterfly in int64, and two runs are bit-identical") {
  auto cfg = three_replicas(6, {});
  cfg.node.max_message_bytes = 256 << 10; // int64 parts and sums cross in chunks too
  cfg.node.chunk_bytes = 64 << 10;
  cfg.training.reproducible_sums = model::sum_order::exact;
  auto run = check_two_runs_alike(cfg);
  auto& a = run.first;
  auto& log = run.second;
  INFO(log);
  CHECK(log.find("r3-oregon: iteration 0: stage 3 averages by butterfly among 3 replicas") != std::string::npos);
  CHECK(log.find("falls back to whole shares") == std::string::npos);
  CHECK(a.failures.empty());
  CHECK(worst_vs_reference(cfg, a) <= 1e-4);
  CHECK(a.exactly_once_violations.empty());
  check_replicas_agree(a);
}

TEST_CASE("cluster: a replica killed mid-butterfly falls back to whole shares and loses no microbatch") {
  // r1-tokyo dies once every contributor's part of its share reached it, before their sum
  // goes out: its stage-mates wait for a sum that never comes, see it go, fall back to whole
  // shares and average without it (its microbatches re-sent) at the same iteration.
  auto cfg = three_replicas(8, {fault(3, actors::fault_action::crash, "r1-tokyo", actors::fault_phase::averaging)});
  cfg.routing.gwtf.reroute_gain = 0; // keep flows through r1-tokyo until it dies
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 1);
  CHECK(r.gone.count("r1-tokyo") == 1);
  CHECK(log.str().find("butterfly averaging falls back to whole shares (r1-tokyo of its group is gone)")
        != std::string::npos);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
  CHECK(r.replica_disagreements.empty());
  // stage 3 kept its three replicas and its butterfly
  CHECK(log.str().find("r3-oregon: iteration 0: stage 3 averages by butterfly among 3 replicas") != std::string::npos);
}

// With overlap the round of iteration t runs while t + 1 computes: a last-stage replica
// killed mid-round has its microbatches of t computed again (their forwards re-sent by stage 2,
// their heads at the data holders, which already averaged t at stage 0) while the holders are
// in t + 1; the stage averages t without it, and t's step comes at t + 1's boundary.
TEST_CASE("cluster: with overlapped averaging a last-stage replica killed mid-butterfly has its microbatches of that iteration computed again") {
  auto cfg = three_replicas(8, {fault(3, actors::fault_action::crash, "r3-oregon", actors::fault_phase::averaging)});
  cfg.training.averaging = model::averaging_mode::overlap;
  cfg.routing.gwtf.reroute_gain = 0;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 1);
  CHECK(log.str().find("butterfly averaging falls back to whole shares (r3-oregon of its group is gone)")
        != std::string::npos);
  check_churn_run(cfg, r, 5e-3);
  check_replicas_agree(r);
}

TEST_CASE("cluster: with SWARM routing a replica killed mid-butterfly has the backwards it counted called again elsewhere") {
  // r1-tokyo counted backward calls of iteration 3 and dies before its butterfly sum goes
  // out: its stage-mates fall back to whole shares without it, and the data holders call the
  // backwards it had counted again on a live replica, which shares again.
  // SWARM's queues give each peer calls in proportion to its measured speed: r1-tokyo sits
  // beside r1-ohio here (in Tokyo it got 2 of an iteration's 8 backwards, under load once
  // none, and then there is nothing to call again).
  auto cfg = three_replicas(8, {fault(3, actors::fault_action::crash, "r1-tokyo", actors::fault_phase::averaging)});
  for (auto& h : cfg.hosts)
    if (h.name == "r1-tokyo")
      h.region = "ohio";
  cfg.routing.router = routing::router_kind::swarm;
  cfg.routing.swarm.detection = routing::swarm_detection::oracle;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 1);
  CHECK(r.gone.count("r1-tokyo") == 1);
  CHECK(log.str().find("r1-tokyo died before stage 1 averaged: the backward of ") != std::string::npos);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
}

TEST_CASE("cluster: SWARM's rebalancing moves a relay of a fast stage to the slow one, exactly once, replicas equal") {
  // Stages 1 and 3 have three replicas each; stage 2 has one, three times slower
  // (compute_scale 3). Every 2 s the deciding data holder (dh-frankfurt, the lower name)
  // moves a relay of the fastest stage to the slowest: it drains, leaves, downloads stage 2's
  // state and serves it. Training stays exactly once and on the reference's curve.
  auto cfg = three_replicas(20, {});
  cfg.hosts.erase(std::remove_if(cfg.hosts.begin(), cfg.hosts.end(), [](auto& h) { return h.name == "r2-ireland"; }),
                  cfg.hosts.end());
  for (auto& h : cfg.hosts)
    if (h.name == "r2-oregon")
      h.compute_scale = 3;
  cfg.routing.router = routing::router_kind::swarm;
  cfg.routing.swarm.detection = routing::swarm_detection::oracle;
  cfg.routing.swarm.rebalance_ms = 2000;
  cfg.routing.swarm.refresh_ms = 1000;
  auto csv = std::filesystem::temp_directory_path() / ("gwtf-swarm-move-" + std::to_string(::getpid()) + ".csv");
  cfg.training.loss_out = csv.string(); // the driver then asks every host's `flows` at the end
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  std::filesystem::remove(csv);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 0);
  auto text = log.str();
  // Only the deciding holder orders moves; its first fills the slow stage.
  std::vector<std::string> orders;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find(": SWARM's rebalancing: stage ") != std::string::npos)
      orders.push_back(line);
  REQUIRE_FALSE(orders.empty());
  for (auto& o : orders)
    CHECK_MESSAGE(o.rfind("# dh-frankfurt: iteration ", 0) == 0, o);
  CHECK_MESSAGE(orders[0].size() > 5, orders[0]);
  CHECK_MESSAGE(orders[0].substr(orders[0].size() - 5) == " to 2", orders[0]);
  CHECK(text.find("placed itself at stage 2 (moved from stage ") != std::string::npos);
  // The shell's `flows` at a data holder: the rebalancing's period and its next look.
  REQUIRE(r.final_flows.count("dh-frankfurt") == 1);
  auto flows = nlohmann::json::parse(r.final_flows.at("dh-frankfurt"));
  REQUIRE(flows.contains("swarm"));
  CHECK(flows["swarm"]["rebalance"]["every_ms"] == 2000);
  CHECK(flows["swarm"]["rebalance"]["next_in_ms"].is_number());
  CHECK(flows["swarm"]["rebalance"]["next_in_ms"].get<std::int64_t>() <= 2000);
  // Moves lose no relay and empty no stage: the 7 relays end spread over stages 1-3, each
  // stage's replicas in agreement (SWARM's rule may later move the slow replica itself, so
  // which stage ends with how many depends on timing).
  std::size_t relays = 0;
  for (int stage = 1; stage <= 3; ++stage) {
    INFO("stage " << stage);
    REQUIRE(r.final_hashes.count(stage) == 1);
    CHECK(!r.final_hashes.at(stage).empty());
    relays += r.final_hashes.at(stage).size();
  }
  CHECK(relays == 7);
  check_churn_run(cfg, r);
  check_replicas_agree(r);
  CHECK(r.replica_disagreements.empty());
}

TEST_CASE("cluster: a gradient added twice inside a replica is caught by the exactly-once check (faults.script double_count)") {
  // The check counts additions where they happen (model::stage::additions), not the set that
  // makes accumulation skip duplicates: with the set, this double count reported each key
  // once and passed. One relay and one data holder each add one microbatch twice.
  auto cfg = local(4, {fault(2, actors::fault_action::double_count, "r1-ohio"),
                       fault(2, actors::fault_action::double_count, "dh-virginia")});
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 60);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.crashes == 0);
  // The seam doubles the next microbatch the host counts once the fault fired: at the data
  // holder one of its own of iteration 2; at the relay the next one that reaches it, which is
  // in iteration 3 when the flows sent it nothing more of iteration 2 (seen once in 8 runs).
  REQUIRE(r.exactly_once_violations.size() == 2); // one each, nothing else
  CHECK(r.exactly_once_violations[0] == "stage 0 iteration 2: 0 missing, 1 counted twice");
  auto relay = r.exactly_once_violations[1];
  CHECK_MESSAGE((relay == "stage 1 iteration 2: 0 missing, 1 counted twice"
                 || relay == "stage 1 iteration 3: 0 missing, 1 counted twice"),
                relay);
  auto relay_iteration = relay.substr(std::string{"stage 1 iteration "}.size(), 1);
  // The stages see it themselves too (node mode has no driver): each replica of stages 0
  // and 1 that averaged that iteration says so, and nothing else does.
  std::set<std::string> stages_seen;
  for (auto& f : r.failures)
    if (auto at = f.find("exactly-once: stage "); at != std::string::npos) {
      auto stage = f.substr(at + 20, 1);
      auto iteration = stage == "0" ? std::string{"2"} : relay_iteration;
      CHECK_MESSAGE(f.find(" iteration " + iteration + ": the averaged shares do not hold each of their") != std::string::npos, f);
      stages_seen.insert(stage);
    }
  CHECK(stages_seen == std::set<std::string>{"0", "1"});
}

TEST_CASE("cluster: a host with compute_scale 3 takes about three times as long per microbatch as its stage-mate") {
  // hosts[].compute_scale pads each forward and backward with a sleep of (scale - 1) x its
  // measured time: the host is that many times slower than this machine, in its own metrics
  // (the driver's per-host compute seconds) as for its peers. r1-ohio at 3, r1-london at 1,
  // the same stage: compute seconds per microbatch carried, about 3x. The measured times of
  // hosts sharing 2 cores vary with contention (5.1x seen under CI's load): above 2x, and
  // below 9x (a multiplier applied twice would give about 9x).
  auto cfg = local(6, {});
  for (auto& h : cfg.hosts)
    if (h.name == "r1-ohio")
      h.compute_scale = 3.0;
  INFO("seed " << cfg.training.seed);
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 90);
  INFO(log.str());
  REQUIRE(r.completed);
  REQUIRE(r.carried["r1-ohio"] > 0);
  REQUIRE(r.carried["r1-london"] > 0);
  double slow = r.host_compute_s["r1-ohio"] / static_cast<double>(r.carried["r1-ohio"]);
  double fast = r.host_compute_s["r1-london"] / static_cast<double>(r.carried["r1-london"]);
  INFO("per microbatch: r1-ohio " << slow << " s, r1-london " << fast << " s, ratio " << slow / fast);
  CHECK(slow / fast > 2.0);
  CHECK(slow / fast < 9.0);
  check_replicas_agree(r);
}

// training.mode atom (docs/atom.md): every host of the demo a whole-model peer on its own
// data, averaging every two local steps.
app::cluster_config atom_local(int iterations, std::vector<actors::fault_event> script) {
  auto cfg = local(iterations, std::move(script));
  cfg.training.mode = model::training_mode::atom;
  cfg.training.atom.sync_every = 2;
  for (auto& h : cfg.hosts) { // as the config loader makes them (app/config/config_loader.cpp)
    h.role = actors::host_role::data_holder;
    h.stage = 0;
  }
  return cfg;
}

// An atom run under churn: completed with `crashes` crashes, every round exactly once, every
// peer's averages agreeing.
void check_atom_churn(const app::embedded_result& r, int crashes) {
  REQUIRE(r.completed);
  CHECK(r.crashes == crashes);
  for (auto& v : r.exactly_once_violations)
    FAIL_CHECK(v);
  CHECK(r.replica_disagreements.empty());
  check_replicas_agree(r);
}

TEST_CASE("cluster: atom mode trains as run_atom_reference's peers do within 1e-4, every peer landing the same averages") {
  auto cfg = atom_local(6, {});
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  REQUIRE(r.completed);
  CHECK(r.failures.empty());
  for (auto& v : r.exactly_once_violations)
    FAIL_CHECK(v);
  CHECK(r.replica_disagreements.empty());
  std::vector<double> ref;
  auto peers = static_cast<int>(cfg.hosts.size());
  REQUIRE(std::holds_alternative<bool>(model::run_atom_reference(
    cfg.model, cfg.training, cfg.data, peers, 2, [&](const model::reference_report& rep) { ref.push_back(rep.loss); })));
  REQUIRE(r.rows.size() == ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    INFO("iteration " << i << ": cluster " << r.rows[i].loss << ", atom reference " << ref[i]);
    CHECK(std::abs(r.rows[i].loss - ref[i]) <= 1e-4 * std::abs(ref[i]));
  }
  check_replicas_agree(r); // the last average's hash, at every peer
  REQUIRE(r.final_hashes.count(0) == 1);
  CHECK(r.final_hashes.at(0).size() == cfg.hosts.size());
}

TEST_CASE("cluster: atom mode leaves out a peer that crashed while sending its parameters, at every peer alike") {
  // r1-london sends a round's parameters to the first half of its peers (dh-frankfurt,
  // dh-virginia, r1-ohio) and crashes: those hold its contribution, the other four do not.
  // Every peer lands that round without it, and the averages agree.
  auto cfg = atom_local(8, {fault(2, actors::fault_action::crash, "r1-london", actors::fault_phase::averaging)});
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 120);
  INFO(log.str());
  check_atom_churn(r, 1);
  std::set<std::string> told; // who said it left r1-london out
  std::istringstream lines{log.str()};
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("# ", 0) == 0 && line.find(": atom round ") != std::string::npos
        && line.find("r1-london's parameters are left out") != std::string::npos)
      told.insert(line.substr(2, line.find(':') - 2));
  CHECK(told == std::set<std::string>{"dh-frankfurt", "dh-virginia", "r1-ohio"});
  REQUIRE(r.rows.size() == 8);
  CHECK(r.rows.back().loss < 0.9 * r.rows.front().loss);
}

TEST_CASE("cluster: atom mode goes on without a crashed peer and with a joiner that downloads the average, exactly once") {
  auto cfg = atom_local(12, {fault(3, actors::fault_action::crash, "r1-london", actors::fault_phase::forward),
                             fault(4, actors::fault_action::join, "r2-tokyo"),
                             fault(7, actors::fault_action::crash, "r2-ireland", actors::fault_phase::backward)});
  cfg.training.averaging = model::averaging_mode::overlap;
  std::ostringstream log;
  auto r = app::run_embedded(cfg, log, 180);
  INFO(log.str());
  check_atom_churn(r, 2);
  REQUIRE(std::count(r.joined.begin(), r.joined.end(), "r2-tokyo") >= 1);
  CHECK(r.last_applied.at("r2-tokyo") == 11);
  REQUIRE(r.rows.size() == 12);
  CHECK(r.rows.back().loss < 0.9 * r.rows.front().loss);
}
