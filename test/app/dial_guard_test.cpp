// Frames from peers this host dials pass the same checks as inbound ones (actors/net/
// peer_transport.cpp). CAF 0.17's BASP allocated and zeroed whatever a header announced before
// reading it: a "peer" named in node.bootstrap that answered the dial with a header announcing
// 4 GiB made the host allocate 4 GiB. The transport's frame reader checks every header against
// node.max_message_bytes first: it closes that connection with a log line naming the peer's
// address, the host stays small and up, and keeps dialling. (With node.tls a dialled peer must
// show a certificate of the cluster CA: tls_test.cpp.)
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "actors/net/peer_framing.hpp"
#include "node_process.hpp"

namespace fs = std::filesystem;
using gwtf::test::node_process;
using gwtf::test::read_file;

namespace {

std::string node_yaml(const std::string& name, const std::string& extra, const std::string& bootstrap) {
  return "node: {listen: \"127.0.0.1:0\", max_message_bytes: 65536" + extra + ", bootstrap: [\"" + bootstrap +
         "\"]}\n"
         "hosts:\n  - {name: " + name + ", role: relay, stage: 1}\n"
         "model: {arch: gpt, layers: 2, hidden: 32, heads: 2, seq_len: 16, stages: 3}\n"
         "training: {iterations: 5, data_holders: [dh]}\n"
         "faults: {heartbeat_interval_ms: 250, connection_timeout_ms: 2000}\n";
}

// A hello and a fragment header announcing a frame of `len` bytes (actors/net/peer_framing.hpp).
std::string header(std::uint32_t len) {
  auto b = gwtf::actors::peer_framing::hello_bytes();
  gwtf::actors::peer_framing::write_header(b, gwtf::actors::peer_framing::bulk, gwtf::actors::peer_framing::first, 3,
                                           0, len);
  return {b.begin(), b.end()};
}

int listen_loopback(std::uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  socklen_t len = sizeof(a);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  port = ntohs(a.sin_port);
  return fd;
}

// Resident memory of a process in MiB (VmRSS).
long rss_mib(pid_t pid) {
  auto status = read_file("/proc/" + std::to_string(pid) + "/status");
  auto at = status.find("VmRSS:");
  REQUIRE(at != std::string::npos);
  return std::stol(status.substr(at + 6)) / 1024;
}

// Sends `bytes` on a new connection to 127.0.0.1:port and waits until the host closes it.
void send_and_wait(std::uint16_t port, const std::string& bytes) {
  int fd = gwtf::test::connect_loopback(port);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  char buf[256];
  while (::read(fd, buf, sizeof(buf)) > 0) {
  }
  ::close(fd);
}

// Waits (bounded) until the log holds `what` twice; returns the log.
std::string wait_twice(const node_process& node, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto text = read_file(node.log);
    auto first = text.find(what);
    if ((first != std::string::npos && text.find(what, first + 1) != std::string::npos)
        || std::chrono::steady_clock::now() > deadline)
      return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // polling a file, not a race
  }
}

} // namespace

TEST_CASE("a peer this host dials that answers with a 4 GiB frame header is closed and logged, the host stays small") {
  auto dir = fs::temp_directory_path() / ("gwtf-dial-guard-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The hostile "bootstrap peer": every connection gets the header, then it reads until the
  // host closes (a reader that trusted the header would wait for the 4 GiB meanwhile).
  std::uint16_t hostile_port = 0;
  int hostile = listen_loopback(hostile_port);
  std::atomic<int> accepted{0};
  std::thread server([&] {
    for (;;) {
      int c = ::accept(hostile, nullptr, nullptr);
      if (c < 0)
        return; // the listening socket was shut down: the test is over
      ++accepted;
      auto h = header(0xfffffff0u);
      (void) ::write(c, h.data(), h.size());
      char buf[256];
      while (::read(c, buf, sizeof(buf)) > 0) {
      }
      ::close(c);
    }
  });
  auto at = "127.0.0.1:" + std::to_string(hostile_port);
  std::ofstream{dir / "r1.yaml"} << node_yaml("r1", "", at);
  node_process node;
  REQUIRE(node.start(GWTF_EXE, dir / "r1.yaml", dir / "r1.log"));
  auto refused = "closed the connection to " + at + ": a frame announcing 4294967280 bytes";
  auto log = node.wait_for(refused);
  INFO("r1's log:\n" << log);
  CHECK(log.find(refused) != std::string::npos);
  CHECK(accepted.load() >= 1);
  // It dials the bootstrap address again (back-off) and is refused again, and stays small.
  log = wait_twice(node, refused);
  CHECK(log.find(refused, log.find(refused) + 1) != std::string::npos);
  CHECK(rss_mib(node.pid) < 1024); // the 4 GiB were never allocated
  // The listen port refuses the same header from a client that connects to it.
  auto lp = log.find("listening on 127.0.0.1:");
  REQUIRE(lp != std::string::npos);
  auto listen_port = static_cast<std::uint16_t>(std::stoi(log.substr(lp + 23)));
  send_and_wait(listen_port, header(0xfffffff0u));
  log = node.wait_for("closed the connection from 127.0.0.1:");
  CHECK(log.find("closed the connection from 127.0.0.1:") != std::string::npos);
  CHECK(rss_mib(node.pid) < 1024);
  CHECK(kill(node.pid, 0) == 0); // still up
  node.stop();
  ::shutdown(hostile, SHUT_RDWR);
  ::close(hostile);
  server.join();
  fs::remove_all(dir);
}
