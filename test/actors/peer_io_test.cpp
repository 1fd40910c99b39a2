// The socket loop under node mode's transport (actors/net/peer_io), with no CAF, on 127.0.0.1:
// a dial is answered on the peer's hello, a heartbeat overtakes a share queued before it, a
// header above the limit is refused with the peer's address, a dial to a non-peer fails, and
// a loop stopped while commands arrive stops.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/peer_framing.hpp"
#include "actors/net/peer_io.hpp"
#include "node_process.hpp"
#include "raw_peer.hpp"

using namespace gwtf::actors;
namespace pf = gwtf::actors::peer_framing;

namespace {

constexpr std::int32_t stage = 3, membership = 0;

// What a loop's callbacks saw, for the test thread to wait on.
struct seen {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::pair<std::int32_t, std::vector<std::uint8_t>>> frames;
  std::vector<std::string> refused;
  std::uint64_t dialled = 0;
  std::string dial_error;

  peer_io_events events() {
    peer_io_events ev;
    ev.frame = [this](std::uint64_t, std::int32_t svc, bool, std::vector<std::uint8_t>&& bytes) {
      std::lock_guard<std::mutex> g{mtx};
      frames.emplace_back(svc, std::move(bytes));
      cv.notify_all();
    };
    ev.closed = [](std::uint64_t, const std::string&) {};
    ev.refused = [this](const std::string& what) {
      std::lock_guard<std::mutex> g{mtx};
      refused.push_back(what);
      cv.notify_all();
    };
    ev.dialled = [this](std::uint64_t, std::uint64_t conn, const std::string& why) {
      std::lock_guard<std::mutex> g{mtx};
      dialled = conn;
      dial_error = why;
      cv.notify_all();
    };
    return ev;
  }

  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, std::chrono::seconds(20), pred);
  }
};

std::unique_ptr<peer_io> start(seen& s, std::uint64_t max_frame) {
  peer_io_options o;
  o.host = "127.0.0.1";
  o.max_frame = max_frame;
  std::string why;
  auto io = peer_io::start(o, s.events(), why);
  REQUIRE_MESSAGE(io, why);
  return io;
}

} // namespace

TEST_CASE("socket loop: a dial is answered on the hello, control overtakes a queued share, an oversized header is refused") {
  seen a_seen, b_seen;
  auto a = start(a_seen, 8u << 20);
  auto b = start(b_seen, 64u << 20);
  // B dials a raw listener that says hello and reads nothing until both frames were queued:
  // a 32 MiB share, more than the socket buffers hold, then a heartbeat.
  std::uint16_t lport = 0;
  int lst = gwtf::test::listen_loopback(lport);
  REQUIRE(lst >= 0);
  int fd = gwtf::test::connect_loopback(lport);
  REQUIRE(fd >= 0);
  int peer = ::accept(lst, nullptr, nullptr);
  REQUIRE(peer >= 0);
  auto hello = pf::hello_bytes();
  REQUIRE(::write(peer, hello.data(), hello.size()) == static_cast<ssize_t>(hello.size()));
  b->adopt(7, fd, "127.0.0.1:" + std::to_string(lport));
  REQUIRE(b_seen.wait([&] { return b_seen.dialled != 0 || !b_seen.dial_error.empty(); }));
  REQUIRE(b_seen.dial_error.empty());
  std::vector<std::uint8_t> share(32u << 20);
  std::iota(share.begin(), share.end(), std::uint8_t{3});
  auto expected = share;
  b->send(b_seen.dialled, stage, false, std::move(share), false);
  b->send(b_seen.dialled, membership, false, std::vector<std::uint8_t>(50, 9), false);
  auto got = gwtf::test::read_frames(peer, 64u << 20, 2);
  // The heartbeat was queued behind the share and overtook it; both arrived whole.
  CHECK(got[0].service == membership);
  CHECK(got[0].bytes == std::vector<std::uint8_t>(50, 9));
  CHECK(got[1].service == stage);
  CHECK(got[1].bytes == expected);
  ::close(peer);
  ::close(lst);

  // A raw peer announcing a frame above the limit: refused at its header, with its address.
  int raw = gwtf::test::connect_loopback(a->port());
  REQUIRE(raw >= 0);
  auto bytes = pf::hello_bytes();
  pf::write_header(bytes, pf::bulk, pf::first, stage, 0, 9u << 20);
  REQUIRE(::write(raw, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  REQUIRE(a_seen.wait([&] { return !a_seen.refused.empty(); }));
  CHECK(a_seen.refused[0].find("closed the connection from 127.0.0.1:") == 0);
  CHECK(a_seen.refused[0].find("a frame announcing 9437184 bytes (limit 8388608") != std::string::npos);
  ::close(raw);

  // A dial to a listener that is not a peer (it never says hello) fails with the reason.
  std::uint16_t oport = 0;
  int other = gwtf::test::listen_loopback(oport);
  REQUIRE(other >= 0);
  int to_other = gwtf::test::connect_loopback(oport);
  REQUIRE(to_other >= 0);
  int accepted = ::accept(other, nullptr, nullptr);
  std::string junk = "HTTP/1.1 400\r\n\r\n";
  REQUIRE(::write(accepted, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
  {
    std::lock_guard<std::mutex> g{b_seen.mtx};
    b_seen.dialled = 0;
  }
  b->adopt(8, to_other, "127.0.0.1:" + std::to_string(oport));
  REQUIRE(b_seen.wait([&] { return !b_seen.dial_error.empty(); }));
  CHECK(b_seen.dialled == 0);
  CHECK(b_seen.dial_error.find("not a caf-gwtf peer") != std::string::npos);
  ::close(accepted);
  ::close(other);
}

TEST_CASE("socket loop: stopped while commands arrive, it stops (100 rounds)") {
  // A smoke test of stopping with commands in flight. The race once seen under load (a
  // stop's wake-up taken by the command reader, and a node that did not exit within the
  // launcher's 5 s) is too narrow to hit here on purpose; run_commands closes it by design.
  int in_time = 0;
  for (int round = 0; round < 100; ++round) {
    seen s;
    auto io = start(s, 1u << 20);
    for (int i = 0; i < 3; ++i)
      io->send(1, membership, false, std::vector<std::uint8_t>(8, 1), false); // no such connection
    std::promise<void> stopped;
    auto done = stopped.get_future();
    std::thread stopper([&] {
      io.reset();
      stopped.set_value();
    });
    if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // The loop's thread cannot be taken back: say why and end the process.
      std::fprintf(stderr, "socket loop: not stopped within 10 s in round %d\n", round);
      std::abort();
    }
    stopper.join();
    ++in_time;
  }
  CHECK(in_time == 100);
}
