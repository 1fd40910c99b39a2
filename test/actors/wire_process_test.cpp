// Two real processes on 127.0.0.1: this test and gwtf-wire-peer, connected by CAF's
// middleman, exchange every wire message kind as Cap'n Proto frames; the peer answers bad
// frames with errors and keeps serving.
#include <random>
#include <string>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <doctest/doctest.h>

#include "../messages/samples.hpp"
#include "peer_process.hpp"
#include "actors/errors.hpp"
#include "actors/system_setup.hpp"
#include "actors/net/wire_frame.hpp"

using namespace gwtf;
using namespace gwtf::actors;

TEST_CASE("two processes exchange every wire message kind, bad frames get errors, not crashes") {
  test::peer_process peer{GWTF_WIRE_PEER, "1048576"};
  REQUIRE(peer.port() > 0);
  system_config cfg{node_config{}, fault_config{}, true};
  caf::actor_system sys{cfg};
  auto remote = sys.middleman().remote_actor("127.0.0.1", peer.port());
  REQUIRE_MESSAGE(remote, sys.render(remote.error()));
  caf::scoped_actor self{sys};
  auto roundtrip = [&](const wire_frame& frame) -> caf::expected<wire_frame> {
    caf::expected<wire_frame> out{caf::error{}};
    self->request(*remote, std::chrono::seconds{30}, frame)
      .receive([&](wire_frame& reply) { out = std::move(reply); },
               [&](caf::error& e) { out = std::move(e); });
    return out;
  };

  for (auto& sample : test::all_samples()) {
    INFO(std::string{wire::kind_name(sample)});
    auto reply = roundtrip(make_frame(sample));
    REQUIRE_MESSAGE(reply, sys.render(reply.error()));
    auto back = open_frame(*reply, wire::decode_limits{});
    REQUIRE(back);
    CHECK(*back == sample);
  }

  // Hostile frames: garbage, truncations, oversize. Each gets a typed error back.
  std::mt19937 rng{7};
  std::vector<wire_frame> bad;
  bad.push_back(wire_frame{});
  std::vector<std::uint8_t> garbage(256);
  for (auto& b : garbage)
    b = static_cast<std::uint8_t>(rng());
  bad.push_back(wire_frame{garbage});
  auto valid = make_frame(test::all_samples()[5]);
  bad.push_back(wire_frame{std::vector<std::uint8_t>(valid.bytes.begin(), valid.bytes.begin() + 24)});
  bad.push_back(wire_frame{std::vector<std::uint8_t>(2u << 20, 0)}); // over the peer's 1 MiB limit
  for (auto& frame : bad) {
    auto reply = roundtrip(frame);
    REQUIRE_FALSE(reply);
    INFO(sys.render(reply.error()));
    CHECK(reply.error().category() == error_category);
    CHECK(reply.error().code() == static_cast<std::uint8_t>(ec::malformed_message));
  }
  auto too_big = roundtrip(bad.back());
  CHECK(sys.render(too_big.error()).find("too_large: 2097152 bytes exceed the limit of 1048576")
        != std::string::npos);

  // ... and the peer goes on serving valid frames.
  CHECK(peer.alive());
  auto after = roundtrip(valid);
  REQUIRE(after);
  CHECK(*open_frame(*after, wire::decode_limits{}) == test::all_samples()[5]);
}
