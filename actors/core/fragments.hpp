// Messages above the frame limit (docs/runtime.md, "Messages in pieces"), a pure core: the
// sender cuts an encoded message that does not fit one frame (node.max_message_bytes) into
// FRAGMENTs of node.chunk_bytes, sent one after the other; the receiver puts each peer's
// pieces back together in bounded memory, in any order (the emulated links' timers can swap
// two close pieces), and decodes the whole. So no frame is bounded by the model: an
// activation, its gradient or a SWARM call of any size crosses, and what a peer can make a
// host hold is bounded by the largest message this cluster's model makes (`max_message`),
// the messages under way per peer, a total for all peers, and pieces of at least `min_piece`
// bytes (the last of a message excepted), which bound the bookkeeping of a message.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// `bytes` (an encoded message) as pieces of at most `piece` bytes (>= 1) each, in order,
/// numbered `id`.
std::vector<wire::fragment> cut_message(const std::vector<std::uint8_t>& bytes, std::uint64_t id, std::size_t piece);

/// The bound of a whole message put together from pieces, for a model whose largest
/// activation (or activation gradient) is `activation_values` float32 values: a SWARM backward
/// call carries two of them (the output gradient and the stage input), a sparse one
/// (compression.mode adaptive) at most 6 bytes a value; plus 1 MiB for the rest of the
/// message (path, names). At least `frame_limit`.
std::uint64_t largest_message_bytes(std::uint64_t activation_values, std::uint64_t frame_limit);

struct fragment_limits {
  std::uint64_t max_message = 0; ///< a whole message's bytes
  std::size_t per_peer = 4;      ///< messages under way per peer; a new one drops the peer's oldest
  std::uint64_t max_bytes = 0;   ///< announced bytes of all messages under way; above it the oldest go
  std::uint64_t min_piece = 1024; ///< the fewest bytes of a piece that does not end its message
};

class fragment_assembler {
public:
  explicit fragment_assembler(fragment_limits limits);

  /// What a piece did.
  struct outcome {
    std::optional<std::vector<std::uint8_t>> whole; ///< its message's last piece: the message's bytes
    std::string error; ///< refused: why (the message it belonged to is dropped)
  };
  /// Takes one piece from `from`, in any order: it must have its message's total and may not
  /// overlap what came of it.
  outcome add(const std::string& from, wire::fragment&& piece);

  /// Drops what `from` sent (it is gone).
  void forget(const std::string& from);

  /// Announced bytes of the messages under way (what they hold once complete).
  std::uint64_t held_bytes() const { return held_; }
  std::size_t pending() const { return order_.size(); }
  const fragment_limits& limits() const { return limits_; }

private:
  struct partial {
    std::vector<std::uint8_t> bytes;               ///< the whole message's room
    std::uint64_t received = 0;                    ///< bytes so far
    std::map<std::uint64_t, std::uint64_t> ranges; ///< what came: [offset, end) by offset, adjacent ones merged
  };
  using key = std::pair<std::string, std::uint64_t>; ///< (peer, id)
  void drop(const key& k);

  fragment_limits limits_;
  std::map<key, partial> partials_;
  std::list<key> order_; ///< oldest first
  std::uint64_t held_ = 0;
};

} // namespace gwtf::actors
