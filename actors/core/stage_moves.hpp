// SWARM's rebalancing in the runtime (docs/runtime.md, "SWARM in the runtime"): when a data
// holder looks for a move, and whether a relay follows a STAGE_MOVE. The move itself
// (routing::swarm_rebalance) is routing's; pure: the compute actor asks these, and they are
// tested directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "messages/types.hpp"

namespace gwtf::actors {

/// A data holder's rebalancing: when it looks next, and the move it ordered last.
struct rebalance_state {
  std::int64_t next_ms = 0; ///< when it looks next (0: not armed yet)
  struct ordered_move {
    std::string peer;
    int to = 0;
    std::int64_t sent_ms = 0;
  };
  std::optional<ordered_move> move;
};

enum class rebalance_turn {
  not_due,        ///< the period has not passed (or was just armed: a period of measuring first)
  not_deciding,   ///< a live data holder with a lower name decides
  move_under_way, ///< its last mover does not serve its new stage yet
  look,           ///< look for a move now (the next look is a period away)
};

/// At the start of an iteration at `now_ms`: whether this holder looks for a move.
/// `period_ms`: routing.swarm.rebalance_ms; `lowest`: no live data holder has a lower name;
/// `mover_stage`: the stage the last mover serves as this holder sees it now (-1: not live
/// or downloading); a move is under way until it serves its new stage or `settle_ms` passed
/// since the order (it crashed, or refused).
rebalance_turn rebalance_due(rebalance_state& s, std::int64_t now_ms, std::int64_t period_ms, std::int64_t settle_ms,
                             bool lowest, int mover_stage);

/// What a relay knows when a STAGE_MOVE comes.
struct move_order_context {
  bool swarm = false;              ///< this cluster routes as SWARM
  bool from_live_holder = false;   ///< the sender is a live data holder
  int stage = 0;                   ///< this host's stage (0: a data holder)
  int stages = 0;                  ///< the model's stages
  bool ready = false;              ///< it holds weights
  bool draining = false;           ///< it leaves already
  std::size_t stage_mates = 0;     ///< the other live replicas of its stage
};

/// Why a relay refuses `m` from `from`, or nothing: it follows it.
std::optional<std::string> stage_move_refusal(const wire::stage_move& m, const std::string& from,
                                              const move_order_context& c);

} // namespace gwtf::actors
