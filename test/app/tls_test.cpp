// Mutual TLS between node processes (node.tls): a host refuses, with one log line naming the
// address and the reason, a peer speaking plain TCP, one without a certificate, one with
// another CA's, a plain caf-gwtf host, and a connection that never starts its handshake; it
// stays up. Each case is bounded. The certificates come from scripts/make-certs.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

#include "node_process.hpp"
#include "run_command.hpp"

namespace fs = std::filesystem;
using gwtf::test::node_process;
using gwtf::test::run_command;

namespace {

const std::string src = GWTF_SOURCE_DIR;

std::string node_yaml(const std::string& name, const std::string& tls, const std::string& bootstrap,
                      const std::string& listen = "127.0.0.1:0") {
  return "node: {listen: \"" + listen + "\"" + tls + (bootstrap.empty() ? "" : ", bootstrap: [" + bootstrap + "]") +
         "}\n"
         "hosts:\n  - {name: " + name + ", role: relay, stage: 1}\n"
         "model: {arch: gpt, layers: 2, hidden: 32, heads: 2, seq_len: 16, stages: 3}\n"
         "training: {iterations: 5, data_holders: [dh]}\n"
         "faults: {heartbeat_interval_ms: 250, connection_timeout_ms: 2000}\n";
}

std::uint16_t port_of(const std::string& log) {
  auto at = log.find("listening on 127.0.0.1:");
  REQUIRE_MESSAGE(at != std::string::npos, log);
  return static_cast<std::uint16_t>(std::stoi(log.substr(at + 23)));
}

// A lab CA with certificates for hosts r1, r2, r3 and the shell (certs/) and a stranger's CA
// with one for x1 (other/), from scripts/make-certs under `dir`; `tls(d, name)` is the node.tls
// part of a node.yaml line.
struct lab_certs {
  fs::path certs, other;
  explicit lab_certs(const fs::path& dir) : certs(dir / "certs"), other(dir / "other") {
    REQUIRE(run_command(src + "/scripts/make-certs '" + certs.string() + "' --hosts r1,r2,r3").code == 0);
    REQUIRE(run_command(src + "/scripts/make-certs '" + other.string() + "' --hosts x1").code == 0);
  }
  static std::string tls(const fs::path& d, const std::string& name) {
    return ", tls: {certificate: " + (d / (name + ".crt")).string() + ", key: " + (d / (name + ".key")).string() +
           ", ca: " + (d / "ca.crt").string() + "}";
  }
};

// Connects to 127.0.0.1:port, sends `bytes`, and closes (a plain TCP peer).
void plain_peer(std::uint16_t port, const std::string& bytes) {
  int fd = gwtf::test::connect_loopback(port);
  REQUIRE(fd >= 0);
  if (!bytes.empty())
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  if (bytes.empty())
    return; // left open and silent: the handshake timeout must close it (fd leaks to the end of the test)
  char buf[64];
  (void) ::read(fd, buf, sizeof(buf)); // until the host closes it
  ::close(fd);
}

} // namespace

TEST_CASE("tls: a host refuses plain TCP, no certificate, another CA's, a plain host and silence, and stays up, on both ports") {
  auto dir = fs::temp_directory_path() / ("gwtf-tls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  lab_certs lab{dir};
  auto &certs = lab.certs, &other = lab.other;
  auto tls = &lab_certs::tls;
  std::ofstream{dir / "r1.yaml"} << node_yaml("r1", tls(certs, "r1"), "");
  node_process node;
  REQUIRE(node.start(GWTF_EXE, dir / "r1.yaml", dir / "r1.log"));
  auto log = node.wait_for("listening on 127.0.0.1:");
  INFO("r1's log:\n" << log); // lazily: the log as it is at a failure
  CHECK(log.find("mutual TLS") != std::string::npos);
  auto port = port_of(log);
  auto at = "127.0.0.1:" + std::to_string(port);
  auto refused = "closed the connection from 127.0.0.1:"; // with the peer's port

  // Plain TCP (here: HTTP).
  plain_peer(port, "GET / HTTP/1.0\r\n\r\n");
  log = node.wait_for("not a TLS handshake (first byte 0x47)");
  CHECK(log.find(std::string{refused}) != std::string::npos);

  // TLS without a client certificate, and with another CA's (openssl's own client).
  auto s_client = "timeout 10 openssl s_client -connect " + at + " -CAfile '" + (certs / "ca.crt").string() + "'";
  run_command(s_client + " </dev/null"); // its exit code varies by OpenSSL version: the host's log tells
  log = node.wait_for("peer did not return a certificate");
  CHECK(log.find("peer did not return a certificate") != std::string::npos);
  run_command(s_client + " -cert '" + (other / "x1.crt").string() + "' -key '" + (other / "x1.key").string() +
              "' </dev/null");
  log = node.wait_for("certificate verify failed");
  CHECK(log.find("certificate verify failed") != std::string::npos);
  // The shell's certificate is the cluster CA's, but names no host: it cannot join.
  run_command(s_client + " -cert '" + (certs / "shell.crt").string() + "' -key '" + (certs / "shell.key").string() +
              "' </dev/null");
  log = node.wait_for("its certificate names no host name (a shell certificate");
  CHECK(log.find("its certificate names no host name (a shell certificate, caf-gwtf:shell): only a host "
                 "certificate may join") != std::string::npos);

  // A caf-gwtf host without TLS dials it: its plain hello is refused.
  std::ofstream{dir / "r2.yaml"} << node_yaml("r2", "", "\"" + at + "\"");
  node_process plain;
  REQUIRE(plain.start(GWTF_EXE, dir / "r2.yaml", dir / "r2.log"));
  log = node.wait_for("not a TLS handshake (first byte 0x47)");
  CHECK(log.find("not a TLS handshake (first byte 0x47)") != std::string::npos);
  auto plain_log = plain.wait_for("dial " + at + " failed");
  CHECK(plain_log.find("dial " + at + " failed") != std::string::npos);
  plain.stop();

  // A connection that opens and says nothing is dropped after the handshake timeout.
  plain_peer(port, "");
  log = node.wait_for("no TLS handshake within 2000 ms");
  CHECK(log.find("no TLS handshake within 2000 ms") != std::string::npos);

  // A cluster host with the right certificate is let in: both hosts bind each other.
  std::ofstream{dir / "r3.yaml"} << node_yaml("r3", tls(certs, "r3"), "\"" + at + "\"");
  node_process honest;
  REQUIRE(honest.start(GWTF_EXE, dir / "r3.yaml", dir / "r3.log"));
  log = node.wait_for("link: connected to r3");
  CHECK(log.find("link: connected to r3") != std::string::npos);
  CHECK(kill(node.pid, 0) == 0); // still up
  honest.stop();

  // The shell's port speaks mutual TLS too: with a cluster certificate the shell gets its
  // answer; without one, or with a stranger's, it gets an error and the host logs the refusal.
  auto ip = log.find("inspect: caf-gwtf shell 127.0.0.1:");
  REQUIRE(ip != std::string::npos);
  auto inspect_at = "127.0.0.1:" + std::to_string(std::stoi(log.substr(ip + 34)));
  CHECK(log.find(inspect_at + " --cert CERT --key KEY --ca CA (mutual TLS)") != std::string::npos);
  auto shell = "'" + std::string{GWTF_EXE} + "' shell " + inspect_at + " -c status --timeout-ms 5000";
  auto files = [](const fs::path& d, const std::string& ca_dir) { // the shell's own role
    return " --cert '" + (d / "shell.crt").string() + "' --key '" + (d / "shell.key").string() + "' --ca '" +
           (ca_dir + "/ca.crt") + "'";
  };
  auto good = run_command(shell + files(certs, certs.string()));
  INFO(good.out);
  CHECK(good.code == 0);
  CHECK(good.out.find("host: r1") != std::string::npos);
  auto bare = run_command(shell);
  CHECK(bare.code == 1);
  CHECK(bare.out.find("caf-gwtf shell: " + inspect_at + ": ") == 0);
  CHECK_MESSAGE(bare.out.find("the host closed the connection without answering (if it runs node.tls, the shell "
                              "needs --cert, --key and --ca)")
                  != std::string::npos,
                bare.out);
  log = node.wait_for("inspect: closed the connection from 127.0.0.1:");
  CHECK(log.find("inspect: closed the connection from 127.0.0.1:") != std::string::npos);
  auto stranger_shell = run_command(shell + " --cert '" + (other / "x1.crt").string() + "' --key '" +
                                    (other / "x1.key").string() + "' --ca '" + (other / "ca.crt").string() + "'");
  CHECK(stranger_shell.code == 1);
  CHECK(stranger_shell.out.find("certificate verify failed") != std::string::npos);
  // Files that do not belong together are refused before any connection, named by flag.
  auto mixed = run_command(shell + " --cert '" + (other / "x1.crt").string() + "' --key '" +
                           (other / "x1.key").string() + "' --ca '" + (certs / "ca.crt").string() + "'");
  CHECK(mixed.code == 2);
  CHECK(mixed.out == "caf-gwtf shell: --cert is not signed by --ca: unable to get local issuer certificate\n");
  node.stop();
  fs::remove_all(dir);
}

TEST_CASE("tls: a host with unusable TLS files exits 1 with one line naming the key") {
  auto dir = fs::temp_directory_path() / ("gwtf-tls-bad-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  REQUIRE(run_command(src + "/scripts/make-certs '" + (dir / "a").string() + "' 1").code == 0);
  REQUIRE(run_command(src + "/scripts/make-certs '" + (dir / "b").string() + "' 1").code == 0);
  // b's host certificate with a's CA: every peer would refuse it, so it does not start.
  std::ofstream{dir / "r.yaml"} << node_yaml("r", ", tls: {certificate: b/host-0.crt, key: b/host-0.key, ca: a/ca.crt}", "");
  auto r = run_command("timeout 20 '" + std::string{GWTF_EXE} + "' --config '" + (dir / "r.yaml").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.out == "caf-gwtf: node.tls.certificate is not signed by node.tls.ca: unable to get local issuer certificate\n");
  std::ofstream{dir / "m.yaml"} << node_yaml("r", ", tls: {certificate: a/host-0.crt, key: missing.key, ca: a/ca.crt}", "");
  r = run_command("timeout 20 '" + std::string{GWTF_EXE} + "' --config '" + (dir / "m.yaml").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.out == "caf-gwtf: node.tls.key: cannot read '" + (dir / "missing.key").string() + "'\n");
  // A certificate that names another host: the host would be refused by every peer, so it
  // does not start; node.tls.directory picks the file of the host that runs.
  std::ofstream{dir / "n.yaml"} << node_yaml("r", ", tls: {certificate: a/host-0.crt, key: a/host-0.key, ca: a/ca.crt}", "");
  r = run_command("timeout 20 '" + std::string{GWTF_EXE} + "' --config '" + (dir / "n.yaml").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.out == "caf-gwtf: node.tls.certificate ('" + (dir / "a/host-0.crt").string() + "') names caf-gwtf:host/host-0, "
                 "not this host 'r': peers would refuse it (issue one with scripts/make-certs DIR --hosts r)\n");
  std::ofstream{dir / "d.yaml"} << node_yaml("r", ", tls: {directory: a}", "");
  r = run_command("timeout 20 '" + std::string{GWTF_EXE} + "' --config '" + (dir / "d.yaml").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.out == "caf-gwtf: node.tls.certificate: cannot read '" + (dir / "a/r.crt").string() + "'\n");
  // Without TLS, a public listen address is refused at load, with the fix in the message.
  std::ofstream{dir / "p.yaml"} << node_yaml("r", "", "", "0.0.0.0:0");
  r = run_command("'" + std::string{GWTF_EXE} + "' --config '" + (dir / "p.yaml").string() + "' --check");
  CHECK(r.code == 1);
  CHECK(r.out.find("node.listen: expected a loopback address, got '0.0.0.0:0': a non-loopback listen address needs node.tls") != std::string::npos);
  r = run_command("'" + std::string{GWTF_EXE} + "' --config '" + (dir / "p.yaml").string() + "' --check --set node.insecure=true");
  CHECK(r.code == 0);
  fs::remove_all(dir);
}

TEST_CASE("tls: a host that dials a peer with another CA's certificate refuses it, and binds a cluster peer") {
  auto dir = fs::temp_directory_path() / ("gwtf-dial-tls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  lab_certs lab{dir};
  auto tls = &lab_certs::tls;
  auto address = [](const std::string& log) { return "127.0.0.1:" + std::to_string(port_of(log)); };
  // The stranger: a caf-gwtf host of another cluster CA, dialling nobody that answers.
  std::ofstream{dir / "x1.yaml"} << node_yaml("x1", tls(lab.other, "x1"), "\"127.0.0.1:9\"");
  node_process stranger;
  REQUIRE(stranger.start(GWTF_EXE, dir / "x1.yaml", dir / "x1.log"));
  auto stranger_at = address(stranger.wait_for("listening on 127.0.0.1:"));
  // r1 dials it: the guard's TLS client checks the stranger's certificate and closes.
  std::ofstream{dir / "r1.yaml"} << node_yaml("r1", tls(lab.certs, "r1"), "\"" + stranger_at + "\"");
  node_process node;
  REQUIRE(node.start(GWTF_EXE, dir / "r1.yaml", dir / "r1.log"));
  auto refused = "closed the connection to " + stranger_at + ": ";
  auto log = node.wait_for("certificate verify failed");
  INFO("r1's log:\n" << log);
  CHECK(log.find(refused) != std::string::npos);
  CHECK(log.find("certificate verify failed") != std::string::npos);
  CHECK(log.find("link: connected to x1") == std::string::npos);
  auto x1_log = gwtf::test::read_file(dir / "x1.log");
  CHECK(x1_log.find("link: connected to r1") == std::string::npos);
  // A cluster host that dials r1 is bound, and r1's answer goes back over that connection.
  std::ofstream{dir / "r2.yaml"} << node_yaml("r2", tls(lab.certs, "r2"), "\"" + address(log) + "\"");
  node_process honest;
  REQUIRE(honest.start(GWTF_EXE, dir / "r2.yaml", dir / "r2.log"));
  auto honest_log = honest.wait_for("link: connected to r1");
  CHECK(honest_log.find("link: connected to r1") != std::string::npos);
  CHECK(kill(node.pid, 0) == 0);
  honest.stop();
  node.stop();
  stranger.stop();
  fs::remove_all(dir);
}
