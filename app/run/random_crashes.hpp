// faults.crash_rate's draw: which host a random crash strikes in which iteration, and in which
// phase. One rule for the trainer's drivers (app/run/driver.cpp strikes the host) and for
// `caf-gwtf sim --from-config` (app/sim/from_config.cpp puts the same crashes in the
// simulator's script), so that both lose the same hosts. Pure (no CAF).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "actors/node_config.hpp"

namespace gwtf::app {

/// Whether `faults.crash_rate` = `rate` strikes host `name` in iteration `iteration` of a run
/// seeded `seed` (training.seed), and in which phase: its next forward or its next backward.
/// Whether the host may be struck at all (a data holder never is; a stage keeps one live
/// relay; a host is struck once) is the caller's rule.
std::optional<actors::fault_phase> random_crash_draw(std::uint64_t seed, std::uint64_t iteration,
                                                     const std::string& name, double rate);

} // namespace gwtf::app
