#include "actors/core/early_calls.hpp"

namespace gwtf::actors {

early_admission admit_early(bool ready, std::uint64_t current, std::uint64_t iteration, std::size_t queued,
                            std::size_t limit) {
  if (ready && iteration > current + 1)
    return early_admission::too_far;
  if (queued >= limit)
    return early_admission::full;
  return early_admission::queue;
}

std::size_t early_queue_limit(std::size_t microbatches_per_holder, std::size_t holders) {
  return 4 * microbatches_per_holder * holders;
}

} // namespace gwtf::actors
