// What a host sends again to a peer it has just met (a joiner, a restarted host, a replica
// that came up after this host had already sent its part), a pure core: the messages of the
// iteration in progress, and of the one just applied, that the peer may still wait for
// because this host sent them before it knew the peer (docs/runtime.md, "Catch-up"). The
// stage actor sends what this returns, in order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// What this host holds, as the stage actor's state has it (pointers: nothing is copied but
/// what goes out).
struct catch_up_state {
  std::uint64_t current = 0;                               ///< the iteration in progress
  bool same_stage = false;                                 ///< the peer is a replica of this host's stage
  const wire::iteration_done* last_done = nullptr;         ///< a holder's report (of `current` if it is)
  const std::map<std::uint64_t, wire::norm_share>* norms = nullptr; ///< this stage's norms, by iteration
  const wire::gradient_chunk* last_share = nullptr;        ///< this host's share of the iteration it applied last
  const wire::gradient_chunk* current_share = nullptr;     ///< this host's share of `current`, if it has one
  const wire::replica_hash* last_hash = nullptr;           ///< its weights hash after that step
};

/// The messages for a peer just met: the holder's report of the iteration in progress; this
/// stage's norms of the iteration in progress and of the one just applied (the peer may still
/// be in that one); to a replica of this stage also this host's share of the iteration just
/// applied (it may have shared and stepped before it knew the peer, which then waits for that
/// share), its share of the iteration in progress, and its last weights hash (which tells a
/// fresh replica where the stage is).
std::vector<wire::message> catch_up_messages(const catch_up_state& s);

} // namespace gwtf::actors
