#include "actors/core/stage_moves.hpp"

namespace gwtf::actors {

rebalance_turn rebalance_due(rebalance_state& s, std::int64_t now_ms, std::int64_t period_ms, std::int64_t settle_ms,
                             bool lowest, int mover_stage) {
  if (period_ms <= 0)
    return rebalance_turn::not_due;
  if (s.next_ms == 0) // measured for a period first
    s.next_ms = now_ms + period_ms;
  if (now_ms < s.next_ms)
    return rebalance_turn::not_due;
  if (!lowest)
    return rebalance_turn::not_deciding;
  s.next_ms = now_ms + period_ms;
  if (s.move) {
    if (mover_stage != s.move->to && now_ms - s.move->sent_ms < settle_ms)
      return rebalance_turn::move_under_way;
    s.move.reset();
  }
  return rebalance_turn::look;
}

std::optional<std::string> stage_move_refusal(const wire::stage_move& m, const std::string& from,
                                              const move_order_context& c) {
  if (!c.swarm)
    return std::string{"this cluster routes with gwtf (routing.router), which moves no relay between stages"};
  if (!c.from_live_holder)
    return from + " is not a live data holder";
  if (c.stage < 1 || c.stage != static_cast<int>(m.from_stage))
    return "this host is at stage " + std::to_string(c.stage) + ", not " + std::to_string(m.from_stage);
  if (static_cast<int>(m.stage) >= c.stages || m.stage == 0)
    return "the model has no relay stage " + std::to_string(m.stage);
  if (c.draining)
    return std::string{"it is leaving already"};
  if (!c.ready)
    return std::string{"it has no weights yet"};
  if (c.stage_mates == 0)
    return "it is the last live replica of stage " + std::to_string(c.stage);
  return std::nullopt;
}

} // namespace gwtf::actors
