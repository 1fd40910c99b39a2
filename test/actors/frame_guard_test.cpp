// The BASP frame-size check in front of CAF's middleman (actors/frame_guard).
#include <doctest/doctest.h>

#include <vector>

#include "actors/net/frame_guard.hpp"

using gwtf::actors::frame_guard;

namespace {

// A BASP header announcing `len` payload bytes (length in network order at offset 4).
std::vector<std::uint8_t> header(std::uint32_t len, std::uint8_t op = 2) {
  std::vector<std::uint8_t> h(frame_guard::header_bytes, 0);
  h[0] = op;
  h[4] = static_cast<std::uint8_t>(len >> 24);
  h[5] = static_cast<std::uint8_t>(len >> 16);
  h[6] = static_cast<std::uint8_t>(len >> 8);
  h[7] = static_cast<std::uint8_t>(len);
  return h;
}

} // namespace

TEST_CASE("frame guard: frames within the limit pass, in any split, and are counted") {
  frame_guard g{1000};
  std::vector<std::uint8_t> stream;
  for (std::uint32_t len : {0u, 10u, 1000u, 7u}) {
    auto h = header(len);
    stream.insert(stream.end(), h.begin(), h.end());
    stream.insert(stream.end(), len, 0xab);
  }
  // Byte by byte, then all at once: the same verdict.
  for (auto& b : stream)
    REQUIRE(g.feed(&b, 1).empty());
  CHECK(g.frames() == 4);
  frame_guard whole{1000};
  CHECK(whole.feed(stream.data(), stream.size()).empty());
  CHECK(whole.frames() == 4);
}

TEST_CASE("frame guard: a header announcing more than the limit is refused, and stays refused") {
  frame_guard g{1000};
  auto ok = header(5);
  ok.insert(ok.end(), 5, 0);
  CHECK(g.feed(ok.data(), ok.size()).empty());
  auto big = header(1001);
  auto why = g.feed(big.data(), big.size());
  CHECK(why == "a frame announcing 1001 bytes (limit 1000, node.max_message_bytes plus framing)");
  std::uint8_t more = 0;
  CHECK_FALSE(g.feed(&more, 1).empty());
  // The attack that made CAF allocate 4 GiB: 32 bytes announcing 0xfffffff0.
  frame_guard fresh{64u << 20};
  auto huge = header(0xfffffff0u, 1);
  CHECK_FALSE(fresh.feed(huge.data(), huge.size()).empty());
  // A partial header decides nothing yet.
  frame_guard partial{10};
  CHECK(partial.feed(huge.data(), 31).empty());
  CHECK_FALSE(partial.feed(huge.data() + 31, 1).empty());
}
