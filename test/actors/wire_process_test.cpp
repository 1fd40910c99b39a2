// Two real processes on 127.0.0.1: this test and gwtf-wire-peer, connected by CAF's
// middleman, exchange every wire message kind as Cap'n Proto frames; the peer answers bad
// frames with errors and keeps serving.
#include <csignal>
#include <cstdio>
#include <random>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <doctest/doctest.h>

#include "../messages/samples.hpp"
#include "actors/errors.hpp"
#include "actors/system_setup.hpp"
#include "actors/wire_frame.hpp"

extern char** environ;

using namespace gwtf;
using namespace gwtf::actors;

namespace {

// gwtf-wire-peer as a child process; its stdin is our pipe (closing it stops the child).
class peer_process {
public:
  explicit peer_process(const std::string& max_bytes) {
    int to_child[2];
    int from_child[2];
    REQUIRE(pipe(to_child) == 0);
    REQUIRE(pipe(from_child) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    posix_spawn_file_actions_addclose(&fa, to_child[1]);
    posix_spawn_file_actions_addclose(&fa, from_child[0]);
    std::string exe = GWTF_WIRE_PEER;
    char* argv[] = {exe.data(), const_cast<char*>(max_bytes.c_str()), nullptr};
    REQUIRE(posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);
    stdin_ = to_child[1];
    FILE* out = fdopen(from_child[0], "r");
    REQUIRE(out != nullptr);
    int p = 0;
    // Blocks until the peer has published (or died: then fscanf fails).
    REQUIRE(std::fscanf(out, "port %d", &p) == 1);
    port_ = static_cast<std::uint16_t>(p);
    std::fclose(out);
  }

  ~peer_process() {
    close(stdin_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  std::uint16_t port() const { return port_; }

  bool alive() const { return kill(pid_, 0) == 0; }

private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::uint16_t port_ = 0;
};

} // namespace

TEST_CASE("two processes exchange every wire message kind; bad frames get errors, not crashes") {
  peer_process peer{"1048576"};
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
