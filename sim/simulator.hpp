// Discrete-event simulation of pipeline training under churn: virtual time, one thread,
// deterministic for a seed. A second runtime beside actors/, in its own layer (sim/: it uses
// routing/, nothing below app/ uses it). The routers are the routing/ cores unchanged:
// GWTF = one flow_balancer per host wired through simulated links, SWARM = one swarm_router
// per data holder (as its code runs: stage-level retry, wall-time throughput, rebalancing;
// swarm-restart: the GWTF paper's account, a lost backward reruns the microbatch),
// centralized = the oracle (max_flow_min_max) recomputed with global knowledge after every
// change. Each run also computes a proven lower bound on every iteration's time
// (routing/bound.hpp) from the hosts that could work in it. Everything else is common to all routers, so they compare fairly:
// hosts, compute times, capacities, links with per-link send queues, the churn trace (drawn
// from the seed before routing starts), failure detection delay and stage aggregation.
// Model and decisions: docs/simulator.md.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include <optional>

#include "model/share_codec.hpp"
#include "routing/compression.hpp"
#include "routing/network.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::sim {

using routing::compression_policy;
using routing::gwtf_config;
using routing::network_matrix;
using routing::swarm_config;

/// One simulated host.
struct sim_host {
  std::string name;
  std::size_t region = 0; ///< index into the network's regions
  int stage = 0;          ///< 0 = data holder, 1..S-1 = relay; a joiner with -1: the bottleneck stage
  int capacity = 1;       ///< microbatches it can hold (stash) at once
  double compute_s = 0;   ///< forward + backward of one microbatch at its stage, seconds
  /// Its network card: everything it sends (receives) shares this many bytes/s (inf: no limit).
  double uplink_bytes_s = std::numeric_limits<double>::infinity();
  double downlink_bytes_s = std::numeric_limits<double>::infinity();
  /// Atom mode (docs/atom.md): forward + backward of one microbatch through the whole model,
  /// seconds; the fast memory it trains in and its bandwidth to the slow one (bytes, bytes/s).
  double model_compute_s = 0;
  double memory_bytes = std::numeric_limits<double>::infinity();
  double swap_bytes_s = std::numeric_limits<double>::infinity();
};

/// The whole model as ATOM's peers hold it (router `atom`, docs/atom.md).
struct sim_atom_model {
  double state_bytes = 0;       ///< weights, gradients and Adam's moments (fp32: 16 bytes a parameter)
  double activation_bytes = 0;  ///< one microbatch's activations through the whole model
  /// The same, rematerialising: every block's input, one block's activations and the
  /// logits (a forward more per microbatch: 4/3 of the compute)
  double remat_activation_bytes = 0;
  double block_state_bytes = 0; ///< the largest swapped unit (a block, or the embedding or head)
  double average_bytes = 0;     ///< one peer's parameters on the wire (training.share_compression)
  double download_bytes = 0;    ///< a joiner's download (model.download_bytes_per_param)
  int sync_every = 1;           ///< global batches between two averages
  int local_microbatches = 1;   ///< microbatches of a local step (one pass over the blocks)
};

/// What happens to the cluster.
enum class sim_event_kind {
  crash,   ///< the host dies; peers learn of it detect_s later
  leave,   ///< the host announces it goes and goes: peers know at once, its work is lost
  join,    ///< a new relay downloads its stage's weights from a replica, then enters
  degrade, ///< the links between two regions keep `factor` of their bandwidth (both ways)
};
const char* to_string(sim_event_kind k);

/// One churn event, at `at_fraction` of the previous iteration's length after iteration
/// `iteration` starts (so that it hits forward and backward passes). An event that would land
/// after the last iteration does not happen.
struct sim_event {
  sim_event_kind kind = sim_event_kind::crash;
  int iteration = 0;
  double at_fraction = 0;
  std::size_t host = 0;         ///< crash, leave: index into hosts
  sim_host joiner;              ///< join: the new host (stage -1: placed at the bottleneck)
  std::size_t region_a = 0;     ///< degrade: the two regions (equal: links inside the region)
  std::size_t region_b = 0;
  double factor = 1;            ///< degrade: remaining share of bandwidth, (0, 1]
};

/// A simulation run's inputs (derived figures; app/ builds them from a scenario file).
struct sim_scenario {
  network_matrix net;
  int stages = 2;                    ///< S: stage 0 = data holders, 1..S-1 relays
  std::vector<sim_host> hosts;
  int microbatches_per_holder = 8;   ///< each data holder's share of the global batch
  double activation_bytes = 0;       ///< one activation (= one activation gradient)
  double stash_bytes = 0;            ///< one microbatch's activations a relay stage keeps from forward
                                     ///< to backward (0: unknown; rematerialisation then gains no slots)
  double stage_gradient_bytes = 0;   ///< one relay stage's gradients: all-reduced among its replicas
  double holder_gradient_bytes = 0;  ///< the data holders' stage (embedding, head); 0: as a relay stage
  /// sync: an iteration starts once the last one's averaging ended; overlap: once its
  /// microbatches are done and the averaging before it ended (every update one iteration stale)
  model::averaging_mode averaging = model::averaging_mode::sync;
  /// The averaging also pays the runtime protocol's message latencies (docs/runtime.md, "The
  /// end of an iteration"): the data holders' ITERATION_DONE reaching every replica before
  /// it shares, the all-gather after the reduce-scatter, and every stage's NORM_SHARE
  /// reaching every host before the step; false: one latency, the transfers' own
  bool protocol_latency = false;
  double tokens_per_microbatch = 0;
  int iterations = 10;
  double crash_rate = 0;             ///< per relay and iteration; a stage keeps one live relay
  double leave_rate = 0;             ///< per relay and iteration, as crash_rate
  double join_rate = 0;              ///< per iteration: joins drawn per initial relay with this chance
  double degrade_rate = 0;           ///< per iteration: chance that one region pair degrades
  double degrade_factor = 0.25;      ///< bandwidth share a degraded region pair keeps
  double stage_weight_bytes = 0;     ///< one relay stage's weights (+ optimizer state): a joiner's download
  std::vector<sim_event> script;     ///< scripted events, merged with the drawn ones
  double detect_s = 2.0;             ///< failure detection delay (heartbeat timeout), all routers
  std::uint64_t seed = 1;
  gwtf_config gwtf;
  int gwtf_view = 0;                 ///< GWTF: live peers a host knows per neighbouring stage (0: all)
  swarm_config swarm;
  /// SWARM (and swarm-restart): every call's input goes from the trainer (the data holder) to
  /// the peer and its answer back, as SWARM's code and the runtime's SWARM run; false: data
  /// moves peer to peer (cheaper for SWARM: the shipped scenarios' default)
  bool swarm_via_trainer = false;
  /// Adaptive activation compression (routing/compression.hpp) on every router's transfers;
  /// unset: activations travel whole (activation_bytes).
  std::optional<compression_policy> compression;
  double compress_s_per_value = 0;   ///< compression: top-k + scatter back, per dense value
  sim_atom_model atom;               ///< router atom: every host trains the whole model
};

/// The routers; `atom` is no router but ATOM's whole-model peers, on the same hosts, links
/// and churn (sim/atom.cpp, docs/atom.md).
enum class sim_router { gwtf, swarm, swarm_restart, centralized, atom };
const char* to_string(sim_router r);


/// What a run measured.
struct sim_result {
  sim_router router = sim_router::gwtf;
  bool completed = false;              ///< every iteration finished (false: no route left)
  std::string why;                     ///< when not completed
  double total_s = 0;                  ///< virtual time until the last iteration's aggregation
  double setup_s = 0;                  ///< time before the first iteration could start (flow building)
  std::vector<double> iteration_s;     ///< per iteration, start to end of aggregation
  std::vector<double> iteration_end_s; ///< virtual time at which each iteration ended
  std::vector<double> aggregation_s;   ///< per iteration: its last part, the stages' all-reduce
  std::vector<int> flows;              ///< concurrent routes per iteration (flows; SWARM: none = 0)
  std::int64_t microbatches = 0;       ///< completed, over all iterations
  double compute_s = 0;                ///< compute seconds spent, wasted included
  double wasted_s = 0;                 ///< compute seconds thrown away
  std::vector<double> crash_times_s;   ///< crashes and leaves, for plots
  std::vector<double> join_times_s;    ///< when joiners entered (download done)
  int crashes = 0;
  int leaves = 0;
  int joins = 0;
  int degrades = 0;
  int moves = 0;                       ///< SWARM: peers its rebalancing moved to another stage
  std::int64_t fallback_hops = 0;      ///< GWTF, centralized: hops sent without a route (to a known peer)
  std::int64_t reroutes = 0;           ///< GWTF: built flows its balancers moved for cost (reroute_gain)
  std::int64_t deferred_moves = 0;     ///< GWTF: moves its balancers put off while a microbatch was in flight (idle_moves)
  std::int64_t dense_transfers = 0;    ///< with compression: activations (and gradients) sent whole
  std::int64_t sparse_transfers = 0;   ///< with compression: sent as top-k
  std::vector<double> bound_iteration_s; ///< per iteration: proven lower bound on its time
  double bound_s = 0;                  ///< their sum: no router can train these iterations faster
};

/// The churn trace of a scenario, drawn from its seed before any routing happens and merged
/// with its script (ordered by iteration, then time): the same for every router. Drawn crashes
/// and leaves hit live relays (joiners included), never a data holder nor the last relay of a
/// stage; drawn joiners copy the region, capacity and speed of a drawn initial relay. A joiner
/// without a stage gets the bottleneck stage (lowest live microbatches/s) of that moment, and
/// its `host` is its index: the scenario's hosts, then the joiners in trace order.
std::vector<sim_event> churn_trace(const sim_scenario& s);

/// A degrade event on `net`: the links between its two regions (both ways), or inside one
/// region only, keep `factor` of their bandwidth.
void degrade_links(network_matrix& net, const sim_event& e);

/// Runs the scenario with `router`.
sim_result simulate(const sim_scenario& s, sim_router router);

/// ATOM's whole-model peers (sim/atom.cpp, docs/atom.md): every host, data holder or relay,
/// trains the whole model on its own data at its speed, swapping what its memory does not
/// hold; the peers average their parameters by butterfly all-reduce once they processed
/// `atom.sync_every` global batches (data holders x microbatches_per_holder) together, as
/// hivemind's target batch size. An "iteration" of the result is such a round; its bound
/// is the compute alone (every live peer at its compute speed, nothing else).
sim_result simulate_atom(const sim_scenario& s);

} // namespace gwtf::sim
