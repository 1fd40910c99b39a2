// The embedded link layer through its typed protocol (actors/protocols.hpp): frames reach the
// actor registered for (host, service) and nobody else; a frame for a host that is not
// registered is lost; the slow-link question of a host says that the shell's front answers it.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/atoms.hpp"
#include "actors/net/link_layer.hpp"
#include "actors/net/wire_frame.hpp"
#include "doctest/doctest.h"

using namespace gwtf::actors;

namespace {

wire_frame frame_of(std::uint8_t tag) {
  wire_frame f;
  f.bytes = {tag, 7, 7};
  return f;
}

} // namespace

TEST_CASE("the embedded link layer delivers to the registered (host, service) only, through its typed interface") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  gwtf::routing::network_matrix net;
  net.regions = {"eu"};
  net.latency_ms = {{1}};
  net.bandwidth_mbps = {{1000}};
  std::vector<host_config> hosts{{"a", "eu", host_role::data_holder, 0, 4, 1.0},
                                 {"b", "eu", host_role::relay, 1, 4, 1.0}};
  link_actor link = spawn_link_layer(sys, net, hosts, 0.0); // time scale 0: no emulated delay
  caf::scoped_actor stage_b{sys};
  caf::scoped_actor probe_b{sys};
  caf::scoped_actor asker{sys};
  asker->send(link, register_atom::value, std::string{"b"}, static_cast<std::int32_t>(service::stage),
              caf::actor_cast<frame_sink_actor>(stage_b));
  asker->send(link, register_atom::value, std::string{"b"}, static_cast<std::int32_t>(service::probe),
              caf::actor_cast<frame_sink_actor>(probe_b));
  // Lost: host c is not registered. Then one frame for b's stage, one for b's probe.
  asker->send(link, send_atom::value, std::string{"a"}, std::string{"c"}, static_cast<std::int32_t>(service::stage),
              frame_of(1));
  asker->send(link, send_atom::value, std::string{"a"}, std::string{"b"}, static_cast<std::int32_t>(service::stage),
              frame_of(2));
  asker->send(link, send_atom::value, std::string{"a"}, std::string{"b"}, static_cast<std::int32_t>(service::probe),
              frame_of(3));
  auto next_tag = [](caf::scoped_actor& who) {
    int tag = -1;
    std::string from;
    who->receive([&](deliver_atom, const std::string& f, const wire_frame& x) { from = f, tag = x.bytes.at(0); },
                 caf::after(std::chrono::seconds(10)) >> [] {});
    CHECK(from == "a");
    return tag;
  };
  CHECK(next_tag(stage_b) == 2); // not 1: the frame for c went nowhere
  CHECK(next_tag(probe_b) == 3);
  std::string why;
  asker->request(link, std::chrono::seconds(10), slow_atom::value, caf::get_atom::value, std::string{"b"}, 2.0)
    .receive([&](const std::string& answer) { why = answer; }, [&](caf::error& e) { why = "error: " + to_string(e); });
  CHECK(why.find("front") != std::string::npos);
  caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
}

TEST_CASE("a host's LEAVE and RESTORE travel in the bulk lane behind its shares, its gossip in the control lane ahead of them") {
  auto membership = static_cast<std::int32_t>(service::membership);
  CHECK(lane_of(membership, make_frame(gwtf::wire::leave{"r2", 7, true})) == peer_framing::bulk);
  gwtf::wire::restore r;
  r.stage = 1;
  r.restorer = "r1";
  r.decided_by = "r2";
  CHECK(lane_of(membership, make_frame(r)) == peer_framing::bulk);
  CHECK(lane_of(membership, make_frame(gwtf::wire::gossip{})) == peer_framing::control);
  CHECK(lane_of(static_cast<std::int32_t>(service::probe), make_frame(gwtf::wire::gossip{})) == peer_framing::control);
  CHECK(lane_of(static_cast<std::int32_t>(service::stage), make_frame(gwtf::wire::gossip{})) == peer_framing::bulk);
}
