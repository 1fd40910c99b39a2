// Hostile load against a running cluster (`caf-gwtf launch`, 3 hosts on 127.0.0.1): against
// every port of every host at once (peer, shell, metrics) an idle flood above the caps,
// headers announcing too much, slow drips and a 10 MB request line. Training goes on; each
// host stays under its baseline + 256 MB and its descriptors within the caps; an honest
// connection, the shell and /healthz are still answered; each attack is one line in the
// host's log. Bounded: 40 + 11 connections per port, 15 s of attack. docs/runtime.md,
// "Bounded ports".
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/peer_framing.hpp"
#include "app/run_command.hpp"
#include "node_process.hpp"

namespace {

namespace fs = std::filesystem;
namespace pf = gwtf::actors::peer_framing;
using gwtf::test::read_file;
const std::string src = GWTF_SOURCE_DIR;

// The node settings of the run: the peer port's caps small enough for a bounded flood.
constexpr int peer_cap_per_address = 24;
constexpr int served_cap_per_address = 16; // the shell's and the metrics port (fixed)

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// The process whose command line names `config` (a host that launch started).
pid_t pid_of(const fs::path& config) {
  for (auto& e : fs::directory_iterator("/proc")) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    auto cmd = read_file(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(config.string()) != std::string::npos && cmd.find("--report") != std::string::npos)
      return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

long rss_mib(pid_t pid) {
  auto status = read_file("/proc/" + std::to_string(pid) + "/status");
  auto at = status.find("VmRSS:");
  REQUIRE(at != std::string::npos);
  return std::stol(status.substr(at + 6)) / 1024;
}

std::size_t fd_count(pid_t pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

std::uint16_t port_after(const std::string& log, const std::string& marker) {
  auto at = log.find(marker);
  REQUIRE_MESSAGE(at != std::string::npos, "no '" << marker << "' in:\n" << log);
  return static_cast<std::uint16_t>(std::stoi(log.substr(at + marker.size())));
}

int open_to(std::uint16_t port) {
  int fd = gwtf::test::connect_loopback(port);
  REQUIRE(fd >= 0);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Best effort: what the socket takes now (the host may have closed it).
std::size_t push(int fd, const std::string& bytes, std::size_t from = 0) {
  auto n = ::send(fd, bytes.data() + from, bytes.size() - from, MSG_NOSIGNAL | MSG_DONTWAIT);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

// Whether the host closed `fd` (reads and drops what it sent).
bool closed(int fd) {
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return true;
    if (n < 0)
      return false;
  }
}

std::string bytes_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

struct host {
  std::string name;
  pid_t pid = -1;
  fs::path log;
  std::map<std::string, std::uint16_t> ports; // peer, inspect, metrics
  long rss0 = 0, rss_peak = 0;
  std::size_t fds0 = 0, fds_peak = 0;
};

struct drip {
  int fd;
  std::string bytes;
  std::size_t sent = 0;
  bool done = false;
};

struct flood {
  int fd;
  std::string bytes;
  std::size_t sent = 0;
};

int last_iteration(const std::string& log) {
  int last = -1;
  for (auto at = log.find("iteration "); at != std::string::npos; at = log.find("iteration ", at + 1)) {
    auto end = log.find(' ', at + 10);
    if (end != std::string::npos && log.compare(end, 9, " done at ") == 0)
      last = std::max(last, std::stoi(log.substr(at + 10, end - at - 10)));
  }
  return last;
}

} // namespace

TEST_CASE("hostile load: floods, big headers, drips and a 10 MB line on every port of a training cluster: it trains on, bounded, each attack one line") {
  auto dir = fs::temp_directory_path() / ("gwtf-hostile-load-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "logs");
  std::ofstream{dir / "cluster.yaml"}
    << "node: {metrics: \"127.0.0.1:0\", max_connections: 48, max_connections_per_address: " << peer_cap_per_address
    << "}\n"
       "hosts:\n"
       "  - {name: dh, region: virginia, role: data_holder, capacity: 4}\n"
       "  - {name: r1, region: ohio, role: relay, stage: 1, capacity: 4}\n"
       "  - {name: r2, region: oregon, role: relay, stage: 2, capacity: 4}\n"
       "model: {arch: gpt, layers: 3, hidden: 64, heads: 2, seq_len: 32, vocab: 256, stages: 3}\n"
       "data: {format: text, path: " << src << "/test/app/good_configs/corpus.txt}\n"
       "training: {seed: 7, iterations: 100000, microbatch_size: 2, microbatches_per_holder: 2}\n"
       "faults: {heartbeat_interval_ms: 250, connection_timeout_ms: 2000, hop_timeout_ms: 5000}\n";
  gwtf::test::node_process launch; // stopped (SIGINT) once the checks are done
  REQUIRE(launch.start_argv({GWTF_EXE, "launch", "--config", (dir / "cluster.yaml").string(), "--logs",
                             (dir / "logs").string()},
                            dir / "launch.log"));
  std::vector<host> hosts(3);
  hosts[0].name = "dh";
  hosts[1].name = "r1";
  hosts[2].name = "r2";
  for (auto& h : hosts) {
    h.log = dir / "logs" / (h.name + ".log");
    gwtf::test::node_process watcher;
    watcher.log = h.log;
    auto text = watcher.wait_for("metrics: http://127.0.0.1:", std::chrono::seconds(60));
    INFO("launch:\n" << read_file(dir / "launch.log"));
    h.ports["peer"] = port_after(text, "listening on 127.0.0.1:");
    h.ports["inspect"] = port_after(text, "inspect: caf-gwtf shell 127.0.0.1:");
    h.ports["metrics"] = port_after(text, "metrics: http://127.0.0.1:");
    h.pid = pid_of(dir / "logs" / (h.name + ".yaml"));
    REQUIRE(h.pid > 0);
    watcher.log.clear();
  }
  // Training has begun: the baselines.
  {
    gwtf::test::node_process watcher;
    watcher.log = hosts[0].log;
    auto text = watcher.wait_for("iteration 2 done at", std::chrono::seconds(90));
    REQUIRE_MESSAGE(last_iteration(text) >= 2, "dh's log:\n" << text);
  }
  for (auto& h : hosts) {
    h.rss0 = h.rss_peak = rss_mib(h.pid);
    h.fds0 = h.fds_peak = fd_count(h.pid);
  }
  int before = last_iteration(read_file(hosts[0].log));

  // The attacks, every port of every host at once. First what must reach the server (it is
  // admitted while the address is below its cap), then the idle flood above the caps.
  std::vector<drip> drips;
  std::vector<flood> floods; // bytes pushed until sent or refused
  std::vector<int> held;     // connections kept open until the end
  auto hello = bytes_of(pf::hello_bytes());
  auto announcing = [&](std::uint32_t total) {
    auto b = pf::hello_bytes();
    pf::write_header(b, pf::bulk, pf::first, 3, 0, total);
    return bytes_of(b);
  };
  std::string ten_mb(10u << 20, 'A');
  for (auto& h : hosts) {
    for (auto& [port, at] : h.ports) {
      for (int i = 0; i < 5; ++i) { // headers announcing too much
        std::string b = port == "peer"      ? announcing(0xfffffff0u)
                        : port == "inspect" ? std::string("\xff\xff\xff\xff", 4)
                                            : "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(100 * 1024, 'a');
        floods.push_back({open_to(at), b});
      }
      if (port == "peer")
        for (int i = 0; i < 5; ++i) { // 60 MB announced (within the limit), 128 KiB sent: held
          auto b = pf::hello_bytes();
          for (int k = 0; k < 2; ++k) {
            pf::write_header(b, pf::bulk, k == 0 ? pf::first : 0, 3, pf::fragment_bytes, 60'000'000);
            b.insert(b.end(), pf::fragment_bytes, 1);
          }
          floods.push_back({open_to(at), bytes_of(b)});
        }
      for (int i = 0; i < 3; ++i) { // one byte every 500 ms of something honest
        std::string b = port == "peer" ? hello
                        : port == "inspect" ? std::string("\x00\x00\x00\x20", 4) + std::string(32, 'q')
                                            : std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        drips.push_back({open_to(at), b});
      }
      floods.push_back({open_to(at), ten_mb}); // a 10 MB request line
      for (int i = 0; i < 40; ++i)             // the idle flood
        held.push_back(gwtf::test::connect_loopback(at));
    }
  }
  auto sample = [&] {
    for (auto& h : hosts) {
      REQUIRE_MESSAGE(::kill(h.pid, 0) == 0, h.name << " died under the attack");
      h.rss_peak = std::max(h.rss_peak, rss_mib(h.pid));
      h.fds_peak = std::max(h.fds_peak, fd_count(h.pid));
    }
  };
  auto started = std::chrono::steady_clock::now();
  auto next_drip = started;
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(15)) {
    for (auto& f : floods)
      if (f.sent < f.bytes.size() && !closed(f.fd))
        f.sent += push(f.fd, f.bytes, f.sent);
    if (std::chrono::steady_clock::now() >= next_drip) {
      next_drip += std::chrono::milliseconds(500);
      for (auto& d : drips) {
        if (d.done || (d.done = closed(d.fd)))
          continue;
        if (d.sent < d.bytes.size())
          d.sent += push(d.fd, d.bytes.substr(d.sent, 1));
      }
      sample();
    }
    if (std::all_of(drips.begin(), drips.end(), [](auto& d) { return d.done; }))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // pacing the attack, not a race
  }
  sample();
  // Every drip was cut by a handshake deadline: none finished its honest bytes in time.
  for (auto& d : drips)
    CHECK(d.done);

  for (auto& h : hosts) {
    INFO(h.name << ": RSS " << h.rss0 << " -> peak " << h.rss_peak << " MiB, descriptors " << h.fds0 << " -> peak "
                << h.fds_peak);
    CHECK(h.rss_peak <= h.rss0 + 256);
    // Everything from 127.0.0.1, so the caps per address bound what the attack holds.
    CHECK(h.fds_peak <= h.fds0 + peer_cap_per_address + 2 * served_cap_per_address + 8);
    // An honest connection is still taken (this host's hello comes back), the shell answers,
    // and so does /healthz.
    int honest = open_to(h.ports["peer"]);
    push(honest, hello);
    std::string got;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < hello.size() && std::chrono::steady_clock::now() < until) {
      pollfd p{honest, POLLIN, 0};
      char buf[64];
      if (::poll(&p, 1, 100) > 0) {
        auto n = ::recv(honest, buf, sizeof buf, 0);
        if (n <= 0)
          break;
        got.append(buf, static_cast<std::size_t>(n));
      }
    }
    CHECK(got.substr(0, hello.size()) == hello);
    ::close(honest);
    auto shell = gwtf::test::run_command("'" + std::string{GWTF_EXE} + "' shell 127.0.0.1:"
                                         + std::to_string(h.ports["inspect"]) + " -c status --timeout-ms 5000");
    CHECK_MESSAGE(shell.code == 0, shell.out);
    auto health = gwtf::test::run_command("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(h.ports["metrics"])
                                          + " && printf \"GET /healthz HTTP/1.1\\r\\n\\r\\n\" >&3 && cat <&3'");
    CHECK_MESSAGE(health.out.find("HTTP/1.1 200 OK") == 0, health.out);
  }
  // Training went on: the data holder finishes more iterations after the attacks.
  {
    gwtf::test::node_process watcher;
    watcher.log = hosts[0].log;
    auto target = "iteration " + std::to_string(std::max(before, last_iteration(read_file(hosts[0].log))) + 3) + " done at";
    auto text = watcher.wait_for(target, std::chrono::seconds(60));
    CHECK_MESSAGE(text.find(target) != std::string::npos, "no '" << target << "' in dh's log");
    watcher.log.clear();
  }
  // Each attack is one line per host (refusals are rate-limited per source and kind).
  for (auto& h : hosts) {
    auto log = read_file(h.log);
    INFO(h.name << "'s log:\n" << log.substr(log.size() > 6000 ? log.size() - 6000 : 0));
    for (auto what : {"peer port: refused the connection from 127.0.0.1:", "a frame announcing 4294967280 bytes",
                      "not a caf-gwtf peer", "no hello within", "inspect: refused the connection from 127.0.0.1:",
                      "bytes (at most 65536)", "no request within", "metrics: refused the connection from 127.0.0.1:",
                      "no complete request head in 8 KiB", "no whole request head within"}) {
      INFO(what);
      CHECK(count(log, what) == 1);
    }
  }
  for (auto& f : floods)
    ::close(f.fd);
  for (auto& d : drips)
    ::close(d.fd);
  for (int fd : held)
    if (fd >= 0)
      ::close(fd);
  ::kill(launch.pid, SIGINT);
  CHECK(launch.wait_exit(std::chrono::seconds(60)) >= 0);
  fs::remove_all(dir);
}
