#include <doctest/doctest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <random>

#include "messages/codec.hpp"
#include "messages/wire.capnp.h"

using namespace gwtf::wire;

namespace {

hello sample_hello() {
  return hello{"relay-fra-7", "10.0.1.7:4242", peer_role::relay, 2, 8, 42};
}

template <class T>
wire_failure failure_of(const std::variant<T, wire_failure>& r) {
  REQUIRE(std::holds_alternative<wire_failure>(r));
  return std::get<wire_failure>(r);
}

// Builds an envelope by hand, so that tests can write what an honest encoder never would.
template <class Fill>
std::vector<std::uint8_t> craft(Fill&& fill) {
  capnp::MallocMessageBuilder b;
  auto env = b.initRoot<capnp_schema::Envelope>();
  env.setMagic(capnp_schema::ENVELOPE_MAGIC);
  env.setVersion(capnp_schema::PROTOCOL_VERSION);
  auto h = env.initBody().initHello();
  h.setPeerId("p");
  h.setAddress("a:1");
  h.setRole(capnp_schema::Role::RELAY);
  h.setStage(1);
  h.setCapacity(1);
  fill(env, h);
  auto words = capnp::messageToFlatArray(b);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

} // namespace

TEST_CASE("codec: hello and leave round-trip") {
  auto bytes = encode(sample_hello());
  auto r = decode_hello(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<hello>(r));
  auto& h = std::get<hello>(r);
  CHECK(h.peer_id == "relay-fra-7");
  CHECK(h.address == "10.0.1.7:4242");
  CHECK(h.role == peer_role::relay);
  CHECK(h.stage == 2);
  CHECK(h.capacity == 8);
  CHECK(h.incarnation == 42);

  auto lb = encode(leave{"relay-fra-7", 42});
  auto l = decode_leave(lb.data(), lb.size());
  REQUIRE(std::holds_alternative<leave>(l));
  CHECK(std::get<leave>(l).peer_id == "relay-fra-7");
  CHECK(std::get<leave>(l).incarnation == 42);
}

TEST_CASE("codec: misaligned input decodes through one copy") {
  auto bytes = encode(sample_hello());
  std::vector<std::uint8_t> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  auto r = decode_hello(shifted.data() + 1, bytes.size());
  CHECK(std::holds_alternative<hello>(r));
}

TEST_CASE("codec: the wrong message kind is a typed error") {
  auto lb = encode(leave{"x", 1});
  CHECK(failure_of(decode_hello(lb.data(), lb.size())).code == wire_error::wrong_kind);
  auto hb = encode(sample_hello());
  CHECK(failure_of(decode_leave(hb.data(), hb.size())).code == wire_error::wrong_kind);
}

TEST_CASE("codec: size limit applies before parsing") {
  auto bytes = encode(sample_hello());
  decode_limits tight;
  tight.max_bytes = bytes.size() - 8;
  auto f = failure_of(decode_hello(bytes.data(), bytes.size(), tight));
  CHECK(f.code == wire_error::too_large);
}

TEST_CASE("codec: every truncation is rejected") {
  auto bytes = encode(sample_hello());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("length " << n);
    auto f = failure_of(decode_hello(bytes.data(), n));
    CHECK((f.code == wire_error::truncated || f.code == wire_error::malformed));
  }
}

TEST_CASE("codec: random corruption never crashes and never yields an invalid hello") {
  auto bytes = encode(sample_hello());
  const unsigned seed = 20261122;
  std::mt19937 rng{seed};
  int decoded = 0;
  for (int round = 0; round < 20000; ++round) {
    auto copy = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k)
      copy[rng() % copy.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    INFO("seed " << seed << " round " << round);
    auto r = decode_hello(copy.data(), copy.size());
    if (auto* h = std::get_if<hello>(&r)) {
      ++decoded; // a flip in a payload byte can still be a valid hello: it must be in range
      CHECK(!h->peer_id.empty());
      CHECK(h->peer_id.size() <= 64);
      CHECK(h->capacity >= 1);
      CHECK(h->stage >= -1);
    }
  }
  CHECK(decoded < 20000);
}

TEST_CASE("codec: hostile fields are rejected with the field named") {
  auto magic = craft([](auto env, auto) { env.setMagic(0xdeadbeef); });
  CHECK(failure_of(decode_hello(magic.data(), magic.size())).code == wire_error::bad_magic);

  auto version = craft([](auto env, auto) { env.setVersion(99); });
  auto vf = failure_of(decode_hello(version.data(), version.size()));
  CHECK(vf.code == wire_error::unsupported_version);
  CHECK(vf.detail.find("version 99") != std::string::npos);

  auto role = craft([](auto, auto h) { h.setRole(static_cast<capnp_schema::Role>(7)); });
  auto rf = failure_of(decode_hello(role.data(), role.size()));
  CHECK(rf.code == wire_error::bad_enum);
  CHECK(rf.detail.find("hello.role") != std::string::npos);

  auto stage = craft([](auto, auto h) { h.setStage(-5); });
  CHECK(failure_of(decode_hello(stage.data(), stage.size())).detail.find("hello.stage") == 0);

  auto holder = craft([](auto, auto h) {
    h.setRole(capnp_schema::Role::DATA_HOLDER);
    h.setStage(3);
  });
  CHECK(failure_of(decode_hello(holder.data(), holder.size())).code == wire_error::bad_field);

  auto capacity = craft([](auto, auto h) { h.setCapacity(0); });
  CHECK(failure_of(decode_hello(capacity.data(), capacity.size())).detail.find("hello.capacity") == 0);

  auto id = craft([](auto, auto h) { h.setPeerId(std::string(65, 'x')); });
  CHECK(failure_of(decode_hello(id.data(), id.size())).detail.find("hello.peerId") == 0);

  auto empty_addr = craft([](auto, auto h) { h.setAddress(""); });
  CHECK(failure_of(decode_hello(empty_addr.data(), empty_addr.size())).detail.find("hello.address") == 0);
}

TEST_CASE("codec: a segment table announcing more than was sent is truncated") {
  auto bytes = encode(sample_hello());
  // Word 0: segment count - 1 (0) and the size of segment 0 in words; inflate the size.
  bytes[4] = 0xff;
  bytes[5] = 0xff;
  CHECK(failure_of(decode_hello(bytes.data(), bytes.size())).code == wire_error::truncated);
}
