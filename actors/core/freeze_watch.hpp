// Whether this process was frozen (SIGSTOP, a swapped-out or stalled machine) for longer than
// its peers wait before declaring it dead: a pure, thread-safe core with time passed in. A
// watchdog thread (app/run/node.cpp) stamps it every few milliseconds; every frame a host's
// actors send or open asks it first. After a SIGCONT every thread resumes at once, and an
// actor could act on what sat in its mailbox (a share, a norm) before any timer noticed the
// gap: it would speak for an incarnation its peers have already written off (an averaging
// over shares they dropped, a weights hash nobody else has). With the gate, the first thread
// to look after the gap sees it, whichever runs first, and the process stays silent until
// its supervisor restarts it as a new replica.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gwtf::actors {

/// Milliseconds of the steady clock (CLOCK_MONOTONIC: it runs on while the process is stopped).
inline std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

class freeze_watch {
public:
  /// `timeout_ms`: a gap between stamps longer than this is a freeze.
  freeze_watch(std::int64_t timeout_ms, std::int64_t now_ms);
  /// The watchdog's beat: notes a gap since the last stamp, then stamps `now_ms`.
  void stamp(std::int64_t now_ms);
  /// True once any gap longer than the timeout was seen, by a stamp or by this check (the
  /// watchdog may not have run yet after a resume). Once true, true for ever.
  bool frozen(std::int64_t now_ms);
  /// The process follows a restore of a lost stage and starts again in a moment: from now on
  /// its actors neither send nor open a frame (what they would say belongs to the iteration
  /// being rolled back). Once set, set for ever.
  void silence() { silenced_.store(true); }
  bool silenced() const { return silenced_.load(); }
  /// The longest gap seen so far (ms), for the log line.
  std::int64_t longest_gap_ms() const { return longest_gap_.load(); }

private:
  void note_gap(std::int64_t gap);

  std::int64_t timeout_ms_;
  std::atomic<std::int64_t> last_;
  std::atomic<std::int64_t> longest_gap_{0};
  std::atomic<bool> frozen_{false};
  std::atomic<bool> silenced_{false};
};

} // namespace gwtf::actors
