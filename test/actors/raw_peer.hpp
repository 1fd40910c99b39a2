// The far end of a connection as a test drives it by hand: whole frames read off a raw socket.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <unistd.h>

#include "actors/net/peer_framing.hpp"

namespace gwtf::test {

/// Reads from `fd` until `count` whole frames (each at most `max_frame` bytes) came; fails the
/// test on end of stream, a read error or a framing error.
inline std::vector<actors::inbound_frame> read_frames(int fd, std::uint64_t max_frame, std::size_t count) {
  actors::frame_reader reader{max_frame};
  std::vector<actors::inbound_frame> got;
  std::vector<std::uint8_t> buf(1u << 20);
  while (got.size() < count) {
    auto n = ::read(fd, buf.data(), buf.size());
    REQUIRE(n > 0);
    REQUIRE(reader.feed(buf.data(), static_cast<std::size_t>(n), got).empty());
  }
  return got;
}

} // namespace gwtf::test
