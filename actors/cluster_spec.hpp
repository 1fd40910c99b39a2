// What every host of a run knows before it starts (from cluster.yaml): plain data, no CAF.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/node_config.hpp"
#include "messages/types.hpp"
#include "model/model_config.hpp"
#include "routing/compression.hpp"
#include "routing/dtfm.hpp"
#include "routing/network.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::actors {

/// Everything every host of a run knows before it starts (from cluster.yaml). Immutable,
/// shared by the hosts of one process.
struct cluster_spec {
  model::model_config model;
  model::training_config training;
  model::data_config data;
  routing::routing_config routing;
  fault_config faults;
  std::vector<host_config> hosts;     ///< every declared host (bootstrap list)
  std::vector<std::string> holders;   ///< data holders in config order (holder index)
  double time_scale = 1.0;            ///< emulated delays x this; 0 = no emulated delay
  std::int64_t max_message_bytes = 64 << 20;
  std::int64_t chunk_bytes = 1 << 20; ///< node.chunk_bytes: the largest piece of a tensor on the wire
  double activation_bytes = 0;        ///< one microbatch's activation, for edge costs
  std::string advertise;              ///< node mode: the address peers dial; empty: embedded
  /// Checkpoints (docs/checkpoints.md) go to data_dir/HOST/stage-S/; empty: none written.
  std::string data_dir;
  std::uint64_t checkpoint_hash = 0;  ///< deploy's checkpoint_hash of the config
  /// Founding hosts load a checkpoint at start: the one of `resume_at` when set, else
  /// their newest valid one. A host without a usable one joins and downloads the state.
  bool resume = false;
  std::optional<std::uint64_t> resume_at;
  /// --until N: stop after N iterations applied; the schedule stays training.iterations'.
  std::optional<std::uint64_t> until;
  /// Node mode with checkpoints and no launcher: a relay stage whose every replica is gone is
  /// restored by the hosts themselves (docs/checkpoints.md; launch restores it itself).
  bool self_restore = false;
  /// Node mode (one host per process): the compute runs on a thread of its own, so that a
  /// long forward, backward or averaging never holds up the actors that send heartbeats, read
  /// the network and balance flows (they share the scheduler's few threads). The embedded
  /// cluster keeps its computes on the scheduler: there its threads bound the parallelism.
  bool compute_detached = false;
  /// compression.mode: the type activations and their gradients travel in (float32: as
  /// computed; float16 / bfloat16: rounded for the wire, fp32 again at the receiver).
  wire::dtype activation_wire_type = wire::dtype::float32;
  /// compression.mode adaptive: when a link carries only the top-k values (with
  /// activation_wire_type float16); unset: every tensor travels whole.
  std::optional<routing::compression_policy> adaptive;
  /// placement.policy dtfm: what DT-FM reads (hosts' regions come from the membership view)
  /// and its region matrix; unset: the bottleneck rule.
  std::optional<routing::dtfm_request> dtfm;
  std::shared_ptr<const routing::network_matrix> dtfm_network;
  /// placement.relays / wait_ms: a founding stage-less relay places itself once it sees this
  /// many relays and every data holder of `holders` (or after wait_ms); 0: once its view settles.
  int placement_relays = 0;
  int placement_wait_ms = 60000;
  /// Iterations this run applies before it ends: training.iterations, or --until's N.
  std::uint64_t end_iteration() const {
    auto planned = static_cast<std::uint64_t>(training.iterations);
    return until ? std::min(*until, planned) : planned;
  }
};

/// Where `host` keeps its checkpoints (model/checkpoint.hpp's root).
std::string checkpoint_root(const cluster_spec& spec, const std::string& host);

/// The checkpoints `host` can serve from node.data_dir (its own and the copies peers pushed),
/// by file name (each is verified when it is served), the newest 8 per stage: what its
/// heartbeats tell peers for a restore of a lost stage.
std::vector<wire::held_checkpoint> checkpoint_inventory(const cluster_spec& spec, const std::string& host);

} // namespace gwtf::actors
