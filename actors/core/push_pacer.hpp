// The pace of checkpoint copies pushed to hosts of other stages (training.checkpoint_push_mb_s,
// docs/checkpoints.md): a queue of pushes that hands out one chunk at a time, round robin over
// the pushes, and says how long to wait before the next one. A newer checkpoint of a stage
// replaces a push of an older one to the same peer that has not finished (the peer keeps the
// newest; the rest of the old one would be bytes for nothing). Pure: no CAF, no clock.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gwtf::actors {

class push_pacer {
public:
  /// `chunk`: bytes per piece (> 0); `bytes_per_s`: the pace of each push (> 0).
  push_pacer(std::size_t chunk, double bytes_per_s);

  /// Queues `blob` (the state of `stage` at `iteration`) for `to` as transfer `transfer`.
  void add(std::string to, std::uint64_t transfer, std::uint32_t stage, std::uint64_t iteration,
           std::shared_ptr<const std::vector<std::uint8_t>> blob);

  /// One piece to send now.
  struct piece {
    std::string to;
    std::uint64_t transfer = 0;
    std::uint32_t stage = 0;
    std::uint64_t offset = 0;
    std::uint64_t total = 0;
    std::vector<std::uint8_t> data;
  };
  /// The next piece, round robin over the queued pushes; nothing when none is left.
  std::optional<piece> next();

  /// How long to wait (microseconds) after a piece of `bytes` (from next()) before the next
  /// one: every push keeps its own pace, so with n pushes still under way the pieces leave n
  /// times as often.
  std::int64_t gap_us(std::size_t bytes) const;

  bool empty() const { return pushes_.empty(); }
  std::size_t pushes() const { return pushes_.size(); }

private:
  struct push {
    std::string to;
    std::uint64_t transfer = 0;
    std::uint32_t stage = 0;
    std::uint64_t iteration = 0;
    std::shared_ptr<const std::vector<std::uint8_t>> blob;
    std::uint64_t offset = 0;
  };
  std::size_t chunk_;
  double bytes_per_s_;
  std::deque<push> pushes_;
};

} // namespace gwtf::actors
