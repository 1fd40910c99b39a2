// Resuming a run from its checkpoints, and restoring a whole relay stage lost with
// checkpoints on (docs/checkpoints.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "actors/cluster_spec.hpp"
#include "app/config/cluster_config.hpp"
#include "app/run/embedded.hpp"

namespace gwtf::app {

/// Where a resumed run starts (docs/checkpoints.md): with `at`, that iteration if every stage
/// has a valid checkpoint of it at one of its declared hosts; else the consistent cut, the
/// newest iteration every stage has. Files are verified (hash, stage, config) on the way;
/// `notes` gets a line for each one rejected. An error says which stage lacks what.
std::variant<std::uint64_t, std::string> resume_point(const actors::cluster_spec& spec, std::optional<std::uint64_t> at,
                                                      std::vector<std::string>& notes);

/// --until N, and --resume / --resume-at N of the embedded cluster and launch: finds the resume point,
/// prints it (and every checkpoint passed over) to `out` and marks `spec` to resume there.
/// Empty on success, else why the run cannot resume.
std::string prepare_resume(actors::cluster_spec& spec, const run_bounds& request, std::ostream& out);

/// Starts the run of `cfg` resumed as `spec` says (round N of restores): its result, or
/// nothing when the run was interrupted meanwhile.
using rerun_fn = std::function<std::optional<embedded_result>(const cluster_config& cfg,
                                                              std::shared_ptr<const actors::cluster_spec> spec, int round)>;

/// A whole relay stage lost with checkpoints on (`result.lost_stage`): a relay of the stage
/// with the most replicas moves there, every host goes back to the newest iteration every
/// stage has a checkpoint of, and `rerun` trains on; again for every stage lost later
/// (docs/checkpoints.md, "Loss of a whole stage"). `current` ends as the last run's config.
embedded_result restore_lost_stages(embedded_result result, cluster_config& current,
                                    std::optional<std::uint64_t> until, std::ostream& out, const rerun_fn& rerun);

} // namespace gwtf::app
