// Simulation scenarios (configs/scenarios/*.yaml) as plain data: the network matrix's file, the
// model (from which activation size, compute and gradient bytes follow), the hosts per region
// with their speed and capacity ranges, the iterations, the churn, placement, routing and
// compression. Each section lists its fields once (visit_fields) and checks itself
// (validate); app/sim/scenario.cpp reads them from YAML, sim/scenario.hpp derives the
// simulation's inputs from them. Reference: docs/simulator.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/validation.hpp"
#include "model/model_config.hpp"
#include "model/share_codec.hpp"
#include "routing/compression.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::sim {

/// The model as far as the simulation needs it. Its sizes come from model/sizing.hpp, the
/// same counts as the modules the runtime trains: parameters per relay stage (the blocks are
/// shared evenly), the data holders' embedding and head, and the FLOPs of a training step.
struct sim_model_config {
  model::architecture arch = model::architecture::gpt; ///< decoder family
  int layers = 24;                   ///< transformer blocks
  int hidden = 2048;                 ///< model width
  int ffn_hidden = 0;                ///< MLP width; 0 picks 4*hidden (gpt) or 8*hidden/3 rounded up to 32 (llama)
  int seq_len = 1024;                ///< tokens per sequence
  int microbatch_size = 4;           ///< sequences per microbatch
  int vocab = 32000;                 ///< vocabulary size
  int stages = 7;                    ///< pipeline stages, the data holders' stage 0 included
  int bytes_per_value = 2;           ///< activations, gradients on the wire (2 = fp16/bf16)
  double download_bytes_per_param = 10; ///< a joiner's download per parameter (weights + Adam state)

  void validate(const issue_sink& report) const;
  /// The same shape as the runtime's model config (what model/sizing.hpp sizes).
  model::model_config shape() const;
};

/// Whether a host group holds data or relays.
enum class sim_role { data_holder, relay };

constexpr std::array<std::pair<sim_role, const char*>, 2> enum_names(sim_role) {
  return {{{sim_role::data_holder, "data_holder"}, {sim_role::relay, "relay"}}};
}

/// `count` hosts in each of `regions` (["all"]: every region of the network).
struct sim_host_group {
  sim_role role = sim_role::relay;
  std::vector<std::string> regions{"all"};
  int count = 1;                          ///< hosts per region
  int stage = 0;                          ///< relays: 0 = dealt round-robin over stages 1..S-1
  std::vector<double> tflops{50.0};       ///< effective TFLOP/s: [value] or [min, max], drawn uniformly
  std::vector<int> capacity{4};           ///< microbatches held at once: [value] or [min, max]
  /// Each host's network card, shared by everything it sends (receives): activations, shares,
  /// downloads, balancer messages; Mbit/s, 0 = no limit beyond its links'.
  double uplink_mbit = 0;
  double downlink_mbit = 0;
  /// The fast memory a host trains in (its GPU's), GB; 0 = unlimited. Only the atom mode
  /// uses it: a whole model above it is swapped through (docs/atom.md).
  double memory_gb = 0;
  /// Bytes/s between its fast memory and where swapped layers live (host RAM over PCIe, or
  /// disk), GB/s.
  double swap_gbyte_s = 16;

  void validate(const issue_sink& report) const;
};

/// One scripted churn event.
enum class sim_action { crash, leave, join, degrade };

constexpr std::array<std::pair<sim_action, const char*>, 4> enum_names(sim_action) {
  return {{{sim_action::crash, "crash"},
           {sim_action::leave, "leave"},
           {sim_action::join, "join"},
           {sim_action::degrade, "degrade"}}};
}

struct sim_script_event {
  int iteration = 0;                  ///< the iteration it happens in
  double at = 0.5;                    ///< when: a fraction of the previous iteration's length
  sim_action action = sim_action::crash;
  std::string host;                   ///< crash, leave: a relay's name (see docs/simulator.md)
  std::string region;                 ///< join: where the new relay is
  int stage = 0;                      ///< join: 0 = the bottleneck stage
  double tflops = 50;                 ///< join: its speed
  int capacity = 4;                   ///< join: its capacity
  double uplink_mbit = 0;             ///< join: its network card's limits (0: none)
  double downlink_mbit = 0;
  double memory_gb = 0;               ///< join: its fast memory (0: unlimited; atom mode)
  double swap_gbyte_s = 16;           ///< join: its swap bandwidth (atom mode)
  std::vector<std::string> regions;   ///< degrade: the two regions (the same twice: inside one)
  double factor = 0.25;               ///< degrade: share of bandwidth left

  void validate(const issue_sink& report) const;
};

/// Churn: per-iteration rates, plus a script.
struct sim_churn_config {
  double crash_rate = 0;     ///< per relay and iteration
  double leave_rate = 0;     ///< per relay and iteration (announced: no detection delay)
  double join_rate = 0;      ///< per initial relay and iteration: a look-alike joins
  double degrade_rate = 0;   ///< per iteration: one region pair loses bandwidth
  double degrade_factor = 0.25; ///< share of bandwidth a degraded pair keeps
  double detect_s = 2.0;     ///< failure detection delay (heartbeat timeout)
  std::vector<sim_script_event> script;

  void validate(const issue_sink& report) const;
};

/// Where relays without a declared stage go (docs/simulator.md, "placement").
enum class sim_placement_policy { deal, gwtf, dtfm, random };

constexpr std::array<std::pair<sim_placement_policy, const char*>, 4> enum_names(sim_placement_policy) {
  return {{{sim_placement_policy::deal, "deal"},
           {sim_placement_policy::gwtf, "gwtf"},
           {sim_placement_policy::dtfm, "dtfm"},
           {sim_placement_policy::random, "random"}}};
}

inline const char* to_string(sim_placement_policy p) {
  for (auto& [v, name] : enum_names(p))
    if (v == p)
      return name;
  return "?";
}

struct sim_placement_config {
  /// deal: round-robin over stages 1..S-1 in host order; gwtf: one by one to the bottleneck
  /// stage (routing::place_unstaged, what a stage-less host does at start); dtfm: DT-FM's
  /// cost model and evolutionary search (routing/dtfm.hpp); random: a seeded shuffle, dealt.
  sim_placement_policy policy = sim_placement_policy::deal;
};

/// Adaptive activation compression in the simulation (docs/simulator.md, "compression").
enum class sim_compression_mode { off, adaptive };

constexpr std::array<std::pair<sim_compression_mode, const char*>, 2> enum_names(sim_compression_mode) {
  return {{{sim_compression_mode::off, "off"}, {sim_compression_mode::adaptive, "adaptive"}}};
}

struct sim_compression_config {
  /// off: activations travel whole (model.bytes_per_value per value); adaptive: as the runtime's
  /// compression.mode adaptive (routing/compression.hpp), values of model.bytes_per_value bytes
  sim_compression_mode mode = sim_compression_mode::off;
  double min_density = 0.1;            ///< as compression.min_density
  routing::compression_links links = routing::compression_links::slow; ///< as compression.links
  /// Compute of top-k at the sender and the scatter back at the receiver, per value of the
  /// dense tensor, in nanoseconds (default: a GPU, a few memory passes; docs/simulator.md)
  double compress_ns_per_value = 0.02;

  void validate(const issue_sink& report) const;
};

/// ATOM's whole-model peers (router `atom`, docs/atom.md).
struct sim_atom_config {
  /// Global batches (data_holders x microbatches_per_holder microbatches, one pipeline
  /// iteration's) the peers process together between two parameter averages.
  int sync_every = 1;
  /// Microbatches of one local optimizer step; 0 = microbatches_per_holder.
  int local_microbatches = 0;

  void validate(const issue_sink& report) const;
};

/// The stages' averaging, as the runtime's training section names it.
struct sim_training_config {
  model::averaging_mode averaging = model::averaging_mode::sync;
  model::share_compression share_compression = model::share_compression::bf16;
  /// The averaging pays the runtime protocol's message latencies too (sim_scenario::protocol_latency)
  bool protocol_latency = false;
  sim_atom_config atom;
};

/// The routers' constants.
struct sim_routing_config {
  int gwtf_view = 16;          ///< GWTF: live peers a host knows per neighbouring stage (0: all)
  routing::gwtf_config gwtf;
  routing::swarm_config swarm;
  /// SWARM's calls go through its trainer (input out, answer back), as its code and the
  /// runtime run it; false (the default): data moves peer to peer, cheaper for SWARM
  bool swarm_via_trainer = false;
};

/// A whole scenario file.
struct sim_scenario_config {
  std::string name;                   ///< printed and used in output names
  std::string network;                ///< network matrix file, relative to the scenario file
  std::uint64_t seed = 1;             ///< hosts' speeds and capacities, and the churn trace
  int iterations = 20;
  int microbatches_per_holder = 16;   ///< each data holder's share of the global batch
  sim_model_config model;
  std::vector<sim_host_group> hosts;
  sim_churn_config churn;
  sim_placement_config placement;
  sim_routing_config routing;
  sim_compression_config compression;
  sim_training_config training;
};

template <class F>
void visit_fields(F& f, sim_model_config& x) {
  f("arch", x.arch);
  f("layers", x.layers);
  f("hidden", x.hidden);
  f("ffn_hidden", x.ffn_hidden);
  f("seq_len", x.seq_len);
  f("microbatch_size", x.microbatch_size);
  f("vocab", x.vocab);
  f("stages", x.stages);
  f("bytes_per_value", x.bytes_per_value);
  f("download_bytes_per_param", x.download_bytes_per_param);
}

template <class F>
void visit_fields(F& f, sim_host_group& x) {
  f("role", x.role);
  f("regions", x.regions);
  f("count", x.count);
  f("stage", x.stage);
  f("tflops", x.tflops);
  f("capacity", x.capacity);
  f("uplink_mbit", x.uplink_mbit);
  f("downlink_mbit", x.downlink_mbit);
  f("memory_gb", x.memory_gb);
  f("swap_gbyte_s", x.swap_gbyte_s);
}

template <class F>
void visit_fields(F& f, sim_script_event& x) {
  f("iteration", x.iteration);
  f("at", x.at);
  f("action", x.action);
  f("host", x.host);
  f("region", x.region);
  f("stage", x.stage);
  f("tflops", x.tflops);
  f("capacity", x.capacity);
  f("uplink_mbit", x.uplink_mbit);
  f("downlink_mbit", x.downlink_mbit);
  f("memory_gb", x.memory_gb);
  f("swap_gbyte_s", x.swap_gbyte_s);
  f("regions", x.regions);
  f("factor", x.factor);
}

template <class F>
void visit_fields(F& f, sim_churn_config& x) {
  f("crash_rate", x.crash_rate);
  f("leave_rate", x.leave_rate);
  f("join_rate", x.join_rate);
  f("degrade_rate", x.degrade_rate);
  f("degrade_factor", x.degrade_factor);
  f("detect_s", x.detect_s);
  f("script", x.script);
}

template <class F>
void visit_fields(F& f, sim_placement_config& x) {
  f("policy", x.policy);
}

template <class F>
void visit_fields(F& f, sim_compression_config& x) {
  f("mode", x.mode);
  f("min_density", x.min_density);
  f("links", x.links);
  f("compress_ns_per_value", x.compress_ns_per_value);
}

template <class F>
void visit_fields(F& f, sim_atom_config& x) {
  f("sync_every", x.sync_every);
  f("local_microbatches", x.local_microbatches);
}

template <class F>
void visit_fields(F& f, sim_training_config& x) {
  f("averaging", x.averaging);
  f("share_compression", x.share_compression);
  f("protocol_latency", x.protocol_latency);
  f("atom", x.atom);
}


template <class F>
void visit_fields(F& f, sim_routing_config& x) {
  f("gwtf_view", x.gwtf_view);
  f("gwtf", x.gwtf);
  f("swarm", x.swarm);
  f("swarm_via_trainer", x.swarm_via_trainer);
}

template <class F>
void visit_fields(F& f, sim_scenario_config& x) {
  f("name", x.name);
  f("network", x.network);
  f("seed", x.seed);
  f("iterations", x.iterations);
  f("microbatches_per_holder", x.microbatches_per_holder);
  f("model", x.model);
  f("hosts", x.hosts);
  f("churn", x.churn);
  f("placement", x.placement);
  f("routing", x.routing);
  f("compression", x.compression);
  f("training", x.training);
}

} // namespace gwtf::sim
