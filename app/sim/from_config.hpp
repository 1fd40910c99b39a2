// `caf-gwtf sim --from-config FILE`: the simulator's scenario for a cluster config, so that
// what the simulator predicts can be checked against what the trainer measures on the same
// cluster (`caf-gwtf compare`; docs/results.md, "The simulator against the trainer").
// Pure (no CAF, no LibTorch): the compute times come in, measured by model/stage_timing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "app/config/cluster_config.hpp"
#include "app/sim/scenario.hpp"

namespace gwtf::app {

/// One microbatch's forward + backward on this machine at compute_scale 1.
struct measured_compute {
  double holder_s = 0; ///< a data holder's stage 0
  double relay_s = 0;  ///< a relay stage
};

/// The scenario that simulates `cfg` (loaded from `file`), or every reason it cannot be
/// simulated (file: key: message). The same cluster, host for host:
/// - each of `hosts` is one simulated host of the same name, region, stage (stage-less
///   relays placed by placement.policy), capacity and network card, computing a microbatch
///   in `compute` x its compute_scale; a host that a `join` of faults.script brings online
///   joins the simulation then;
/// - the network is emulation.network's matrix with emulation.time_scale applied (delays x
///   the scale, bandwidths / it); activations as compression.mode puts them on the wire,
///   shares as training.share_compression;
/// - the faults are the trainer's: faults.script's crashes, leaves and joins at their
///   iterations (a phase maps to a point in the iteration), a slow_link as a degrade of the
///   links between the two hosts' regions (both ways: the simulator's unit), and faults.crash_rate's random
///   crashes drawn as the trainer's driver draws them (app/run/random_crashes.hpp), so both
///   lose the same hosts; peers learn of a crash after faults.connection_timeout_ms;
/// - training.iterations, microbatches_per_holder, microbatch_size, averaging, and the
///   routing section's constants; `seed` overrides training.seed.
/// The simulator then runs every router on it, whatever routing.router says.
scenario_result scenario_from_config(const cluster_config& cfg, const std::string& file,
                                     const measured_compute& compute, std::optional<std::uint64_t> seed = {});

} // namespace gwtf::app
