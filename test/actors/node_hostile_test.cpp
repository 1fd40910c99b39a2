// A node (caf-gwtf in node mode, its own process) faced with a hostile peer that speaks its
// framing (actors/net/peer_framing.hpp): frames on a connection that never introduced itself,
// another cluster's gossip, garbage, a wrong protocol version, frames above the limit, a
// second name on an introduced connection, and activations LibTorch must never see. Each is
// logged and dropped (or its connection closed); the node stays up and still binds an honest
// peer.
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sstream>
#include <string>
#include <unistd.h>

#include <doctest/doctest.h>

#include "actors/atoms.hpp"
#include "actors/net/peer_framing.hpp"
#include "actors/net/wire_frame.hpp"
#include "node_process.hpp"

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

// One connection to the node, speaking its framing with a hello first.
class raw_peer {
public:
  explicit raw_peer(std::uint16_t port) : fd_(gwtf::test::connect_loopback(port)) {
    REQUIRE(fd_ >= 0);
    write_all(peer_framing::hello_bytes());
  }
  // A graceful close: what was written leaves first (closing with the node's hello unread
  // would send a reset, which drops this end's unsent bytes), then the node's end closes.
  ~raw_peer() {
    ::shutdown(fd_, SHUT_WR);
    pollfd p{fd_, POLLIN, 0};
    std::uint8_t buf[4096];
    while (::poll(&p, 1, 10000) > 0 && ::read(fd_, buf, sizeof buf) > 0) {
    }
    ::close(fd_);
  }
  void send(service svc, const wire_frame& f, bool introduction = false) {
    frame_writer w;
    w.push(static_cast<std::int32_t>(svc), introduction, f.bytes);
    std::vector<std::uint8_t> out;
    while (w.next(out)) {
    }
    write_all(out);
  }
  void write_all(const std::vector<std::uint8_t>& b) {
    REQUIRE(::write(fd_, b.data(), b.size()) == static_cast<ssize_t>(b.size()));
  }
  /// The next frame the node sends, within 10 s.
  std::optional<inbound_frame> receive() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pending_.empty()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        return std::nullopt;
      std::uint8_t buf[65536];
      auto n = ::read(fd_, buf, sizeof buf);
      if (n <= 0)
        return std::nullopt;
      REQUIRE(reader_.feed(buf, static_cast<std::size_t>(n), pending_).empty());
    }
    auto f = std::move(pending_.front());
    pending_.erase(pending_.begin());
    return f;
  }
  /// True once the node closed the connection (within 10 s).
  bool closed() {
    pollfd p{fd_, POLLIN, 0};
    std::uint8_t buf[4096];
    while (::poll(&p, 1, 10000) > 0)
      if (::read(fd_, buf, sizeof buf) <= 0)
        return true;
    return false;
  }

private:
  int fd_;
  frame_reader reader_{64u << 20};
  std::vector<inbound_frame> pending_;
};

} // namespace

TEST_CASE("a node logs and drops what a hostile peer sends, and still binds an honest one") {
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

  auto frame = [](const wire::message& m) { return make_frame(m); };
  // 1. A stage frame on a connection that never introduced itself.
  {
    raw_peer stranger{port};
    stranger.send(service::stage, frame(wire::iteration_done{0, "dh", 4, 1.0, {"dh"}}));
    // 2. Another cluster's introduction, on another connection.
    raw_peer other{port};
    other.send(service::link, frame(introduce("x1", cluster ^ 1)), true);
    // 3. Garbage where a link frame belongs.
    stranger.send(service::link, wire_frame{std::vector<std::uint8_t>(200, 0x5a)}, true);
    // 4. A valid gossip with another protocol version (bytes 20-21: the envelope's version).
    auto versioned = frame(introduce("x3", cluster));
    versioned.bytes.at(20) ^= 0x7f;
    REQUIRE(!open_frame(versioned, wire::decode_limits{}));
    stranger.send(service::link, versioned, true);
  }
  // 5. A frame above node.max_message_bytes (65536): the connection is closed at its header.
  {
    raw_peer big{port};
    big.send(service::stage, wire_frame{std::vector<std::uint8_t>(100000, 1)});
    CHECK(big.closed());
  }
  // 6. Bytes that are not ours at all.
  {
    int fd = gwtf::test::connect_loopback(port);
    REQUIRE(fd >= 0);
    std::string junk = "not a caf-gwtf message";
    REQUIRE(::write(fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
    ::close(fd);
  }
  // 7. An honest introduction: the node binds us and answers with its own gossip.
  raw_peer t1{port};
  t1.send(service::link, frame(introduce("t1", cluster)), true);
  auto answer = t1.receive();
  REQUIRE(answer.has_value());
  CHECK(answer->service == static_cast<std::int32_t>(service::link));
  auto msg = open_frame(wire_frame{answer->bytes}, wire::decode_limits{});
  REQUIRE(msg);
  auto* g = std::get_if<wire::gossip>(&*msg);
  REQUIRE(g != nullptr);
  CHECK(g->peers.front().peer.peer_id == "r1");
  // 8. Now introduced as t1, this connection claims to be someone else.
  t1.send(service::link, frame(introduce("dh", cluster)));
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
  t1.send(service::stage, bad_activation({1, 2, 3}, wire::dtype::float32));
  t1.send(service::stage, bad_activation({4, 16, 32}, wire::dtype::int64));

  auto log = node.wait_for("not a float tensor");
  INFO(log);
  CHECK(log.find("a frame on connection ") != std::string::npos);
  CHECK(log.find(" (not introduced): dropped") != std::string::npos);
  CHECK(log.find("belongs to another cluster") != std::string::npos);
  CHECK(log.find("bad link frame from connection") != std::string::npos);
  CHECK(log.find("protocol_mismatch") != std::string::npos);
  CHECK(log.find("a frame announcing 100000 bytes (limit 65536, node.max_message_bytes)") != std::string::npos);
  CHECK(log.find("not a caf-gwtf peer (a fragment starting 6e 6f 74 20") != std::string::npos);
  CHECK(log.find("link: connected to t1") != std::string::npos);
  CHECK(log.find("connection of 't1' now claims to be 'dh'") != std::string::npos);
  CHECK(log.find("activation from t1: shape [1, 2, 3], expected [") != std::string::npos);
  CHECK(log.find("activation from t1: not a float tensor: dropped") != std::string::npos);
  CHECK(log.find("restart") == std::string::npos); // no actor failed
  CHECK(kill(node.pid, 0) == 0); // still up
  fs::remove_all(dir);
}
