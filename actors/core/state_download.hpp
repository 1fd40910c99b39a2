// A stage state arriving in STATE_CHUNKs (docs/runtime.md, "Joins, restarts and state
// download"), a pure core: which chunks belong to the transfer in progress, the blob they
// fill, and when it is complete. The blob's own content hash (model::stage::import_state)
// catches chunks that overlap or leave holes; the codec has checked each chunk's bounds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// Where a stage state can come from: a live replica's state, or a checkpoint some host keeps.
struct state_source {
  std::string host;
  bool checkpoint = false; ///< its kept checkpoint of the iteration being resumed
  bool operator==(const state_source& o) const { return host == o.host && checkpoint == o.checkpoint; }
};

/// The source to ask after `last` (none yet: empty host): the live replicas of the stage in
/// name order, then, with `copies`, every other host for its kept checkpoint. `wrapped`: the
/// round came back to the first source (everybody was asked once: the caller waits before
/// asking again, so that hosts answering "none" at once do not make a busy loop).
struct next_source {
  state_source source;
  bool wrapped = false;
};
std::optional<next_source> choose_state_source(const std::vector<std::string>& replicas,
                                               const std::vector<std::string>& others, bool copies,
                                               const state_source& last);

class state_download {
public:
  /// Asks for a state: `transfer` names it in the chunks, `source` must send them all;
  /// `checkpoint`: the source's kept checkpoint, not its live state.
  void start(std::string source, std::uint64_t transfer, bool checkpoint = false);
  /// Forgets the transfer in progress (its late chunks are ignored).
  void cancel();

  bool active() const { return transfer_ != 0; }
  std::uint64_t transfer() const { return transfer_; }
  const std::string& source() const { return source_; }
  /// Whether the transfer in progress (or the last one) asked for a kept checkpoint.
  bool checkpoint() const { return checkpoint_; }
  /// Bytes received so far (the watchdog's measure of progress).
  std::uint64_t received() const;

  enum class outcome { ignored, refused, partial, complete, declined };
  /// A chunk from `from`. Ignored unless it belongs to the transfer in progress (its id, its
  /// source, `stage`); refused when it announces more than `limit` bytes; `declined` (the
  /// transfer ends) when it is empty and announces 0 bytes: the source has no such state. On
  /// `complete`, take() hands the blob over.
  outcome chunk(const std::string& from, const wire::state_chunk& c, std::uint32_t stage, std::uint64_t limit);
  std::vector<std::uint8_t> take();

private:
  std::string source_;
  std::uint64_t transfer_ = 0;
  bool checkpoint_ = false;
  std::vector<std::uint8_t> blob_;
  std::map<std::uint64_t, std::size_t> received_; // offset -> bytes
};

} // namespace gwtf::actors
