// A replica's gradient share on the wire (docs/runtime.md, "Shares in chunks"), a pure core:
// the sender cuts it into GRADIENT_CHUNKs of bounded size, so that no frame is bounded by the
// model (node.max_message_bytes bounds a frame, node.chunk_bytes a chunk), and the receiver
// puts each peer's chunks back together with bounded memory: a share must have exactly as
// many values as the receiver's own stage, its chunks may come in any order but each holds at
// least `min_values` values (the last excepted), a chunk that overlaps what came or belongs to
// another share (a repaired one) begins the share again, and a peer has at most `max_pending`
// shares under way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "actors/core/butterfly.hpp"
#include "messages/types.hpp"

namespace gwtf::actors {

/// `whole` (one share: offset 0, all of its values; or one butterfly part: its offset, its
/// values) as chunks of at most `max_elements` values each, in order, sharing `whole`'s
/// bytes (no copy). The first chunk carries the
/// holders' reports; every chunk carries the iteration, stage, contributors, microbatches,
/// their count per holder and the total. An empty share (no values) is one chunk.
std::vector<wire::gradient_chunk> cut_share(const wire::gradient_chunk& whole, std::size_t max_elements);

/// What a replica at iteration `current` does with a stage-mate's gradient chunk of
/// `iteration` (`averaged`: it averaged that iteration already).
enum class share_admission {
  take,    ///< the iteration in progress, or the next (a stage-mate is at most one ahead)
  stale,   ///< an earlier iteration, or one averaged already: of no use
  too_far, ///< further ahead than any stage-mate can be: kept nowhere, so that no peer can
           ///< make a replica hold whole shares of many iterations
};
share_admission admit_share(std::uint64_t iteration, std::uint64_t current, bool averaged);
/// The same with an open window [oldest, current]: training.averaging overlap keeps the
/// iteration before `current` open (averaged while `current` computes).
share_admission admit_share(std::uint64_t iteration, std::uint64_t oldest, std::uint64_t current, bool averaged);

class share_assembler {
public:
  /// `stage_elements`: the values of this stage's share (its parameter count); `min_values`:
  /// the fewest values a chunk other than a share's last may hold (node.chunk_bytes' floor of
  /// 1024 bytes: 256), which bounds the bookkeeping of a share to stage_elements / min_values.
  /// `exact`: shares are exact int64 sums (training.reproducible_sums: exact), put together
  /// as int64 and no float chunk accepted; else float32, bfloat16 or int8 chunks, decoded to
  /// float32, and no int64 chunk accepted.
  explicit share_assembler(std::uint64_t stage_elements, std::size_t max_pending = 2, std::uint64_t min_values = 256,
                           bool exact = false);

  /// What a chunk did.
  struct outcome {
    std::optional<wire::gradient_chunk> whole; ///< complete: the whole share (offset 0) or part (its span), all values
    std::string error;                         ///< the chunk was refused: why (the rest is unchanged)
  };
  /// Takes one chunk of `from`'s whole share. What comes out holds float32 values (int64 when
  /// exact).
  outcome add(const std::string& from, wire::gradient_chunk&& chunk);
  /// Takes one chunk of `from`'s share, part or reduced part (actors/core/butterfly.hpp) that
  /// covers `span` of the stage's values: put together, it is `whole` with offset
  /// span.begin and span.size() values. A peer's whole shares, parts and reduced parts are
  /// put together apart, each kind with at most `max_pending` under way.
  outcome add(const std::string& from, wire::gradient_chunk&& chunk, share_span span);

  /// Drops the shares under way of iterations before `iteration` (applied).
  void forget_before(std::uint64_t iteration);
  /// Drops `from`'s shares under way (it is gone).
  void forget(const std::string& from);

  /// Bytes held by shares under way.
  std::size_t pending_bytes() const;
  std::size_t pending() const { return parts_.size(); }

private:
  /// 0: a whole share, 1: a part of one for its owner, 2: a reduced part.
  static int kind_of(const wire::gradient_chunk& c);
  std::size_t value_bytes() const;
  void put(const wire::gradient_chunk& c, std::uint64_t n, std::uint8_t* out) const;

  struct part {
    wire::gradient_chunk head;                ///< the first chunk, its values dropped
    share_span span;                          ///< what it covers
    std::shared_ptr<std::uint8_t> buffer;     ///< span.size() values, float32 (exact: int64)
    std::uint64_t received = 0;               ///< values so far
    std::map<std::uint64_t, std::uint64_t> ranges; ///< what came: [offset, end) by offset
  };
  std::uint64_t stage_elements_;
  std::size_t max_pending_;
  std::uint64_t min_values_;
  bool exact_ = false;
  std::map<std::tuple<std::string, std::uint64_t, int>, part> parts_; ///< (peer, iteration, kind) -> under way
};

} // namespace gwtf::actors
