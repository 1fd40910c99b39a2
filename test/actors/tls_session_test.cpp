// Mutual TLS in memory: two tls_sessions hand each other their records, no sockets. The
// certificates come from scripts/make-certs (the same script labs use).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <openssl/ssl.h>
#include <unistd.h>

#include "actors/net/tls_session.hpp"

namespace fs = std::filesystem;
using namespace gwtf::actors;

namespace {

using bytes = std::vector<std::uint8_t>;

// Two CAs: the cluster's (host-0, host-1) and a stranger's (other-0). Made once per process.
struct temp_dir {
  fs::path path;
  ~temp_dir() { fs::remove_all(path); }
};

const fs::path& cert_dir() {
  static const temp_dir dir{[] {
    auto d = fs::temp_directory_path() / ("gwtf-tls-test-" + std::to_string(::getpid()));
    fs::remove_all(d);
    std::string script = std::string{GWTF_SOURCE_DIR} + "/scripts/make-certs";
    auto run = [&](const std::string& args) {
      auto cmd = script + " " + args + " >/dev/null";
      REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
    };
    run((d / "cluster").string() + " 2");
    run((d / "stranger").string() + " 1 other-");
    return d;
  }()};
  return dir.path;
}

tls_files host_files(const std::string& ca_dir, const std::string& name) {
  auto d = cert_dir();
  return {(d / ca_dir / (name + ".crt")).string(), (d / ca_dir / (name + ".key")).string(),
          (d / ca_dir / "ca.crt").string(), ""};
}

std::shared_ptr<tls_context> context(const tls_files& f, tls_side side) {
  std::string why;
  auto ctx = tls_context::make(f, side, why);
  INFO(why);
  REQUIRE(ctx);
  return ctx;
}

// Moves records between the two until neither has anything to say; returns each side's
// plaintext.
struct tls_pair {
  tls_session client;
  tls_session server;
  bytes client_plain, server_plain;
  bytes to_server, to_client;

  tls_pair(std::shared_ptr<tls_context> c, std::shared_ptr<tls_context> s) : client(c), server(s) {
    client.start(to_server);
  }

  void pump() {
    for (int round = 0; round < 100 && (!to_server.empty() || !to_client.empty()); ++round) {
      bytes a = std::move(to_server), b = std::move(to_client);
      to_server.clear();
      to_client.clear();
      if (!a.empty())
        server.from_network(a.data(), a.size(), server_plain, to_client);
      if (!b.empty())
        client.from_network(b.data(), b.size(), client_plain, to_server);
    }
  }
};

} // namespace

TEST_CASE("tls: two cluster hosts complete a mutual handshake and exchange data both ways") {
  auto server_ctx = context(host_files("cluster", "host-0"), tls_side::server);
  auto client_ctx = context(host_files("cluster", "host-1"), tls_side::client);
  tls_pair l{client_ctx, server_ctx};
  // Written before the handshake: held, then sent once it completes.
  bytes early{'h', 'i'};
  REQUIRE(l.client.to_peer(early.data(), early.size(), l.to_server));
  l.pump();
  INFO(l.server.error() << " / " << l.client.error());
  REQUIRE(l.server.established());
  REQUIRE(l.client.established());
  CHECK(l.server.peer_subject() == "/CN=host-1");
  CHECK(l.client.peer_subject() == "/CN=host-0");
  // Each end sees the host name the other's certificate carries (SAN URI caf-gwtf:host/NAME).
  CHECK(l.server.peer_identity().hosts == std::vector<std::string>{"host-1"});
  CHECK(l.client.peer_identity().hosts == std::vector<std::string>{"host-0"});
  CHECK_FALSE(l.server.peer_identity().shell);
  CHECK(server_ctx->own().hosts == std::vector<std::string>{"host-0"});
  CHECK(l.server_plain == early);
  // A large message both ways, byte for byte.
  std::mt19937 rng{7};
  bytes big(3 << 20);
  for (auto& b : big)
    b = static_cast<std::uint8_t>(rng());
  REQUIRE(l.server.to_peer(big.data(), big.size(), l.to_client));
  REQUIRE(l.client.to_peer(big.data(), 1000, l.to_server));
  l.pump();
  CHECK(l.client_plain == big);
  CHECK(l.server_plain.size() == 1002);
  CHECK_FALSE(l.server.failed());
  CHECK_FALSE(l.client.failed());
}

TEST_CASE("tls: the shell's certificate completes a handshake but names no host") {
  auto server_ctx = context(host_files("cluster", "host-0"), tls_side::server);
  auto shell_ctx = context(host_files("cluster", "shell"), tls_side::client);
  tls_pair l{shell_ctx, server_ctx};
  l.pump();
  REQUIRE(l.server.established());
  auto who = l.server.peer_identity();
  CHECK(who.hosts.empty());
  CHECK(who.shell);
  CHECK_FALSE(who.names("shell"));
  CHECK(who.describe() == "no host name (a shell certificate, caf-gwtf:shell)");
  // Before the handshake a session names nobody.
  tls_session fresh{server_ctx};
  CHECK(fresh.peer_identity().hosts.empty());
}

TEST_CASE("tls: a peer without a certificate, with another CA's or speaking plain TCP is refused") {
  auto server_ctx = context(host_files("cluster", "host-0"), tls_side::server);
  SUBCASE("no certificate") {
    auto bare = context({"", "", (cert_dir() / "cluster" / "ca.crt").string(), ""}, tls_side::client);
    tls_pair l{bare, server_ctx};
    l.pump();
    CHECK_FALSE(l.server.established());
    CHECK(l.server.error().find("peer did not return a certificate") != std::string::npos);
    // The client learns it from the server's alert.
    CHECK(l.client.failed());
  }
  SUBCASE("another CA's certificate") {
    // A stranger with its own CA that accepts any server.
    auto stranger = context(host_files("stranger", "other-0"), tls_side::client);
    SSL_CTX_set_verify(static_cast<SSL_CTX*>(stranger->native()), SSL_VERIFY_NONE, nullptr);
    tls_pair l{stranger, server_ctx};
    l.pump();
    CHECK_FALSE(l.server.established());
    INFO(l.server.error());
    CHECK(l.server.error().find("certificate verify failed") != std::string::npos);
    CHECK(l.server.error().find("(peer certificate: ") != std::string::npos);
  }
  SUBCASE("a server of another CA, seen from a cluster client") {
    auto other = host_files("stranger", "other-0");
    auto stranger_server = context(other, tls_side::server);
    auto ours = context(host_files("cluster", "host-1"), tls_side::client);
    tls_pair l{ours, stranger_server};
    l.pump();
    CHECK_FALSE(l.client.established());
    CHECK(l.client.error().find("certificate verify failed") != std::string::npos);
  }
  SUBCASE("plain TCP") {
    tls_session s{server_ctx};
    bytes plain, out;
    bytes basp(64, 0); // a BASP header starts with zeros
    CHECK_FALSE(s.from_network(basp.data(), basp.size(), plain, out));
    CHECK(s.error() == "not a TLS handshake (first byte 0x00): a plain TCP peer, refused");
    bytes http{'G', 'E', 'T', ' ', '/'};
    tls_session h{server_ctx};
    CHECK_FALSE(h.from_network(http.data(), http.size(), plain, out));
    CHECK(h.error().find("0x47") != std::string::npos);
    CHECK(plain.empty());
  }
}

TEST_CASE("tls: hostile records after a valid first byte fail the session, never crash it") {
  auto server_ctx = context(host_files("cluster", "host-0"), tls_side::server);
  std::uint64_t seed = 0x7151;
  INFO("seed " << seed);
  std::mt19937_64 rng{seed};
  int failed = 0;
  for (int round = 0; round < 200; ++round) {
    tls_session s{server_ctx};
    bytes junk(1 + rng() % 4096);
    for (auto& b : junk)
      b = static_cast<std::uint8_t>(rng());
    junk[0] = 22; // looks like a handshake record
    bytes plain, out;
    bool alive = s.from_network(junk.data(), junk.size(), plain, out);
    // Junk is either refused or (too short to judge) waits for more; never plaintext.
    CHECK(plain.empty());
    CHECK_FALSE(s.established());
    failed += alive ? 0 : 1;
    CHECK(alive != s.failed());
  }
  CHECK(failed > 150);
}

TEST_CASE("tls: bad identity files are refused at start with the key and the reason") {
  auto good = host_files("cluster", "host-0");
  std::string why;
  auto f = good;
  f.certificate = "/nonexistent/host.crt";
  CHECK_FALSE(tls_context::make(f, tls_side::server, why));
  CHECK(why == "node.tls.certificate: cannot read '/nonexistent/host.crt'");
  f = good;
  f.key = host_files("cluster", "host-1").key;
  CHECK_FALSE(tls_context::make(f, tls_side::server, why));
  INFO(why);
  CHECK(why.rfind("node.tls.key: ", 0) == 0);
  CHECK(why.find("is not the key of node.tls.certificate") != std::string::npos);
  f = host_files("stranger", "other-0");
  f.ca = good.ca;
  CHECK_FALSE(tls_context::make(f, tls_side::server, why));
  CHECK(why == "node.tls.certificate is not signed by node.tls.ca: unable to get local issuer certificate");
  f = good;
  f.ca = good.key; // a key is not a certificate
  CHECK_FALSE(tls_context::make(f, tls_side::server, why));
  CHECK(why.rfind("node.tls.ca: cannot load", 0) == 0);
  f = good;
  f.key.clear();
  CHECK_FALSE(tls_context::make(f, tls_side::server, why));
  CHECK(why == "node.tls.key: missing (the certificate needs its key)");
  CHECK_FALSE(tls_context::make({"", "", good.ca, ""}, tls_side::server, why));
  CHECK(why == "node.tls: a server needs a certificate and a key");
}
