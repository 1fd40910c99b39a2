// Restoring a whole lost relay stage in node mode, without an operator (docs/checkpoints.md):
// which data holder decides, from which consistent cut every host starts again, and which
// relay takes the lost stage, from what the hosts' heartbeats say (their stage and the
// checkpoints they keep). A pure core: no CAF, no clock, no files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// One live host as its last heartbeat described it (this host included).
struct restore_host {
  std::string name;
  bool data_holder = false;
  std::int32_t stage = -1; ///< -1: a relay without a stage yet (placing itself or downloading)
  std::vector<wire::held_checkpoint> checkpoints;
};

/// Whether `me` decides: it is a live data holder and no live data holder has a lower name.
bool decides_restore(const std::string& me, const std::vector<restore_host>& live);

/// The relay stages (1..stages-1) that no live host serves.
std::vector<std::uint32_t> lost_stages(int stages, const std::vector<restore_host>& live);

/// The newest iteration of which, for every stage, some live host keeps a checkpoint (its
/// own or a copy), or an error naming what is missing.
std::variant<std::uint64_t, std::string> newest_cut(int stages, const std::vector<restore_host>& live);

/// A cluster started with plain --resume in node mode agrees on where to resume: once `me`
/// decides (decides_restore), every data holder of `holders` is live and every relay stage
/// has a live host, the order to start again at newest_cut (a RESTORE of stage 0: no stage is
/// lost, no restorer). An error says what is missing.
std::variant<wire::restore, std::string> plan_resume(int stages, const std::vector<std::string>& holders,
                                                     const std::string& me, const std::vector<restore_host>& live);

/// Whether the live hosts include a quorum of the data holders of `roster`: more than half,
/// or exactly half with the roster's lowest name among them. Two sides of a partition never
/// both have one, so they never both restore (and then train apart).
bool holder_quorum(const std::vector<std::string>& roster, const std::vector<restore_host>& live);

/// The restore of `lost` (a relay stage no live host serves), decided by `me`, once the live
/// hosts hold a quorum of the data holders of `roster`:
/// - the cut: the newest iteration of which, for every stage, some live host keeps a
///   checkpoint (its own or a copy);
/// - the restorer: a live relay without a stage (first name), else a relay of the stage with
///   the most live hosts, at least two (ties: the lower stage, then the first name).
/// An error says why there is none (no quorum, no cut, no relay to spare, the stage is not lost).
std::variant<wire::restore, std::string> plan_restore(int stages, std::uint32_t lost, const std::string& me,
                                                      const std::vector<restore_host>& live,
                                                      const std::vector<std::string>& roster);

/// Whether this host (`me`, at `my_stage`; `awaiting_cut`: started with plain --resume and
/// waiting for the cluster's cut) follows a RESTORE a peer sent: an error says why not (a
/// stage out of range, this host serves the stage it calls lost, this host is the restorer
/// but not at the stage the order thinks, a resume order to a host that is not waiting for one).
std::optional<std::string> check_restore(const wire::restore& r, int stages, const std::string& me,
                                         std::int32_t my_stage, bool awaiting_cut);

} // namespace gwtf::actors
