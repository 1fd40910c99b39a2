// The socket loop under node mode's transport (actors/net/peer_io), with no CAF, on 127.0.0.1:
// a dial is answered on the peer's hello, a heartbeat overtakes a share queued before it, a
// header above the limit is refused with the peer's address, a dial to a non-peer fails, a
// loop stopped while commands arrive stops, the connection caps hold against a flood (one
// line for it) and an honest peer displaces an idle one, and the budget for unfinished
// frames closes the connection holding the most.
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
#include <poll.h>
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
  std::vector<std::string> order; // "certified NAME..." and "frame" as they came, with TLS

  peer_io_events events() {
    peer_io_events ev;
    ev.frame = [this](std::uint64_t, std::int32_t svc, bool, std::vector<std::uint8_t>&& bytes) {
      std::lock_guard<std::mutex> g{mtx};
      frames.emplace_back(svc, std::move(bytes));
      order.push_back("frame");
      cv.notify_all();
    };
    ev.closed = [](std::uint64_t, const std::string&) {};
    ev.certified = [this](std::uint64_t, std::vector<std::string> names) {
      std::lock_guard<std::mutex> g{mtx};
      std::string line = "certified";
      for (auto& n : names)
        line += " " + n;
      order.push_back(line);
      cv.notify_all();
    };
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

std::unique_ptr<peer_io> start(seen& s, std::uint64_t max_frame, peer_io_options o = {}) {
  o.host = "127.0.0.1";
  o.max_frame = max_frame;
  std::string why;
  auto io = peer_io::start(o, s.events(), why);
  REQUIRE_MESSAGE(io, why);
  return io;
}

std::shared_ptr<const tls_context> tls_of(const std::string& dir, const std::string& name, tls_side side) {
  std::string why;
  auto ctx = tls_context::make({dir + "/" + name + ".crt", dir + "/" + name + ".key", dir + "/ca.crt", ""}, side, why);
  REQUIRE_MESSAGE(ctx, why);
  return ctx;
}

} // namespace

TEST_CASE("socket loop: with TLS each end learns the host named by the certificate of its peer before any frame and the shell certificate is refused") {
  auto dir = "/tmp/gwtf-peer-io-certs-" + std::to_string(::getpid());
  auto cmd = std::string{GWTF_SOURCE_DIR} + "/scripts/make-certs " + dir + " --hosts alpha,beta >/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  seen a_seen, b_seen, c_seen;
  peer_io_options ao, bo, co;
  ao.tls = tls_of(dir, "alpha", tls_side::server);
  bo.tls = tls_of(dir, "beta", tls_side::server);
  bo.tls_client = tls_of(dir, "beta", tls_side::client);
  co.tls_client = tls_of(dir, "shell", tls_side::client); // it only dials
  auto a = start(a_seen, 8u << 20, ao);
  auto b = start(b_seen, 8u << 20, bo);
  // beta dials alpha: both ends are told who the other is, then beta's frame arrives.
  int fd = gwtf::test::connect_loopback(a->port());
  REQUIRE(fd >= 0);
  b->adopt(1, fd, "127.0.0.1:" + std::to_string(a->port()));
  REQUIRE(b_seen.wait([&] { return b_seen.dialled != 0 || !b_seen.dial_error.empty(); }));
  REQUIRE(b_seen.dial_error.empty());
  b->send(b_seen.dialled, membership, true, std::vector<std::uint8_t>(20, 1), false);
  REQUIRE(a_seen.wait([&] { return a_seen.frames.size() == 1; }));
  CHECK(a_seen.order == std::vector<std::string>{"certified beta", "frame"});
  CHECK(b_seen.order == std::vector<std::string>{"certified alpha"});
  // The shell's certificate chains to the CA but names no host: refused at the handshake.
  auto c = start(c_seen, 8u << 20, co);
  int cfd = gwtf::test::connect_loopback(a->port());
  REQUIRE(cfd >= 0);
  c->adopt(2, cfd, "127.0.0.1:" + std::to_string(a->port()));
  REQUIRE(a_seen.wait([&] { return !a_seen.refused.empty(); }));
  CHECK_MESSAGE(a_seen.refused[0].find("its certificate names no host name (a shell certificate, caf-gwtf:shell): "
                                       "only a host certificate may join") != std::string::npos,
                a_seen.refused[0]);
  CHECK(a_seen.order.size() == 2); // nothing certified for it
  std::system(("rm -rf " + dir).c_str());
}

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
  CHECK(a_seen.refused[0].find("peer port: closed the connection from 127.0.0.1:") == 0);
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

namespace {

// Whether the other end closed `fd` within 10 s (reads and drops what comes first).
bool closed_by_peer(int fd) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::uint8_t buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 100};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      return true;
  }
  return false;
}

void write_all(int fd, const std::vector<std::uint8_t>& b) {
  REQUIRE(::write(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size()));
}

// `fragments` full fragments of a bulk frame of `total` bytes (the first one opens it).
std::vector<std::uint8_t> partial_frame(std::size_t fragments, std::uint32_t total, bool hello = true) {
  auto out = hello ? pf::hello_bytes() : std::vector<std::uint8_t>{};
  for (std::size_t i = 0; i < fragments; ++i) {
    pf::write_header(out, pf::bulk, i == 0 ? pf::first : 0, stage, pf::fragment_bytes, total);
    out.insert(out.end(), pf::fragment_bytes, static_cast<std::uint8_t>(i));
  }
  return out;
}

} // namespace

TEST_CASE("socket loop: a flood from one address stays within its cap with one line, and an honest peer displaces an idle connection") {
  seen s;
  peer_io_options o;
  o.limits.max_connections = 8;
  o.limits.max_per_address = 3;
  o.limits.evictable_after = std::chrono::milliseconds(300);
  auto io = start(s, 1u << 20, o);
  // Three idle connections (no hello) fill the address's cap.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(gwtf::test::connect_loopback(io->port()));
    REQUIRE(idle.back() >= 0);
  }
  // Twenty more at once, while the three are fresh: each is closed at once, one line says so.
  std::vector<int> flood;
  for (int i = 0; i < 20; ++i) {
    flood.push_back(gwtf::test::connect_loopback(io->port()));
    REQUIRE(flood.back() >= 0);
  }
  for (int fd : flood) {
    CHECK(closed_by_peer(fd));
    ::close(fd);
  }
  {
    std::lock_guard<std::mutex> g{s.mtx};
    REQUIRE(s.refused.size() == 1);
    CHECK(s.refused[0].find("peer port: refused the connection from 127.0.0.1:") == 0);
    CHECK(s.refused[0].find("the address is at its limit of connections (3 from 127.0.0.1), and none of them idle for 300 ms")
          != std::string::npos);
  }
  // Once they have been idle past 300 ms, an honest peer takes the idlest one's place: its
  // hello is answered and its frame arrives.
  std::this_thread::sleep_for(std::chrono::milliseconds(400)); // the idleness the rule is about
  int honest = gwtf::test::connect_loopback(io->port());
  REQUIRE(honest >= 0);
  frame_writer w;
  w.push(membership, false, std::vector<std::uint8_t>(40, 5));
  auto bytes = pf::hello_bytes();
  while (w.next(bytes)) {
  }
  write_all(honest, bytes);
  REQUIRE(s.wait([&] { return !s.frames.empty(); }));
  CHECK(s.frames[0].second == std::vector<std::uint8_t>(40, 5));
  CHECK(closed_by_peer(idle[0])); // the oldest of the idle ones
  int still_open = 0;
  for (int i = 1; i < 3; ++i) {
    pollfd p{idle[i], POLLIN, 0};
    // (they got this host's hello: readable, but not closed)
    std::uint8_t buf[64];
    if (::poll(&p, 1, 0) > 0 && ::read(idle[i], buf, sizeof buf) > 0)
      ++still_open;
  }
  CHECK(still_open == 2);
  for (int fd : idle)
    ::close(fd);
  ::close(honest);
}

TEST_CASE("socket loop: the host's budget for unfinished frames closes the connection holding the most, the others go on") {
  seen s;
  peer_io_options o;
  o.max_partial_bytes = 3u << 19; // 1.5 MiB
  auto io = start(s, 4u << 20, o);
  int a = gwtf::test::connect_loopback(io->port());
  int b = gwtf::test::connect_loopback(io->port());
  int c = gwtf::test::connect_loopback(io->port());
  REQUIRE((a >= 0 && b >= 0 && c >= 0));
  constexpr std::uint32_t b_total = 5 * pf::fragment_bytes;
  write_all(a, partial_frame(16, 3u << 20)); // 1 MiB of a 3 MiB frame
  write_all(b, partial_frame(4, b_total));   // 256 KiB of 320 (a 256 KiB buffer)
  write_all(c, partial_frame(5, 512u << 10)); // 320 KiB of 512: the sum passes 1.5 MiB
  CHECK(closed_by_peer(a));
  {
    std::lock_guard<std::mutex> g{s.mtx};
    REQUIRE(s.refused.size() == 1);
    CHECK(s.refused[0].find("its unfinished frames hold 1048576 bytes, and this host's 1572864 for unfinished frames "
                            "of all connections (node.max_partial_bytes) are spent")
          != std::string::npos);
  }
  // B finishes its frame: it arrives whole.
  std::vector<std::uint8_t> last;
  pf::write_header(last, pf::bulk, pf::last, stage, pf::fragment_bytes, b_total);
  last.insert(last.end(), pf::fragment_bytes, 4);
  write_all(b, last);
  REQUIRE(s.wait([&] { return !s.frames.empty(); }));
  CHECK(s.frames[0].first == stage);
  CHECK(s.frames[0].second.size() == b_total);
  CHECK(s.frames[0].second.back() == 4);
  for (int fd : {a, b, c})
    ::close(fd);
}
