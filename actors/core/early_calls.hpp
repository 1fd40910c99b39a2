// What a relay does with a forward (GWTF hop, or SWARM call) that comes before it can compute
// it: before its weights (a start, a download, a resume), or for the next iteration while it
// still steps the current one. Such forwards wait in a queue until then; this rule bounds the
// queue, so that no peer can grow it. Pure: the compute actor asks it (compute_relay,
// compute_swarm), and it is tested directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gwtf::actors {

enum class early_admission {
  queue,   ///< waits for the weights or the step
  too_far, ///< an iteration no data holder can have started yet (a relay with weights is at
           ///< most one behind every holder: a holder starts i + 1 once every stage averaged i)
  full,    ///< the queue already holds `limit` forwards
};

/// A forward of `iteration` at a relay at iteration `current` (`ready`: it has its weights;
/// before them its iteration is not known yet) whose queue holds `queued`; `limit`: the most
/// it queues (early_queue_limit).
early_admission admit_early(bool ready, std::uint64_t current, std::uint64_t iteration, std::size_t queued,
                            std::size_t limit);

/// The queue's bound: four iterations' microbatches of every data holder, re-sends included.
std::size_t early_queue_limit(std::size_t microbatches_per_holder, std::size_t holders);

} // namespace gwtf::actors
