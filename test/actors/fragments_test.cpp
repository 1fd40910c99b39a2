// Messages above the frame limit (actors/core/fragments.hpp): cut on one side, put together on
// the other in bounded memory; a bad piece is refused with a reason and drops only its message.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "actors/core/fragments.hpp"
#include "messages/codec.hpp"
#include "doctest/doctest.h"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

std::vector<std::uint8_t> bytes_of(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng{seed};
  std::vector<std::uint8_t> out(n);
  for (auto& b : out)
    b = static_cast<std::uint8_t>(rng());
  return out;
}

fragment_limits roomy() { return fragment_limits{1 << 20, 4, 4 << 20}; }

} // namespace

TEST_CASE("fragments: an activation above the frame limit is cut, put together bit-exactly and decodes") {
  wire::activation a;
  a.microbatch = wire::microbatch_ref{3, 1, 2};
  a.path = {"dh-a", "r1"};
  std::vector<float> values(40'000);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.25f - 7.0f;
  a.tensor = wire::tensor_payload::copy_of(wire::dtype::float32, {4, 100, 100}, values.data(), values.size() * 4);
  auto bytes = wire::encode(wire::message{a});
  REQUIRE(bytes.size() > 160'000);
  auto pieces = cut_message(bytes, 9, 64 << 10);
  REQUIRE(pieces.size() == (bytes.size() + (64 << 10) - 1) / (64 << 10));
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    CHECK(pieces[k].id == 9);
    CHECK(pieces[k].offset == k * (64 << 10));
    CHECK(pieces[k].total_bytes == bytes.size());
    CHECK(pieces[k].data.size() <= (64u << 10));
  }
  fragment_assembler in{roomy()};
  std::optional<std::vector<std::uint8_t>> whole;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    // Each piece travels as a message of its own, through the codec.
    auto frame = wire::encode(wire::message{pieces[k]});
    auto decoded = wire::decode(frame.data(), frame.size(), {});
    REQUIRE(std::holds_alternative<wire::message>(decoded));
    auto out = in.add("r0", std::move(std::get<wire::fragment>(std::get<wire::message>(decoded))));
    CHECK(out.error.empty());
    CHECK(out.whole.has_value() == (k + 1 == pieces.size()));
    if (out.whole)
      whole = std::move(out.whole);
  }
  REQUIRE(whole.has_value());
  CHECK(*whole == bytes);
  CHECK(in.pending() == 0);
  CHECK(in.held_bytes() == 0);
  auto back = wire::decode(whole->data(), whole->size(), {});
  REQUIRE(std::holds_alternative<wire::message>(back));
  CHECK(std::get<wire::message>(back) == wire::message{a});
}

TEST_CASE("fragments: peers' messages come together apart and in any order, and a message in one piece is whole at once") {
  auto a = bytes_of(5000, 1), b = bytes_of(7000, 2);
  auto pa = cut_message(a, 1, 1024), pb = cut_message(b, 1, 1024); // the same id from two peers
  std::mt19937 rng{11}; // seed 11: any order of the pieces must do
  std::shuffle(pb.begin(), pb.end(), rng);
  fragment_assembler in{roomy()};
  std::optional<std::vector<std::uint8_t>> got_a, got_b;
  for (std::size_t k = 0; k < std::max(pa.size(), pb.size()); ++k) { // interleaved
    if (k < pa.size())
      if (auto o = in.add("ra", std::move(pa[k])); o.whole)
        got_a = std::move(o.whole);
    if (k < pb.size()) {
      auto o = in.add("rb", std::move(pb[k]));
      CHECK(o.error.empty());
      CHECK(o.whole.has_value() == (k + 1 == pb.size()));
      if (o.whole)
        got_b = std::move(o.whole);
    }
  }
  CHECK(got_a == a);
  CHECK(got_b == b);
  auto one = in.add("ra", wire::fragment{2, 0, 3, {1, 2, 3}});
  REQUIRE(one.whole.has_value());
  CHECK(*one.whole == std::vector<std::uint8_t>{1, 2, 3});
  CHECK(in.pending() == 0);
  CHECK(in.held_bytes() == 0);
}

TEST_CASE("fragments: an overlap, a changed total, a tiny piece or one above the model's largest is refused, and only its message goes") {
  auto m = bytes_of(4096, 3);
  fragment_assembler in{roomy()};
  auto other = cut_message(bytes_of(3072, 4), 5, 1024);
  CHECK(in.add("r1", std::move(other[0])).error.empty()); // another message of the same peer, under way

  auto p = cut_message(m, 7, 1024);
  CHECK(in.add("r1", wire::fragment{p[2]}).error.empty()); // out of order is fine
  CHECK(in.add("r1", wire::fragment{p[0]}).error.empty());
  auto again = in.add("r1", wire::fragment{p[2]});
  CHECK(again.error == "message 7 in pieces: a piece of [2048, +1024) of 4096 bytes overlaps what came");
  CHECK(in.pending() == 1); // message 7 dropped, message 5 kept

  CHECK(in.add("r1", wire::fragment{p[1]}).error.empty()); // begins message 7 again
  auto changed = p[3];
  changed.total_bytes = 5000;
  CHECK(in.add("r1", std::move(changed)).error
        == "message 7 in pieces: a piece of [3072, +1024) of 5000 bytes, a message of 4096 bytes");

  auto tiny = in.add("r1", wire::fragment{8, 100, 4096, std::vector<std::uint8_t>(100, 1)});
  CHECK(tiny.error == "message 8 in pieces: a piece of [100, +100) of 4096 bytes, smaller than 1024 bytes and not its message's last");
  CHECK(in.add("r1", wire::fragment{9, 4000, 4096, std::vector<std::uint8_t>(96, 1)}).error.empty()); // a last piece may be small
  auto huge = in.add("r2", wire::fragment{1, 0, (1 << 20) + 1, std::vector<std::uint8_t>(1024, 0)});
  CHECK(huge.error == "message 1 in pieces: 1048577 bytes, above the 1048576 of the largest message this model makes");
  CHECK(in.pending() == 2); // messages 5 and 9
  CHECK(in.held_bytes() == 3072 + 4096);
  in.forget("nobody");
  CHECK(in.pending() == 2);

  // What was refused loses nothing else: message 5 still completes.
  for (std::size_t k = 1; k < other.size(); ++k) {
    auto o = in.add("r1", std::move(other[k]));
    CHECK(o.error.empty());
    CHECK(o.whole.has_value() == (k + 1 == other.size()));
  }
  CHECK(in.held_bytes() == 4096);
}

TEST_CASE("fragments: memory stays bounded: messages under way per peer and for all peers, and a gone peer's are dropped") {
  // At most 2 under way per peer and 10,000 announced bytes in all.
  fragment_assembler in{fragment_limits{6000, 2, 10'000, 1}};
  for (std::uint64_t id = 1; id <= 5; ++id) // a peer that begins 5 messages and finishes none
    CHECK(in.add("flood", wire::fragment{id, 0, 4000, {1}}).error.empty());
  CHECK(in.pending() == 2); // its oldest went
  CHECK(in.held_bytes() == 8000);
  // Another peer's message: the oldest of anyone's go until it fits (the flooder's message 4).
  CHECK(in.add("r1", wire::fragment{1, 0, 4000, {1}}).error.empty());
  CHECK(in.held_bytes() == 8000);
  CHECK(in.pending() == 2);
  // Message 5 is still under way (its first byte came: sent again, it overlaps), 4 is not.
  CHECK(in.add("flood", wire::fragment{5, 0, 4000, {9}}).error
        == "message 5 in pieces: a piece of [0, +1) of 4000 bytes overlaps what came");
  CHECK(in.pending() == 1); // refused: message 5 went with it
  CHECK(in.add("flood", wire::fragment{4, 0, 4000, {1}}).error.empty()); // begins anew
  CHECK(in.pending() == 2);
  in.forget("flood");
  CHECK(in.pending() == 1);
  CHECK(in.held_bytes() == 4000);
  in.forget("r1");
  CHECK(in.pending() == 0);
  CHECK(in.held_bytes() == 0);
}

TEST_CASE("fragments: the largest message a model makes bounds the pieces, never below the frame limit") {
  // 4 x 256 x 768 values: two activations of up to 6 bytes a value (sparse) and 1 MiB.
  CHECK(largest_message_bytes(4 * 256 * 768, 64 << 20) == 64u << 20);
  CHECK(largest_message_bytes(16 * 2048 * 2048, 64 << 20) == 12ull * 16 * 2048 * 2048 + (1 << 20));
}
