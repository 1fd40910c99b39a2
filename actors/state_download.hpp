// A stage state arriving in STATE_CHUNKs (docs/runtime.md, "Joins, restarts and state
// download"), a pure core: which chunks belong to the transfer in progress, the blob they
// fill, and when it is complete. The blob's own content hash (model::stage::import_state)
// catches chunks that overlap or leave holes; the codec has checked each chunk's bounds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

class state_download {
public:
  /// Asks for a state: `transfer` names it in the chunks, `source` must send them all.
  void start(std::string source, std::uint64_t transfer);
  /// Forgets the transfer in progress (its late chunks are ignored).
  void cancel();

  bool active() const { return transfer_ != 0; }
  std::uint64_t transfer() const { return transfer_; }
  const std::string& source() const { return source_; }
  /// Bytes received so far (the watchdog's measure of progress).
  std::uint64_t received() const;

  enum class outcome { ignored, refused, partial, complete };
  /// A chunk from `from`. Ignored unless it belongs to the transfer in progress (its id, its
  /// source, `stage`); refused when it announces more than `limit` bytes. On `complete`,
  /// take() hands the blob over.
  outcome chunk(const std::string& from, const wire::state_chunk& c, std::uint32_t stage, std::uint64_t limit);
  std::vector<std::uint8_t> take();

private:
  std::string source_;
  std::uint64_t transfer_ = 0;
  std::vector<std::uint8_t> blob_;
  std::map<std::uint64_t, std::size_t> received_; // offset -> bytes
};

} // namespace gwtf::actors
