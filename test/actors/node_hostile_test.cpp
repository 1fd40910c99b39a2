// A node (caf-gwtf in node mode, its own process) faced with a hostile peer that speaks CAF:
// frames for names it never introduced, another cluster's gossip, garbage, a wrong protocol
// version, oversized frames, messages that are not ours, and a spoofed name on an introduced
// connection. Each is logged and dropped; the node stays up and still binds an honest peer.
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <doctest/doctest.h>

#include "actors/interfaces.hpp"
#include "actors/system_setup.hpp"
#include "actors/net/wire_frame.hpp"
#include "node_process.hpp"

extern char** environ;

using namespace gwtf;
using namespace gwtf::actors;
using gwtf::test::node_process;
using gwtf::test::read_file;
namespace fs = std::filesystem;

namespace {

wire::gossip introduce(const std::string& name, std::uint64_t cluster) {
  wire::hello h;
  h.peer_id = name;
  h.address = "127.0.0.1:9";
  h.stage = 1;
  h.capacity = 1;
  h.incarnation = 1;
  h.cluster = cluster;
  return wire::gossip{{wire::peer_record{h, 0, false}}};
}

} // namespace

TEST_CASE("a node logs and drops what a hostile CAF peer sends, and still binds an honest one") {
  auto dir = fs::temp_directory_path() / ("gwtf-hostile-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream{dir / "node.yaml"} << "node: {listen: \"127.0.0.1:0\", max_message_bytes: 65536}\n"
                                      "hosts:\n  - {name: r1, role: relay, stage: 1}\n"
                                      "model: {arch: gpt, layers: 2, hidden: 32, heads: 2, seq_len: 16, stages: 3}\n"
                                      "training: {iterations: 5, data_holders: [dh]}\n";
  node_process node;
  REQUIRE(node.start(GWTF_EXE, dir / "node.yaml", dir / "node.log"));
  auto start = node.wait_for("listening on 127.0.0.1:");
  INFO(start);
  auto at = start.find("listening on 127.0.0.1:");
  REQUIRE(at != std::string::npos);
  auto port = static_cast<std::uint16_t>(std::stoi(start.substr(at + 23)));
  auto c = start.find(", cluster ");
  REQUIRE(c != std::string::npos);
  auto cluster = std::stoull(start.substr(c + 10, 16), nullptr, 16);

  system_config cfg{node_config{}, fault_config{}, true};
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  caf::actor link;
  self->request(sys.middleman().actor_handle(), std::chrono::seconds(10), caf::connect_atom::value,
                std::string{"127.0.0.1"}, port)
    .receive([&](const caf::node_id&, caf::strong_actor_ptr& p,
                 const std::set<std::string>&) { link = caf::actor_cast<caf::actor>(p); },
             [&](caf::error& e) { FAIL(sys.render(e)); });
  REQUIRE(link);
  auto svc = [](service s) { return static_cast<std::int32_t>(s); };

  // 1. A stage frame from a name this connection never introduced.
  self->send(link, net_atom::value, std::string{"dh"}, std::string{"r1"}, svc(service::stage),
             make_frame(wire::iteration_done{0, "dh", 4, 1.0, {"dh"}}));
  // 2. Another cluster's introduction.
  self->send(link, net_atom::value, std::string{"x1"}, std::string{"r1"}, svc(service::link),
             make_frame(introduce("x1", cluster ^ 1)));
  // 3. Garbage where a link frame belongs.
  self->send(link, net_atom::value, std::string{"x2"}, std::string{"r1"}, svc(service::link),
             wire_frame{std::vector<std::uint8_t>(200, 0x5a)});
  // 4. A valid gossip with another protocol version (bytes 20-21: the envelope's version).
  auto versioned = make_frame(introduce("x3", cluster));
  versioned.bytes.at(20) ^= 0x7f;
  REQUIRE(!open_frame(versioned, wire::decode_limits{}));
  self->send(link, net_atom::value, std::string{"x3"}, std::string{"r1"}, svc(service::link), versioned);
  // 5. A frame above node.max_message_bytes (65536), below the guard's framing slack.
  self->send(link, net_atom::value, std::string{"x4"}, std::string{"r1"}, svc(service::stage),
             wire_frame{std::vector<std::uint8_t>(100000, 1)});
  // 6. A message that is not ours at all.
  self->send(link, std::string{"not a caf-gwtf message"}, 42);
  // 7. An honest introduction: the node binds us and answers with its own gossip.
  self->send(link, net_atom::value, std::string{"t1"}, std::string{}, svc(service::link),
             make_frame(introduce("t1", cluster)));
  bool answered = false;
  self->receive(
    [&](net_atom, const std::string& from, const std::string& to, std::int32_t s, wire_frame& f) {
      auto msg = open_frame(std::move(f), wire::decode_limits{});
      REQUIRE(msg);
      auto* g = std::get_if<wire::gossip>(&*msg);
      REQUIRE(g != nullptr);
      CHECK(from == "r1");
      CHECK(to == "t1");
      CHECK(s == svc(service::link));
      CHECK(g->peers.front().peer.peer_id == "r1");
      answered = true;
    },
    caf::after(std::chrono::seconds(10)) >> [&] {});
  CHECK(answered);
  // 8. Now introduced as t1, this connection claims to be someone else.
  self->send(link, net_atom::value, std::string{"dh"}, std::string{"r1"}, svc(service::stage),
             make_frame(wire::iteration_done{0, "dh", 4, 1.0, {"dh"}}));
  // 9. As t1, activations LibTorch must never see: a wrong shape, and integers.
  auto bad_activation = [](std::vector<std::int64_t> shape, wire::dtype type) {
    wire::activation a;
    a.microbatch = wire::microbatch_ref{0, 0, 0, 1};
    a.dir = wire::direction::forward;
    a.path = {"dh", "r1"};
    std::size_t n = wire::dtype_size(type);
    for (auto d : shape)
      n *= static_cast<std::size_t>(d);
    std::vector<std::uint8_t> zeros(n, 0);
    a.tensor = wire::tensor_payload::copy_of(type, std::move(shape), zeros.data(), n);
    return make_frame(a);
  };
  self->send(link, net_atom::value, std::string{"t1"}, std::string{"r1"}, svc(service::stage),
             bad_activation({1, 2, 3}, wire::dtype::float32));
  self->send(link, net_atom::value, std::string{"t1"}, std::string{"r1"}, svc(service::stage),
             bad_activation({4, 16, 32}, wire::dtype::int64));

  auto log = node.wait_for("not a float tensor");
  INFO(log);
  CHECK(log.find("frame claiming to be from 'dh' on the connection of node") != std::string::npos);
  CHECK(log.find("(never introduced): dropped") != std::string::npos);
  CHECK(log.find("belongs to another cluster") != std::string::npos);
  CHECK(log.find("bad link frame from node") != std::string::npos);
  CHECK(log.find("protocol_mismatch") != std::string::npos);
  CHECK(log.find("frame of 100000 bytes from node") != std::string::npos);
  CHECK(log.find("unexpected message") != std::string::npos);
  CHECK(log.find("link: connected to t1") != std::string::npos);
  CHECK(log.find("frame claiming to be from 'dh' on the connection of 't1': dropped") != std::string::npos);
  CHECK(log.find("activation from t1: shape [1, 2, 3], expected [") != std::string::npos);
  CHECK(log.find("activation from t1: not a float tensor: dropped") != std::string::npos);
  CHECK(log.find("restart") == std::string::npos); // no actor failed
  CHECK(kill(node.pid, 0) == 0); // still up
  fs::remove_all(dir);
}
