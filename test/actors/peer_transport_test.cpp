// Node mode's transport (actors/net/peer_transport) between two brokers of one actor system
// on 127.0.0.1: a control frame sent while a large share streams on the same connection
// arrives before the share does, and both arrive whole.
#include <doctest/doctest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/interfaces.hpp"
#include "actors/net/peer_transport.hpp"
#include "actors/system_setup.hpp"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

constexpr std::int32_t membership = static_cast<std::int32_t>(service::membership);
constexpr std::int32_t stage = static_cast<std::int32_t>(service::stage);

// Stands in for a link: tells `observer` (service, size, first byte, last byte) per frame.
caf::behavior recorder(caf::event_based_actor*, caf::actor observer) {
  return {
    [observer](net_atom, std::uint64_t, std::int32_t svc, bool, const wire_frame& f) {
      caf::anon_send(observer, svc, f.bytes.size(), f.bytes.empty() ? 0 : int{f.bytes.front()},
                     f.bytes.empty() ? 0 : int{f.bytes.back()});
    },
    [](closed_atom, std::uint64_t, const std::string&) {},
  };
}

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
  auto receiver = transport(sys, sys.spawn(recorder, caf::actor_cast<caf::actor>(self)), share + 1024);
  auto sender = transport(sys, sys.spawn(sink), share + 1024);
  std::uint16_t port = 0;
  self->request(receiver, std::chrono::seconds(10), caf::get_atom::value)
    .receive([&](std::uint16_t p) { port = p; }, [&](caf::error& e) { FAIL(sys.render(e)); });
  std::uint64_t conn = 0;
  self->request(sender, std::chrono::seconds(10), caf::connect_atom::value, std::string{"127.0.0.1"}, port)
    .receive([&](std::uint64_t c) { conn = c; }, [&](caf::error& e) { FAIL(sys.render(e)); });
  std::vector<std::uint8_t> big(share);
  std::iota(big.begin(), big.end(), std::uint8_t{1}); // first byte 1, last byte (share % 256)
  self->send(sender, send_atom::value, conn, stage, false, wire_frame{std::move(big)});
  self->send(sender, send_atom::value, conn, membership, false, wire_frame{std::vector<std::uint8_t>(100, 9)});
  std::vector<std::int32_t> order;
  for (int i = 0; i < 2; ++i)
    self->receive(
      [&](std::int32_t svc, std::size_t size, int first, int last) {
        order.push_back(svc);
        if (svc == stage) {
          CHECK(size == share);
          CHECK(first == 1);
          CHECK(last == static_cast<int>(share % 256));
        } else {
          CHECK(size == 100);
          CHECK(first == 9);
        }
      },
      caf::after(std::chrono::seconds(60)) >> [&] { FAIL("a frame did not arrive within 60 s"); });
  CHECK(order == std::vector<std::int32_t>{membership, stage});
  for (auto& a : {receiver, sender})
    caf::anon_send_exit(a, caf::exit_reason::kill);
}
