#include <doctest/doctest.h>

#include "validation_helpers.hpp"

#include <map>
#include <string>

#include "actors/node_config.hpp"

using namespace gwtf::actors;

using gwtf::test::issues_of;

TEST_CASE("endpoints: host:port, [v6]:port, everything else rejected") {
  auto ep = parse_endpoint("10.0.0.1:4242");
  REQUIRE(ep);
  CHECK(ep->host == "10.0.0.1");
  CHECK(ep->port == 4242);
  auto v6 = parse_endpoint("[::1]:80");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 80);
  CHECK(parse_endpoint("host:0")->port == 0);
  for (const char* bad : {"", "host", ":42", "host:", "host:65536", "host:4x", "a:b:1", "[::1]80",
                          "[::1]:", "my host:1", "host:123456"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(parse_endpoint(bad).has_value());
  }
}

TEST_CASE("node config: peers need a real port, listen may use 0") {
  node_config n;
  CHECK(issues_of(n).empty());
  n.bootstrap = {"10.0.0.1:0", "10.0.0.2:4242"};
  n.scheduler_threads = 0;
  auto issues = issues_of(n);
  CHECK(issues.size() == 2);
  CHECK(issues["bootstrap[0]"].find("non-zero port") != std::string::npos);
  CHECK(issues.count("scheduler_threads") == 1);
}

TEST_CASE("host config: role decides the allowed stages") {
  host_config h;
  h.name = "r1";
  h.stage = 2;
  CHECK(issues_of(h, 3).empty());
  h.stage = -1; // join the bottleneck
  CHECK(issues_of(h, 3).empty());
  h.stage = 0; // relays never hold stage 0
  CHECK(issues_of(h, 3).count("stage") == 1);
  h.role = host_role::data_holder;
  CHECK(issues_of(h, 3).empty());
  h.stage = 1;
  CHECK(issues_of(h, 3).count("stage") == 1);
  h.stage = 0;
  h.name = "bad name!";
  h.capacity = 0;
  auto issues = issues_of(h, 3);
  CHECK(issues.count("name") == 1);
  CHECK(issues.count("capacity") == 1);
}

TEST_CASE("fault config: fields that do not apply to an action are rejected") {
  fault_config f;
  fault_event e;
  e.host = "r1";
  e.action = fault_action::join;
  e.phase = fault_phase::backward; // phase is for crashes only
  e.slowdown = 3;                  // slowdown is for slow links only
  f.script.push_back(e);
  f.crash_rate = 1.5;
  auto issues = issues_of(f);
  CHECK(issues.size() == 3);
  CHECK(issues.count("script[0].phase") == 1);
  CHECK(issues.count("script[0].slowdown") == 1);
  CHECK(issues.count("crash_rate") == 1);
}

TEST_CASE("node: plain TCP only on loopback unless node.insecure, TLS needs all three files") {
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.10.0.254"));
  CHECK(is_loopback_host("localhost"));
  CHECK(is_loopback_host("::1"));
  CHECK_FALSE(is_loopback_host("127.0.0.1.evil.com"));
  CHECK_FALSE(is_loopback_host("127.0.0"));
  CHECK_FALSE(is_loopback_host("127.0.0.256"));
  CHECK_FALSE(is_loopback_host("0.0.0.0"));
  CHECK_FALSE(is_loopback_host("10.0.0.1"));
  CHECK_FALSE(is_loopback_host("::"));
  auto issues = [](const node_config& n) {
    std::vector<std::string> out;
    n.validate([&](const std::string& k, const std::string& e) { out.push_back(k + ": " + e); });
    return out;
  };
  node_config n;
  n.listen = "0.0.0.0:4242";
  auto plain = issues(n);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].find("listen: a loopback address, got '0.0.0.0:4242': a non-loopback listen address needs node.tls")
        == 0);
  n.insecure = true;
  CHECK(issues(n).empty());
  n.insecure = false;
  n.tls = tls_config{"host.crt", "", "ca.crt", ""};
  auto tls = issues(n);
  REQUIRE(tls.size() == 1);
  CHECK(tls[0].rfind("tls.key: ", 0) == 0);
  n.tls->key = "host.key";
  CHECK(issues(n).empty());
  // The shell's port follows the same rule: TLS (the shell then needs a cluster certificate),
  // loopback, or node.insecure.
  n.inspect = "0.0.0.0:4243";
  CHECK(issues(n).empty());
  n.tls.reset();
  n.listen = "127.0.0.1:0";
  auto shell = issues(n);
  REQUIRE(shell.size() == 1);
  CHECK(shell[0].find("inspect: a loopback address, got '0.0.0.0:4243': a non-loopback inspect address needs node.tls") == 0);
  CHECK(shell[0].find("kubectl port-forward") != std::string::npos);
}
