// The exactly-once check of a run, outside the mechanism it checks: for one stage and
// iteration, the microbatch keys that the replicas whose gradients were averaged report
// having counted must together be exactly the microbatches the data holders finished, each
// once. Pure (no CAF): the launch and embedded drivers call it, and it is tested directly.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gwtf::deploy {

/// Microbatch keys each replica reported for one stage and iteration.
using share_reports = std::map<std::string, std::vector<std::uint64_t>>;

/// What one stage and iteration got wrong; nullopt when every finished microbatch was counted
/// exactly once. `holders`: the roster (holder index order); `finished`: microbatches each
/// holder reported finished in the iteration (holders without a report are skipped);
/// `contributors`: the replicas whose shares were averaged.
std::optional<std::string> exactly_once_violation(std::uint32_t stage, std::uint64_t iteration,
                                                  const std::vector<std::string>& holders,
                                                  const std::map<std::string, std::uint32_t>& finished,
                                                  const std::vector<std::string>& contributors,
                                                  const share_reports& reports);

} // namespace gwtf::deploy
