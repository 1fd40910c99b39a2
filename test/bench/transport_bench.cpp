// Benchmark of node mode's transport (docs/benchmarks.md), side by side in one run: two
// processes on 127.0.0.1, one streaming MESSAGES frames of 16 MiB (the stage's bulk lane) to
// the other, which answers once it has them all; then 1000 round trips of a 64-byte frame
// (the control lane). Each through
//   raw:        a plain C++ socket pair (write / read into one 16 MiB buffer): the floor;
//   transport:  actors/net/peer_transport, plain TCP;
//   tls:        the same with mutual TLS (certificates from CERT_DIR, scripts/make-certs).
// Prints MB/s and the round trip per kind per round, and the medians' ratios to raw.
// usage: gwtf-bench-transport [MESSAGES=32] [ROUNDS=3] [CERT_DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/interfaces.hpp"
#include "actors/net/peer_transport.hpp"
#include "actors/system_setup.hpp"
#include "bench_stats.hpp"

using gwtf::bench::median;

using namespace gwtf;
using namespace gwtf::actors;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t big = 16u << 20;
constexpr std::size_t small = 64;
constexpr int trips = 1000;
constexpr std::int32_t control_svc = 0, bulk_svc = 3;

struct result {
  double mb_s = 0;
  double rtt_us = 0;
};


double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

bool read_all(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    auto k = ::read(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool write_all(int fd, const void* buf, std::size_t n) {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    auto k = ::write(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// --- raw sockets ------------------------------------------------------------------------
result run_raw(int messages) {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(ls, 1);
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  pid_t child = ::fork();
  if (child == 0) {
    int c = ::accept(ls, nullptr, nullptr);
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<char> buf(big);
    for (int i = 0; i < messages; ++i)
      if (!read_all(c, buf.data(), big))
        ::_exit(1);
    char ack = 1;
    write_all(c, &ack, 1);
    char ping[small];
    for (int i = 0; i < trips; ++i)
      if (!read_all(c, ping, small) || !write_all(c, ping, small))
        ::_exit(1);
    ::_exit(0);
  }
  ::close(ls);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf(big, 7);
  result r;
  auto t0 = clock_type::now();
  for (int i = 0; i < messages; ++i)
    write_all(fd, buf.data(), big);
  char ack = 0;
  read_all(fd, &ack, 1);
  r.mb_s = static_cast<double>(messages) * big / 1e6 / seconds_since(t0);
  char ping[small] = {};
  t0 = clock_type::now();
  for (int i = 0; i < trips; ++i) {
    write_all(fd, ping, small);
    read_all(fd, ping, small);
  }
  r.rtt_us = seconds_since(t0) / trips * 1e6;
  ::close(fd);
  ::waitpid(child, nullptr, 0);
  return r;
}

// --- the transport ----------------------------------------------------------------------
// Stands in for the link: counts bulk frames and answers when it has `expect` of them; echoes
// control frames (the receiver), or passes control frames to `waiter` (the sender).
struct stub_state {
  caf::actor transport;
  caf::actor waiter;
  int expect = 0;
  int got = 0;
};

caf::behavior stub(caf::stateful_actor<stub_state>* self, int expect, caf::actor waiter) {
  self->state.expect = expect;
  self->state.waiter = std::move(waiter);
  return {
    [self](start_atom, caf::actor transport) { self->state.transport = std::move(transport); },
    [self](net_atom, std::uint64_t conn, std::int32_t svc, bool, wire_frame& f) {
      auto& st = self->state;
      if (st.waiter) {
        self->send(st.waiter, done_atom::value);
        return;
      }
      if (svc == control_svc) {
        self->send(st.transport, send_atom::value, conn, control_svc, false, std::move(f));
        return;
      }
      if (++st.got == st.expect)
        self->send(st.transport, send_atom::value, conn, control_svc, false,
                   wire_frame{std::vector<std::uint8_t>(small, 1)});
    },
    [](closed_atom, std::uint64_t, const std::string&) {},
  };
}

struct tls_pair {
  std::shared_ptr<const tls_context> server, client;
};

peer_transport_options options(caf::actor link, const tls_pair* tls) {
  peer_transport_options o;
  o.host = "127.0.0.1";
  o.max_frame = big + 4096;
  o.host_name = "bench";
  o.link = std::move(link);
  if (tls) {
    o.tls = tls->server;
    o.tls_client = tls->client;
  }
  return o;
}

result run_transport(int messages, const tls_pair* tls) {
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0)
    std::exit(1);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fd[0]);
    {
      system_config cfg{node_config{}, fault_config{}, true};
      caf::actor_system sys{cfg};
      auto link = sys.spawn(stub, messages, caf::actor{});
      auto transport = spawn_peer_transport(sys, options(link, tls));
      caf::anon_send(link, start_atom::value, transport);
      caf::scoped_actor self{sys};
      std::uint16_t port = 0;
      self->request(transport, std::chrono::seconds(10), caf::get_atom::value)
        .receive([&](std::uint16_t p) { port = p; }, [&](caf::error&) {});
      write_all(pipe_fd[1], &port, sizeof port);
      ::pause(); // until the sender kills it
    }
    ::_exit(0);
  }
  ::close(pipe_fd[1]);
  std::uint16_t port = 0;
  read_all(pipe_fd[0], &port, sizeof port);
  result r;
  {
    system_config cfg{node_config{}, fault_config{}, true};
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    auto link = sys.spawn(stub, 0, caf::actor_cast<caf::actor>(self));
    auto transport = spawn_peer_transport(sys, options(link, tls));
    caf::anon_send(link, start_atom::value, transport);
    std::uint64_t conn = 0;
    self->request(transport, std::chrono::seconds(10), caf::connect_atom::value, std::string{"127.0.0.1"}, port)
      .receive([&](std::uint64_t c) { conn = c; },
               [&](caf::error& e) {
                 std::fprintf(stderr, "gwtf-bench-transport: dial failed: %s\n", sys.render(e).c_str());
                 std::exit(1);
               });
    std::vector<std::vector<std::uint8_t>> frames(static_cast<std::size_t>(messages),
                                                  std::vector<std::uint8_t>(big, 7));
    auto t0 = clock_type::now();
    for (auto& f : frames)
      self->send(transport, send_atom::value, conn, bulk_svc, false, wire_frame{std::move(f)});
    self->receive([](done_atom) {});
    r.mb_s = static_cast<double>(messages) * big / 1e6 / seconds_since(t0);
    t0 = clock_type::now();
    for (int i = 0; i < trips; ++i) {
      self->send(transport, send_atom::value, conn, control_svc, false,
                 wire_frame{std::vector<std::uint8_t>(small, 2)});
      self->receive([](done_atom) {});
    }
    r.rtt_us = seconds_since(t0) / trips * 1e6;
    for (auto& a : {link, transport})
      caf::anon_send_exit(a, caf::exit_reason::kill);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(pipe_fd[0]);
  return r;
}

} // namespace

int main(int argc, char** argv) {
  int messages = argc > 1 ? std::atoi(argv[1]) : 32;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  std::unique_ptr<tls_pair> tls;
  if (argc > 3) {
    std::string dir = argv[3];
    tls_files files{dir + "/host-0.crt", dir + "/host-0.key", dir + "/ca.crt", ""};
    std::string why;
    tls = std::make_unique<tls_pair>();
    tls->server = tls_context::make(files, tls_side::server, why);
    tls->client = tls_context::make(files, tls_side::client, why);
    if (!tls->server || !tls->client) {
      std::fprintf(stderr, "gwtf-bench-transport: %s\n", why.c_str());
      return 1;
    }
  }
  std::printf("# %d frames of 16 MiB, then %d round trips of %zu bytes, between two processes on 127.0.0.1\n",
              messages, trips, small);
  std::vector<double> raw_mb, raw_rtt, tr_mb, tr_rtt, tls_mb, tls_rtt;
  for (int i = 0; i < rounds; ++i) {
    auto raw = run_raw(messages);
    auto tr = run_transport(messages, nullptr);
    raw_mb.push_back(raw.mb_s);
    raw_rtt.push_back(raw.rtt_us);
    tr_mb.push_back(tr.mb_s);
    tr_rtt.push_back(tr.rtt_us);
    std::printf("round %d: raw %.0f MB/s, %.1f us; transport %.0f MB/s, %.1f us", i + 1, raw.mb_s, raw.rtt_us,
                tr.mb_s, tr.rtt_us);
    if (tls) {
      auto t = run_transport(messages, tls.get());
      tls_mb.push_back(t.mb_s);
      tls_rtt.push_back(t.rtt_us);
      std::printf("; tls %.0f MB/s, %.1f us", t.mb_s, t.rtt_us);
    }
    std::printf("\n");
  }
  std::printf("median: raw %.0f MB/s, %.1f us; transport %.0f MB/s (%.2fx raw), %.1f us round trip", median(raw_mb),
              median(raw_rtt), median(tr_mb), median(tr_mb) / median(raw_mb), median(tr_rtt));
  if (tls)
    std::printf("; tls %.0f MB/s (%.2fx raw), %.1f us round trip", median(tls_mb), median(tls_mb) / median(raw_mb),
                median(tls_rtt));
  std::printf("\n");
  return 0;
}
