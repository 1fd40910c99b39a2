// The byte stream of a peer connection (actors/net/peer_framing): frames cut into fragments,
// control ahead of bulk, every header checked before anything is allocated.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "actors/net/peer_framing.hpp"

using namespace gwtf::actors;
namespace pf = gwtf::actors::peer_framing;

namespace {

constexpr std::int32_t membership = 0, stage = 3;

std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

// Everything `w` holds, as the stream a peer reads (a hello first).
std::vector<std::uint8_t> drain(frame_writer& w) {
  auto out = pf::hello_bytes();
  while (w.next(out)) {
  }
  return out;
}

// A header announcing a frame of `total` bytes, after a hello.
std::vector<std::uint8_t> announcing(std::uint32_t total) {
  auto out = pf::hello_bytes();
  pf::write_header(out, pf::bulk, pf::first, stage, 0, total);
  return out;
}

} // namespace

TEST_CASE("peer framing: frames cross whole, in any split, in order per lane, with service and introduction") {
  frame_writer w;
  auto big = bytes(3 * pf::fragment_bytes + 17, 1);
  w.push(stage, false, big);
  w.push(membership, true, bytes(10, 7));
  w.push(stage, false, {}); // an empty frame is a frame
  w.push(membership, false, bytes(pf::fragment_bytes, 9));
  CHECK(w.queued_frames() == 4);
  auto stream = drain(w);
  CHECK(w.empty());
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, stream.size()}) {
    CAPTURE(step);
    frame_reader r{1 << 20};
    std::vector<inbound_frame> got;
    for (std::size_t at = 0; at < stream.size(); at += step)
      REQUIRE(r.feed(stream.data() + at, std::min(step, stream.size() - at), got).empty());
    CHECK(r.greeted());
    REQUIRE(got.size() == 4);
    // Control first: both membership frames overtake the bulk frame queued before them.
    CHECK(got[0].service == membership);
    CHECK(got[0].introduction);
    CHECK(got[0].bytes == bytes(10, 7));
    CHECK(got[1].service == membership);
    CHECK_FALSE(got[1].introduction);
    CHECK(got[1].bytes.size() == pf::fragment_bytes);
    CHECK(got[2].service == stage);
    CHECK(got[2].bytes == big);
    CHECK(got[3].bytes.empty());
    CHECK(r.frames() == 4);
  }
}

TEST_CASE("peer framing: read straight into frames and written from gathered pieces, in any split, the stream is the same") {
  auto fill = [](frame_writer& w) {
    w.push(stage, false, bytes(2 * pf::fragment_bytes + 5, 1));
    w.push(membership, true, bytes(200, 0x5a));
    w.push(stage, false, {});
    w.push(membership, true, bytes(33, 4));
  };
  frame_writer copied;
  fill(copied);
  auto expected = drain(copied);
  for (std::size_t step : {std::size_t{1}, std::size_t{5}, std::size_t{16}, std::size_t{300}, std::size_t{70000}}) {
    CAPTURE(step);
    // The writer: whatever the socket takes (`step` bytes per call) of what it gathered.
    frame_writer w;
    fill(w);
    auto stream = pf::hello_bytes();
    iovec iov[8];
    while (auto n = w.gather(iov, 8, 1u << 20)) {
      std::size_t k = 0;
      for (std::size_t i = 0; i < n && k < step; ++i) {
        auto take = std::min(step - k, iov[i].iov_len);
        auto* p = static_cast<const std::uint8_t*>(iov[i].iov_base);
        stream.insert(stream.end(), p, p + take);
        k += take;
      }
      w.consumed(k);
    }
    CHECK(w.empty());
    CHECK(stream == expected);
    // The reader: at most `step` bytes per read, into its space and then the next header, as
    // the socket loop reads.
    frame_reader r{1 << 20};
    std::vector<inbound_frame> got;
    std::size_t at = 0;
    while (at < stream.size()) {
      auto [space, want] = r.space();
      REQUIRE(want > 0);
      bool payload = r.in_payload();
      auto k = std::min<std::size_t>({step, want, stream.size() - at});
      std::copy(stream.data() + at, stream.data() + at + k, space);
      at += k;
      REQUIRE(r.wrote(k, got).empty());
      if (payload && k == want && at < stream.size()) { // the second piece: a next header
        auto h = std::min<std::size_t>({16, step, stream.size() - at});
        REQUIRE(r.feed(stream.data() + at, h, got).empty());
        at += h;
      }
    }
    REQUIRE(got.size() == 4);
    CHECK(got[0].bytes == bytes(200, 0x5a));
    CHECK(got[0].introduction);
    CHECK(got[1].bytes == bytes(33, 4));
    CHECK(got[2].bytes == bytes(2 * pf::fragment_bytes + 5, 1));
    CHECK(got[3].bytes.empty());
  }
}

TEST_CASE("peer framing: a control frame queued behind a large share leaves after at most one bulk fragment") {
  frame_writer w;
  w.push(stage, false, bytes(100 * pf::fragment_bytes, 3)); // a 6.4 MB share
  std::vector<std::uint8_t> out;
  REQUIRE(w.next(out)); // the first bulk fragment is on its way
  w.push(membership, false, bytes(40, 5)); // a heartbeat
  out.clear();
  REQUIRE(w.next(out));
  CHECK(out[4] == pf::control);
  CHECK(pf::read32(out.data() + 8) == 40);
  CHECK(w.queued_bytes() == 99 * pf::fragment_bytes);
}

TEST_CASE("peer framing: a header announcing more than the limit is refused before any allocation, and stays refused") {
  std::vector<inbound_frame> got;
  frame_reader r{1000};
  frame_writer w;
  w.push(stage, false, bytes(1000, 0));
  auto ok = drain(w);
  REQUIRE(r.feed(ok.data(), ok.size(), got).empty());
  CHECK(got.size() == 1);
  std::vector<std::uint8_t> big;
  pf::write_header(big, pf::bulk, pf::first, stage, 0, 1001);
  CHECK(r.feed(big.data(), big.size(), got) == "a frame announcing 1001 bytes (limit 1000, node.max_message_bytes)");
  std::uint8_t more = 0;
  CHECK_FALSE(r.feed(&more, 1, got).empty());
  // 4 GiB announced on a 64 MiB host; a partial header decides nothing yet.
  auto huge = announcing(0xfffffff0u);
  frame_reader partial{64u << 20};
  CHECK(partial.feed(huge.data(), huge.size() - 1, got).empty());
  CHECK(partial.feed(huge.data() + huge.size() - 1, 1, got).find("a frame announcing 4294967280 bytes") == 0);
}

TEST_CASE("peer framing: bytes that are not ours, no hello, and broken fragment sequences are refused with their reason") {
  std::vector<inbound_frame> got;
  auto refused = [&](std::vector<std::uint8_t> stream) {
    frame_reader r{1 << 20};
    return r.feed(stream.data(), stream.size(), got);
  };
  std::string http = "GET / HTTP/1.0\r\n\r\n";
  CHECK(refused({http.begin(), http.end()}) == "not a caf-gwtf peer (a fragment starting 47 45 54 20, expected \"GWTF\")");
  std::vector<std::uint8_t> no_hello;
  pf::write_header(no_hello, pf::control, pf::first | pf::last, membership, 0, 0);
  CHECK(refused(no_hello) == "the stream did not start with a hello");
  auto versioned = pf::hello_bytes();
  versioned[7] = 9;
  CHECK(refused(versioned) == "peer speaks framing version 9, this host 1");
  auto two = pf::hello_bytes();
  pf::write_header(two, pf::control, pf::first, membership, 0, 10);
  pf::write_header(two, pf::control, pf::first, membership, 0, 10);
  CHECK(refused(two) == "a new frame on lane 0 before the last one ended");
  auto orphan = pf::hello_bytes();
  pf::write_header(orphan, pf::bulk, pf::last, stage, 0, 10);
  CHECK(refused(orphan) == "a continuation on lane 1 without a first fragment");
  auto beyond = pf::hello_bytes();
  pf::write_header(beyond, pf::bulk, pf::first, stage, 20, 10);
  CHECK(refused(beyond) == "fragments beyond their frame's announced 10 bytes");
  auto short_end = pf::hello_bytes();
  pf::write_header(short_end, pf::bulk, pf::first | pf::last, stage, 4, 10);
  short_end.insert(short_end.end(), 4, 0);
  CHECK(refused(short_end) == "a frame ended after 4 of its announced 10 bytes");
  auto lane = pf::hello_bytes();
  pf::write_header(lane, 7, pf::first, stage, 0, 10);
  CHECK(refused(lane) == "a fragment on lane 7");
  CHECK(got.empty());
}

TEST_CASE("peer framing: a frame's memory grows with the bytes that arrive, never from what its header announced") {
  std::vector<inbound_frame> got;
  frame_reader r{64u << 20};
  // A header announcing 60 MB, then fragments of it: the reader holds at most 256 KiB or 4
  // times what came, not 60 MB.
  auto stream = pf::hello_bytes();
  constexpr std::uint32_t total = 60'000'000;
  REQUIRE(r.feed(stream.data(), stream.size(), got).empty());
  std::vector<std::uint8_t> head;
  pf::write_header(head, pf::bulk, pf::first, stage, pf::fragment_bytes, total);
  REQUIRE(r.feed(head.data(), head.size(), got).empty());
  CHECK(r.buffered() == 0); // announced, nothing came: nothing held
  std::vector<std::uint8_t> payload(pf::fragment_bytes, 7);
  REQUIRE(r.feed(payload.data(), payload.size(), got).empty());
  CHECK(r.buffered() == pf::first_room);
  for (int i = 0; i < 4; ++i) {
    head.clear();
    pf::write_header(head, pf::bulk, 0, stage, pf::fragment_bytes, total);
    REQUIRE(r.feed(head.data(), head.size(), got).empty());
    REQUIRE(r.feed(payload.data(), payload.size(), got).empty());
  }
  CHECK(r.buffered() == 4 * pf::first_room); // 5 fragments came: 320 KiB
  CHECK(r.buffered() <= 4 * 5 * pf::fragment_bytes);
  CHECK(got.empty());
  // A frame that completes gives its memory to the receiver: nothing stays held.
  frame_reader whole{1 << 20};
  frame_writer w;
  w.push(stage, false, bytes(9 * pf::fragment_bytes + 3, 2));
  auto s = drain(w);
  REQUIRE(whole.feed(s.data(), s.size(), got).empty());
  REQUIRE(got.size() == 1);
  CHECK(got[0].bytes == bytes(9 * pf::fragment_bytes + 3, 2));
  CHECK(got[0].bytes.capacity() == got[0].bytes.size()); // capped at the announced size
  CHECK(whole.buffered() == 0);
  // One fragment may not carry more than the writer cuts: a 60 MB "fragment" is refused at
  // its header.
  frame_reader one{64u << 20};
  auto big = pf::hello_bytes();
  pf::write_header(big, pf::bulk, pf::first, stage, total, total);
  CHECK(one.feed(big.data(), big.size(), got) == "a fragment of 60000000 bytes (at most 65536)");
  CHECK(one.buffered() == 0);
}
