#include "actors/core/freeze_watch.hpp"

namespace gwtf::actors {

freeze_watch::freeze_watch(std::int64_t timeout_ms, std::int64_t now_ms) : timeout_ms_(timeout_ms), last_(now_ms) {}

void freeze_watch::note_gap(std::int64_t gap) {
  auto seen = longest_gap_.load();
  while (gap > seen && !longest_gap_.compare_exchange_weak(seen, gap)) {
  }
  if (gap > timeout_ms_)
    frozen_.store(true);
}

void freeze_watch::stamp(std::int64_t now_ms) {
  // The flag is set before the new stamp is visible: a checker that reads the new stamp
  // (no gap) then reads the flag and sees it.
  note_gap(now_ms - last_.load());
  last_.store(now_ms);
}

bool freeze_watch::frozen(std::int64_t now_ms) {
  auto gap = now_ms - last_.load();
  if (gap > timeout_ms_)
    note_gap(gap);
  return frozen_.load();
}

} // namespace gwtf::actors
