// Node mode's transport (actors/net/peer_transport) on 127.0.0.1, against a raw peer: a
// control frame sent while a large share streams on the same connection arrives before the
// share does, and both arrive whole.
#include <doctest/doctest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/interfaces.hpp"
#include "actors/net/peer_framing.hpp"
#include "actors/net/peer_transport.hpp"
#include "actors/system_setup.hpp"
#include "node_process.hpp"
#include "raw_peer.hpp"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

constexpr std::int32_t membership = static_cast<std::int32_t>(service::membership);
constexpr std::int32_t stage = static_cast<std::int32_t>(service::stage);

caf::behavior sink(caf::event_based_actor*) {
  return {
    [](net_atom, std::uint64_t, std::int32_t, bool, const wire_frame&) {},
    [](closed_atom, std::uint64_t, const std::string&) {},
  };
}

caf::actor transport(caf::actor_system& sys, caf::actor link, std::uint64_t max_frame) {
  peer_transport_options o;
  o.host = "127.0.0.1";
  o.max_frame = max_frame;
  o.host_name = "test";
  o.link = std::move(link);
  return spawn_peer_transport(sys, o);
}

} // namespace

TEST_CASE("transport: a control frame sent behind a 32 MiB share overtakes it, and both arrive whole") {
  system_config cfg{node_config{}, fault_config{}, true};
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  constexpr std::size_t share = 32u << 20;
  auto sender = transport(sys, sys.spawn(sink), share + 1024);
  // The receiving peer: a raw socket that says hello and reads nothing until both frames were
  // sent, so the share (more than the socket buffers hold) cannot have left before the
  // control frame was queued behind it.
  std::uint16_t lport = 0;
  int lst = gwtf::test::listen_loopback(lport);
  REQUIRE(lst >= 0);
  auto dial = self->request(sender, std::chrono::seconds(10), caf::connect_atom::value, std::string{"127.0.0.1"}, lport);
  int peer = ::accept(lst, nullptr, nullptr);
  REQUIRE(peer >= 0);
  auto hello = peer_framing::hello_bytes();
  REQUIRE(::write(peer, hello.data(), hello.size()) == static_cast<ssize_t>(hello.size()));
  std::uint64_t conn = 0;
  dial.receive([&](std::uint64_t c) { conn = c; }, [&](caf::error& e) { FAIL(sys.render(e)); });
  std::vector<std::uint8_t> big(share);
  std::iota(big.begin(), big.end(), std::uint8_t{1}); // first byte 1, last byte (share % 256)
  self->send(sender, send_atom::value, conn, stage, false, wire_frame{std::move(big)});
  self->send(sender, send_atom::value, conn, membership, false, wire_frame{std::vector<std::uint8_t>(100, 9)});
  auto got = gwtf::test::read_frames(peer, share + 1024, 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].service == membership);
  CHECK(got[0].bytes == std::vector<std::uint8_t>(100, 9));
  CHECK(got[1].service == stage);
  CHECK(got[1].bytes.size() == share);
  CHECK(got[1].bytes.front() == 1);
  CHECK(got[1].bytes.back() == static_cast<std::uint8_t>(share % 256));
  ::close(peer);
  ::close(lst);
  caf::anon_send_exit(sender, caf::exit_reason::kill);
}
