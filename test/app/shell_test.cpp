// The inspection shell: the views a host composes from its actors' reports, how the shell
// renders them, and the shell against a real node process (answers, errors, a hostile client
// on the inspect port, a dead and a hung host bounded by the timeout).
#include <doctest/doctest.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "actors/inspect/inspect_view.hpp"
#include "app/run_command.hpp"
#include "app/tools/shell.hpp"
#include "node_process.hpp"

extern char** environ;

using namespace gwtf;
namespace fs = std::filesystem;
using json = nlohmann::json;
using gwtf::test::node_process;

namespace {

actors::inspect_parts sample_parts() {
  actors::inspect_parts p;
  p.host = "r1";
  p.parts["supervisor"] = R"({"mailbox":0,"stage":1,"restarts":2,"leaving":false,
    "handled":{"supervisor":4,"membership":90,"probe":75,"balancer":310,"compute":120}})";
  p.parts["membership"] = R"({"mailbox":1,"self":{"name":"r1","address":"10.0.0.1:4242"},
    "peers":[{"name":"dh","stage":0,"state":"alive"},{"name":"r2","stage":2,"state":"down"},
             {"name":"r2b","stage":2,"state":"alive"}]})";
  p.parts["balancer"] = R"({"mailbox":0,"spare":1,"flows":[
    {"id":7,"holder":"dh","prev":"dh","next":"r2b","built":true,"ring_cost_s":0.25},
    {"id":8,"holder":"dh","prev":"dh","next":"r2","built":false}],
    "links":[{"peer":"r2b","stage":2,"latency_ms":10.0,"bandwidth_mbps":100.0}]})";
  p.parts["probe"] = R"({"mailbox":0,"rtt_ms":{"r2b":21.5}})";
  p.parts["compute"] = R"({"mailbox":3,"stage":1,"role":"relay","ready":true,"iteration":12,"iterations":50,
    "draining":false,"replicas":["r1b"],"flows":1,"stashed":2,"checkpoint_iteration":10,"optimizer_steps":12,
    "last_aggregation":{"iteration":11,"ms_ago":40,"share_to_step_ms":15},
    "compute_s_total":7.5,"wasted_s_total":0.25,"resends":3,"peers_lost":1,
    "share_bytes_sent":4096,"butterfly_fallbacks":1,"exactly_once_violations":2,
    "microbatches":[{"microbatch":"12/0/1","state":"forwarded","prev":"dh","next":"r2b","attempt":0}]})";
  return p;
}

json answer(const std::string& query, const actors::inspect_parts& p) {
  auto a = actors::compose_view(query, p);
  INFO(query << ": " << a.body);
  REQUIRE(a.ok);
  auto j = json::parse(a.body, nullptr, false);
  REQUIRE(j.is_object());
  return j;
}

struct shell_run {
  int code = 0;
  std::string out, err;
};

shell_run shell(const std::string& target, const std::string& command, bool as_json, int timeout_ms = 5000) {
  app::cli_options o;
  o.action = app::cli_action::shell;
  o.target = target;
  o.command = command;
  o.json = as_json;
  o.timeout_ms = timeout_ms;
  std::ostringstream out, err;
  shell_run r;
  r.code = app::run_shell(o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// A TCP listener that never accepts (the kernel still completes connects): a hung host.
struct silent_listener {
  int fd = -1;
  std::uint16_t port = 0;
  silent_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~silent_listener() { ::close(fd); }
};

int connect_to(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// One HTTP request over a raw socket; the whole response (the server closes after it).
// `request` written in pieces as `parts` says (each a length; the rest goes last), then the answer.
std::string http(std::uint16_t port, const std::string& request, std::vector<std::size_t> parts = {}) {
  int fd = connect_to(port);
  std::size_t at = 0;
  parts.push_back(request.size());
  for (auto n : parts) {
    n = std::min(n, request.size() - at);
    REQUIRE(::send(fd, request.data() + at, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n));
    at += n;
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// Parses a Prometheus text exposition with the reference client's parser (Debian's
// python3-prometheus-client); prints "name{labels} value" per sample, or the parser's error.
std::string prometheus_parse(const std::string& text, const fs::path& dir) {
  std::ofstream{dir / "metrics.txt"} << text;
  std::ofstream{dir / "parse.py"}
    << "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n"
       "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
       "    for s in f.samples:\n"
       "        print(s.name + repr(sorted(s.labels.items())) + ' ' + repr(s.value))\n";
  std::string cmd = "/usr/bin/python3 " + (dir / "parse.py").string() + " " + (dir / "metrics.txt").string() + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  CHECK(::pclose(p) == 0);
  return out;
}

// The port a running node's start lines name after `marker` (0: none within the wait).
std::uint16_t start_inspectable_port(const node_process& node, const std::string& marker) {
  auto text = node.wait_for(marker);
  auto at = text.find(marker);
  return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(text.substr(at + marker.size())));
}

// A relay node with the inspection server (and metrics, when asked) in `dir`; returns the port
// the start line names after `marker` (0 when it does not come up).
std::uint16_t start_inspectable(node_process& node, const fs::path& dir, const std::string& name, int stage,
                                bool metrics, bool control = false) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream{dir / "node.yaml"} << "node: {listen: \"127.0.0.1:0\", inspect: \"127.0.0.1:0\""
                                   << (metrics ? ", metrics: \"127.0.0.1:0\"" : "")
                                   << (control ? ", inspect_control: true" : "") << "}\n"
                                   << "hosts:\n  - {name: " << name << ", role: relay, stage: " << stage << "}\n"
                                   << "model: {arch: gpt, layers: 2, hidden: 32, heads: 2, seq_len: 16, stages: 3}\n"
                                      "training: {iterations: 5, data_holders: [dh]}\n";
  if (!node.start(GWTF_EXE, dir / "node.yaml", dir / "node.log"))
    return 0;
  return start_inspectable_port(node, "inspect: caf-gwtf shell 127.0.0.1:");
}

} // namespace

TEST_CASE("metrics view: the Prometheus text passes the reference parser, values and escaped labels intact") {
  auto dir = fs::temp_directory_path() / ("gwtf-metrics-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto p = sample_parts();
  p.parts["probe"] = R"({"mailbox":0,"rtt_ms":{"we\"ird\\peer":21.5}})";
  auto a = actors::compose_view("metrics", p);
  REQUIRE(a.ok);
  auto parsed = prometheus_parse(a.body, dir);
  INFO(a.body);
  INFO(parsed);
  CHECK(parsed.find("gwtf_iteration[] 12.0") != std::string::npos);
  CHECK(parsed.find("gwtf_flows[('state', 'built')] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_flows[('state', 'half_built')] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_peers[('state', 'down')] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_actor_mailbox[('actor', 'compute')] 3.0") != std::string::npos);
  CHECK(parsed.find("gwtf_actor_restarts_total[] 2.0") != std::string::npos);
  CHECK(parsed.find("gwtf_link_bandwidth_bytes_per_second[('peer', 'r2b')] 12500000.0") != std::string::npos);
  CHECK(parsed.find("gwtf_link_rtt_seconds[('peer', 'we\"ird\\\\peer')] 0.0215") != std::string::npos);
  CHECK(parsed.find("gwtf_microbatches[('state', 'forwarded')] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_checkpoint_iteration[] 10.0") != std::string::npos);
  CHECK(parsed.find("gwtf_compute_seconds_total[] 7.5") != std::string::npos);
  CHECK(parsed.find("gwtf_wasted_compute_seconds_total[] 0.25") != std::string::npos);
  CHECK(parsed.find("gwtf_resends_total[] 3.0") != std::string::npos);
  CHECK(parsed.find("gwtf_peers_lost_total[] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_share_bytes_sent_total[] 4096.0") != std::string::npos);
  CHECK(parsed.find("gwtf_butterfly_fallbacks_total[] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_exactly_once_violations_total[] 2.0") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("inspect views: status combines the actors' reports, each query picks its part") {
  auto p = sample_parts();
  auto s = answer("status", p);
  CHECK(s["host"] == "r1");
  CHECK(s["stage"] == 1);
  CHECK(s["iteration"] == 12);
  CHECK(s["peers_alive"] == 2);
  CHECK(s["peers_down"] == 1);
  CHECK(s["flows"] == 1); // built flows only
  CHECK(s["restarts"] == 2);
  CHECK(s["address"] == "10.0.0.1:4242");
  CHECK(s["checkpoint_iteration"] == 10);
  CHECK(answer("stage", p)["checkpoint_iteration"] == 10);
  auto links = answer("links", p)["links"];
  REQUIRE(links.size() == 1);
  CHECK(links[0]["rtt_ms"] == 21.5); // the probe's round trip joined to the balancer's estimate
  auto graph = answer("graph", p)["dot"].get<std::string>();
  CHECK(graph.find("\"dh\" -> \"r1\"") != std::string::npos);
  CHECK(graph.find("\"r1\" -> \"r2b\"") != std::string::npos);
  CHECK(graph.find("half-built") != std::string::npos);
  auto actors = answer("actors", p)["actors"];
  REQUIRE(actors.size() == 5);
  CHECK(actors[4]["actor"] == "compute");
  CHECK(actors[4]["mailbox"] == 3);
  CHECK(answer("microbatches", p)["microbatches"][0]["microbatch"] == "12/0/1");
  CHECK(answer("stage", p)["replicas"][0] == "r1b");
  CHECK(answer("stage", p)["optimizer_steps"] == 12);
  CHECK(answer("stage", p)["last_aggregation"]["share_to_step_ms"] == 15);
  CHECK(answer("hosts", p)["peers"].size() == 3);
  // inspect ACTOR: that actor's whole report.
  auto c = answer("inspect compute", p);
  CHECK(c["actor"] == "compute");
  CHECK(c["report"]["iteration"] == 12);
  CHECK(c["report"]["mailbox"] == 3);
  CHECK(c["handled"] == 120); // from the host's meters
  auto none = actors::compose_view("inspect scheduler", p);
  CHECK_FALSE(none.ok);
  CHECK(none.body == "inspect: no actor named 'scheduler': r1's actors are supervisor, membership, probe, balancer, compute");
  p.parts.erase("probe");
  p.missing["probe"] = "busy: no answer within the timeout";
  auto busy = actors::compose_view("inspect probe", p);
  CHECK_FALSE(busy.ok);
  CHECK(busy.body.find("the probe actor of r1 did not answer (busy") != std::string::npos);
}

TEST_CASE("inspect views: actors with kind, messages handled and restarts, sorted on request") {
  auto p = sample_parts();
  auto plain = answer("actors", p)["actors"];
  REQUIRE(plain.size() == 5);
  CHECK(plain[0]["actor"] == "supervisor"); // the host's order
  CHECK(plain[0]["restarts"] == 0);          // the supervisor is never restarted
  CHECK(plain[4]["kind"] == "relay stage");
  CHECK(plain[4]["handled"] == 120);
  CHECK(plain[4]["restarts"] == 2);
  auto busiest = answer("actors handled", p)["actors"];
  std::vector<std::string> order;
  for (auto& a : busiest)
    order.push_back(a["actor"]);
  CHECK(order == std::vector<std::string>{"balancer", "compute", "membership", "probe", "supervisor"});
  CHECK(answer("actors mailbox", p)["actors"][0]["actor"] == "compute"); // 3 waiting
  CHECK(answer("actors name", p)["actors"][0]["actor"] == "balancer");
  auto bad = actors::compose_view("actors size", p);
  CHECK_FALSE(bad.ok);
  CHECK(bad.body == "actors: sort by name, mailbox or handled, got 'size'");
  // An actor that did not answer sorts last by mailbox, and still shows what it handled.
  p.parts.erase("compute");
  p.missing["compute"] = "busy: no answer within the timeout";
  auto by_mailbox = answer("actors mailbox", p)["actors"];
  CHECK(by_mailbox[4]["actor"] == "compute");
  CHECK(by_mailbox[4]["handled"] == 120);
  auto text = actors::compose_view("metrics", sample_parts()).body;
  CHECK(text.find("gwtf_actor_messages_handled_total{actor=\"balancer\"} 310\n") != std::string::npos);
}

TEST_CASE("inspect queries: trace and @HOST parse strictly, and say how long they may take") {
  auto t = actors::parse_trace("trace balancer 3");
  REQUIRE(std::holds_alternative<actors::trace_request>(t));
  CHECK(std::get<actors::trace_request>(t).actor == "balancer");
  CHECK(std::get<actors::trace_request>(t).seconds == 3);
  CHECK(std::get<actors::trace_request>(actors::parse_trace("trace probe")).seconds == 5);
  for (auto [q, says] : {std::pair{"trace", "expected trace ACTOR [SECONDS]"},
                         std::pair{"trace sched", "no actor named 'sched'"},
                         std::pair{"trace probe 0", "SECONDS: expected a whole number from 1 to 60"},
                         std::pair{"trace probe 61", "from 1 to 60"},
                         std::pair{"trace probe 2s", "from 1 to 60"},
                         std::pair{"trace probe 2 3", "expected trace ACTOR [SECONDS]"}}) {
    INFO(q);
    auto r = actors::parse_trace(q);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(std::get<std::string>(r).find(says) != std::string::npos);
  }
  CHECK_FALSE(actors::parse_hop("status").has_value());
  auto h = actors::parse_hop("@r2-oregon   flows");
  REQUIRE(h.has_value());
  REQUIRE(std::holds_alternative<actors::hop_request>(*h));
  CHECK(std::get<actors::hop_request>(*h).host == "r2-oregon");
  CHECK(std::get<actors::hop_request>(*h).query == "flows");
  for (auto q : {"@", "@r2", "@r2 ", "@ flows", "@r2 @r3 flows"}) {
    INFO(q);
    auto r = actors::parse_hop(q);
    REQUIRE(r.has_value());
    CHECK(std::holds_alternative<std::string>(*r));
  }
  CHECK(actors::extra_answer_ms("trace compute 7") == 7000);
  CHECK(actors::extra_answer_ms("@r2 trace compute 2") == 2000);
  CHECK(actors::extra_answer_ms("@r2 flows") == 0);
  CHECK(actors::extra_answer_ms("trace compute 99") == 0); // refused at once
  auto j = json::parse(actors::compose_trace("r1", {"probe", 2}, 9, {{1500, "link", "deliver \"r2\" pong (40 B)"}}, 3));
  CHECK(j["host"] == "r1");
  CHECK(j["handled"] == 9);
  CHECK(j["per_second"] == 4.5);
  CHECK(j["not_recorded"] == 3);
  CHECK(j["messages"][0]["t_ms"] == 1.5);
  CHECK(j["messages"][0]["from"] == "link");
}

TEST_CASE("embedded shell routing: the attached host, @HOST, a gone host, controls only when allowed") {
  std::vector<std::string> live{"dh-a", "r1", "r2"};
  auto route = [&](const std::string& q, const std::string& attached, bool control) {
    return actors::route_front(q, attached, live, control);
  };
  auto plain = route("flows", "dh-a", false);
  REQUIRE(std::holds_alternative<actors::front_route>(plain));
  CHECK(std::get<actors::front_route>(plain).host == "dh-a");
  CHECK(std::get<actors::front_route>(plain).query == "flows");
  auto hop = route("@r2 trace compute 2", "dh-a", false);
  REQUIRE(std::holds_alternative<actors::front_route>(hop));
  CHECK(std::get<actors::front_route>(hop).host == "r2");
  CHECK(std::get<actors::front_route>(hop).query == "trace compute 2");
  auto gone = route("status", "dh-b", false); // the attached host crashed: the next answers
  REQUIRE(std::holds_alternative<actors::front_route>(gone));
  CHECK(std::get<actors::front_route>(gone).host == "dh-a");
  auto stranger = route("@r9 status", "dh-a", false);
  REQUIRE(std::holds_alternative<std::string>(stranger));
  CHECK(std::get<std::string>(stranger) == "no running host named 'r9' in this embedded cluster (running: dh-a, r1, r2)");
  auto refused = route("@r1 crash", "dh-a", false);
  REQUIRE(std::holds_alternative<std::string>(refused));
  CHECK(std::get<std::string>(refused).rfind("crash: refused: this cluster runs with node.inspect_control: false", 0) == 0);
  auto allowed = route("@r1 slow-link r2 4", "dh-a", true);
  REQUIRE(std::holds_alternative<actors::front_route>(allowed));
  CHECK(std::get<actors::front_route>(allowed).host == "r1");
  CHECK(std::holds_alternative<std::string>(actors::route_front("status", "dh-a", {}, true)));
  CHECK(std::holds_alternative<std::string>(route("@r1 @r2 status", "dh-a", true)));
}

TEST_CASE("inspect views: an unknown query or an actor that did not answer is an error naming it") {
  auto p = sample_parts();
  auto bad = actors::compose_view("flow", p);
  CHECK_FALSE(bad.ok);
  CHECK(bad.body.find("unknown query 'flow'") != std::string::npos);
  CHECK(bad.body.find("flows") != std::string::npos); // lists what it answers
  p.parts.erase("balancer");
  p.missing["balancer"] = "busy: no answer within the timeout";
  auto f = actors::compose_view("flows", p);
  CHECK_FALSE(f.ok);
  CHECK(f.body.find("balancer actor of r1 did not answer (busy") != std::string::npos);
  p.parts["compute"] = "not json {";
  auto st = actors::compose_view("stage", p);
  CHECK_FALSE(st.ok); // a part that does not parse counts as missing
  auto a = answer("actors", p)["actors"];
  CHECK(a[3]["state"] == "busy: no answer within the timeout");
}

TEST_CASE("shell rendering: scalars as lines, lists of objects as aligned tables, the graph as DOT") {
  auto text = app::render_answer("flows", R"({"host":"r1","spare":1,"flows":[
    {"id":7,"holder":"dh","next":"r2b","ring_cost_s":0.25},{"id":18,"holder":"dh-long-name","next":"r2"}]})");
  INFO(text);
  CHECK(text.find("host: r1\n") != std::string::npos);
  CHECK(text.find("flows (2):") != std::string::npos);
  CHECK(text.find("  id  holder        next  ring_cost_s\n") != std::string::npos);
  CHECK(text.find("  18  dh-long-name  r2    -\n") != std::string::npos); // a missing cell is '-'
  CHECK(app::render_answer("graph", R"({"dot":"digraph g {}\n"})") == "digraph g {}\n");
  CHECK(app::render_answer("status", "not json") == "not json\n");
}

TEST_CASE("shell against a node process: answers, errors, a hostile client, dead and hung hosts") {
  auto dir = fs::temp_directory_path() / ("gwtf-shell-" + std::to_string(::getpid()));
  node_process node;
  auto port = start_inspectable(node, dir, "r1", 1, true);
  INFO(gwtf::test::read_file(dir / "node.log"));
  REQUIRE(port != 0);
  auto target = "127.0.0.1:" + std::to_string(port);

  auto status = shell(target, "status", true);
  INFO(status.err);
  REQUIRE(status.code == 0);
  auto s = json::parse(status.out);
  CHECK(s["host"] == "r1");
  CHECK(s["role"] == "relay");
  CHECK(s["stage"] == 1);
  CHECK(s["iteration"] == 0);
  CHECK(s["peers_alive"] == 0); // nobody else runs

  auto actors = shell(target, "actors", false);
  CHECK(actors.code == 0);
  CHECK(actors.out.find("membership") != std::string::npos);
  CHECK(actors.out.find("running") != std::string::npos);
  auto membership = shell(target, "inspect membership", true);
  INFO(membership.err);
  CHECK(membership.code == 0);
  CHECK(json::parse(membership.out)["actor"] == "membership");
  CHECK(json::parse(membership.out)["report"].is_object());
  auto no_actor = shell(target, "inspect", false);
  CHECK(no_actor.code == 1);
  CHECK(no_actor.err.find("expected inspect ACTOR, ACTOR one of supervisor, membership") != std::string::npos);

  // Metrics over HTTP: parsed by the reference parser; health, readiness, errors.
  auto mport = start_inspectable_port(node, "metrics: http://127.0.0.1:");
  REQUIRE(mport != 0);
  auto page = http(mport, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(page.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(page.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  auto body = page.substr(page.find("\r\n\r\n") + 4);
  auto parsed = prometheus_parse(body, dir);
  INFO(parsed);
  CHECK(parsed.find("gwtf_up[] 1.0") != std::string::npos);
  CHECK(parsed.find("gwtf_host_info[('host', 'r1'), ('role', 'relay'), ('stage', '1')] 1.0") != std::string::npos);
  CHECK(http(mport, "GET /healthz HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
  CHECK(http(mport, "GET /readyz HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0); // declared stage: ready
  CHECK(http(mport, "GET /nope HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(http(mport, "POST /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
  CHECK(http(mport, "garbage\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
  CHECK(http(mport, std::string(9000, 'x')).rfind("HTTP/1.1 400", 0) == 0); // no complete head in 8 KiB
  { // ... answered once however much more comes on that connection (was one 400 per read)
    auto flood = http(mport, std::string(40000, 'x'));
    std::size_t answers = 0;
    for (auto at = flood.find("HTTP/1.1 400"); at != std::string::npos; at = flood.find("HTTP/1.1 400", at + 1))
      ++answers;
    CHECK(answers == 1);
  }
  // A head in pieces (bash's printf to /dev/tcp in the image's HEALTHCHECK writes it so) is
  // answered once complete: every piece is taken, none meets a closed connection.
  for (int round = 0; round < 20; ++round)
    CHECK(http(mport, "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n", {23, 17}).rfind("HTTP/1.1 200", 0) == 0);
  // The image's HEALTHCHECK itself, as the container runtime runs it (SIGPIPE not ignored).
  for (int round = 0; round < 10; ++round) {
    auto hc = gwtf::test::run_command("GWTF_METRICS_PORT=" + std::to_string(mport) + " env --default-signal=PIPE bash '"
                                      + std::string{GWTF_SOURCE_DIR} + "/deploy/healthcheck'");
    CHECK(hc.code == 0);
  }

  auto refused = shell(target, "drain", false); // a read-only shell by default
  CHECK(refused.code == 1);
  CHECK(refused.err.find("drain: refused: this host runs with node.inspect_control: false") != std::string::npos);

  auto bad = shell(target, "flow", false);
  CHECK(bad.code == 1);
  CHECK(bad.err.find("unknown query 'flow'") != std::string::npos);

  // A hostile client: a frame header announcing 1 GiB. The connection is closed and logged;
  // the host still answers.
  {
    int fd = connect_to(port);
    std::uint8_t header[4] = {0x40, 0, 0, 0};
    REQUIRE(::send(fd, header, 4, MSG_NOSIGNAL) == 4);
    char byte = 0;
    CHECK(::recv(fd, &byte, 1, 0) == 0); // closed by the host
    ::close(fd);
  }
  {
    int fd = connect_to(port); // garbage of a plausible length: not a wire frame
    std::uint8_t junk[12] = {0, 0, 0, 8, 'g', 'a', 'r', 'b', 'a', 'g', 'e', '!'};
    REQUIRE(::send(fd, junk, sizeof junk, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof junk));
    char byte = 0;
    CHECK(::recv(fd, &byte, 1, 0) == 0);
    ::close(fd);
  }
  auto log = node.wait_for("inspect: closed the connection from 127.0.0.1:", std::chrono::seconds(5));
  log = node.wait_for("bad frame", std::chrono::seconds(5));
  CHECK(log.find("inspect: closed the connection from 127.0.0.1:") != std::string::npos);
  CHECK(log.find("a frame of 1073741824 bytes") != std::string::npos);
  CHECK(shell(target, "stage", true).code == 0);

  // The host is gone: a one-line error, quickly.
  node.stop();
  auto dead = shell(target, "status", false, 2000);
  CHECK(dead.code == 1);
  CHECK(dead.err.find("cannot connect") != std::string::npos);

  // A host that accepts and never answers: the timeout ends the wait.
  silent_listener hung;
  auto t0 = std::chrono::steady_clock::now();
  auto h = shell("127.0.0.1:" + std::to_string(hung.port), "status", false, 300);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(h.code == 1);
  CHECK(h.err.find("no answer within the timeout") != std::string::npos);
  CHECK(took < std::chrono::seconds(3));
  fs::remove_all(dir);
}

namespace {

std::string run_out(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr)
    return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  ::pclose(p);
  return out;
}

std::size_t occurrences(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

// Polls the tmux pane (bounded) until it shows `what` at least `times` times; returns the pane.
std::string pane_until(const std::string& session, const std::string& what, std::chrono::seconds limit,
                       std::size_t times = 1) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto pane = run_out("tmux capture-pane -p -t " + session + " 2>&1");
    if (occurrences(pane, what) >= times || std::chrono::steady_clock::now() > deadline)
      return pane;
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // polling a screen, not a race
  }
}

} // namespace

TEST_CASE("interactive shell in a terminal: tab completion, answers, history, errors, quit") {
  auto dir = fs::temp_directory_path() / ("gwtf-tty-" + std::to_string(::getpid()));
  node_process node;
  auto port = start_inspectable(node, dir, "r7", 2, false);
  REQUIRE(port != 0);
  auto target = "127.0.0.1:" + std::to_string(port);
  auto session = "gwtf-shell-" + std::to_string(::getpid());
  struct tmux_session {
    std::string name;
    ~tmux_session() { run_out("tmux kill-session -t " + name + " 2>/dev/null"); }
  } guard{session};
  auto keys = [&](const std::string& k) { run_out("tmux send-keys -t " + session + " " + k); };
  run_out("tmux new-session -d -x 160 -y 50 -s " + session + " '" + std::string{GWTF_EXE} + " shell " + target
          + "; echo shell exited $?; sleep 60'");
  auto pane = pane_until(session, "type help for the commands", std::chrono::seconds(10));
  INFO(pane);
  REQUIRE(pane.find(target + ">") != std::string::npos); // the prompt (capture-pane trims its space)
  keys("'sta' Tab");      // ambiguous: stage, status
  keys("'tu' Tab Enter"); // completes "status"
  pane = pane_until(session, "role: relay", std::chrono::seconds(10));
  CHECK(pane.find("status") != std::string::npos);
  CHECK(pane.find("stage: 2") != std::string::npos);
  keys("'flowz' Enter");
  pane = pane_until(session, "unknown query 'flowz'", std::chrono::seconds(10));
  CHECK(pane.find("unknown query 'flowz'") != std::string::npos);
  keys("Up Up Enter"); // history: status again
  pane = pane_until(session, "role: relay", std::chrono::seconds(10), 2);
  CHECK(occurrences(pane, "role: relay") == 2);
  keys("'trace memb' Tab '1' Enter"); // an actor name completes after trace
  pane = pane_until(session, "actor: membership", std::chrono::seconds(10));
  CHECK(pane.find("> trace membership") != std::string::npos);
  CHECK(pane.find("per_second:") != std::string::npos);
  keys("'top' Enter"); // refreshes until Enter
  pane = pane_until(session, "Enter stops", std::chrono::seconds(10));
  CHECK(pane.find("top: r7") != std::string::npos);
  keys("Enter");
  keys("'stage' Enter"); // the prompt is back
  pane = pane_until(session, "replicas", std::chrono::seconds(10));
  CHECK(pane.find("replicas") != std::string::npos);
  keys("'quit' Enter");
  pane = pane_until(session, "shell exited 0", std::chrono::seconds(10));
  CHECK(pane.find("shell exited 0") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("lab controls with node.inspect_control: drain is a graceful leave (exit 0), crash a SIGKILL") {
  for (std::string control : {"drain", "crash"}) {
    INFO(control);
    auto dir = fs::temp_directory_path() / ("gwtf-control-" + control + "-" + std::to_string(::getpid()));
    node_process node;
    auto port = start_inspectable(node, dir, "r1", 1, false, true);
    REQUIRE(port != 0);
    auto r = shell("127.0.0.1:" + std::to_string(port), control, true);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["host"] == "r1");
    // The node process ends by itself; bounded by the test's timeout.
    int status = 0;
    REQUIRE(waitpid(node.pid, &status, 0) == node.pid);
    node.pid = -1;
    INFO(gwtf::test::read_file(dir / "node.log"));
    if (control == "drain") {
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    } else {
      CHECK(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == SIGKILL);
    }
    fs::remove_all(dir);
  }
}

TEST_CASE("lab control slow-link PEER FACTOR: checked arguments, refused without emulation or for a stranger, done for a peer") {
  auto base = fs::temp_directory_path() / ("gwtf-slow-link-" + std::to_string(::getpid()));
  fs::remove_all(base);
  // Checked by the shell before any connection: nothing listens on port 1.
  for (auto [cmd, says] : {std::pair{"slow-link r2", "expected slow-link PEER FACTOR"},
                           std::pair{"slow-link r2 0.5", "FACTOR: expected a number from 1 to 1000"},
                           std::pair{"slow-link r2 4 5", "expected slow-link PEER FACTOR"},
                           std::pair{"slow-link r2 fast", "FACTOR: expected a number from 1 to 1000"}}) {
    INFO(cmd);
    auto r = shell("127.0.0.1:1", cmd, false, 500);
    CHECK(r.code == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
  {
    node_process plain;
    auto port = start_inspectable(plain, base / "plain", "r1", 1, false, true);
    REQUIRE(port != 0);
    auto r = shell("127.0.0.1:" + std::to_string(port), "slow-link r2 4", false);
    CHECK(r.code == 1);
    CHECK(r.err.find("slow-link: this host emulates no network (emulation.network is not set)") != std::string::npos);
  }
  // Two emulated relays that know each other: r1 slows its link to r2.
  auto network = std::string{GWTF_SOURCE_DIR} + "/configs/networks/aws-8.yaml";
  auto write = [&](const fs::path& dir, const std::string& name, int stage, const std::string& region,
                   const std::string& bootstrap) {
    fs::create_directories(dir);
    std::ofstream{dir / "node.yaml"} << "node: {listen: \"127.0.0.1:0\", inspect: \"127.0.0.1:0\", inspect_control: true"
                                     << (bootstrap.empty() ? "" : ", bootstrap: [\"" + bootstrap + "\"]") << "}\n"
                                     << "hosts:\n  - {name: " << name << ", role: relay, stage: " << stage
                                     << ", region: " << region << "}\n"
                                     << "model: {arch: gpt, layers: 2, hidden: 32, heads: 2, seq_len: 16, stages: 3}\n"
                                     << "training: {iterations: 5, data_holders: [dh]}\n"
                                     << "emulation: {network: " << network << ", time_scale: 0.1}\n";
  };
  node_process r1, r2;
  write(base / "r1", "r1", 1, "virginia", "");
  REQUIRE(r1.start(GWTF_EXE, base / "r1" / "node.yaml", base / "r1" / "node.log"));
  auto listen_marker = std::string{"listening on 127.0.0.1:"};
  auto text = r1.wait_for(listen_marker);
  REQUIRE(text.find(listen_marker) != std::string::npos);
  auto r1_port = std::stoi(text.substr(text.find(listen_marker) + listen_marker.size()));
  auto inspect = start_inspectable_port(r1, "inspect: caf-gwtf shell 127.0.0.1:");
  REQUIRE(inspect != 0);
  write(base / "r2", "r2", 2, "frankfurt", "127.0.0.1:" + std::to_string(r1_port));
  REQUIRE(r2.start(GWTF_EXE, base / "r2" / "node.yaml", base / "r2" / "node.log"));
  INFO(gwtf::test::read_file(base / "r1" / "node.log"));
  INFO(gwtf::test::read_file(base / "r2" / "node.log"));
  REQUIRE(r1.wait_for("link: connected to r2").find("link: connected to r2") != std::string::npos);
  auto target = "127.0.0.1:" + std::to_string(inspect);
  auto stranger = shell(target, "slow-link r9 4", false);
  CHECK(stranger.code == 1);
  CHECK(stranger.err.find("slow-link: no peer named 'r9' is known to this host") != std::string::npos);
  auto done = shell(target, "slow-link r2 4", true);
  INFO(done.err);
  REQUIRE(done.code == 0);
  auto j = json::parse(done.out);
  CHECK(j["peer"] == "r2");
  CHECK(j["factor"] == 4.0);
  auto undone = shell(target, "slow-link r2 1", true);
  CHECK(undone.code == 0);

  // use HOST: r1 asks r2 over the cluster's link; lab controls are not relayed.
  auto via = shell(target, "use r2; status", true);
  INFO(via.err);
  REQUIRE(via.code == 0);
  auto vs = json::parse(via.out); // only the answer: `use` says nothing in -c mode
  CHECK(vs["host"] == "r2");
  CHECK(vs["stage"] == 2);
  auto relayed = shell(target, "use r2; drain", false);
  CHECK(relayed.code == 1);
  CHECK(relayed.err.find("drain: lab controls are not relayed: connect to r2's own inspect port") != std::string::npos);
  auto nobody = shell(target, "use r9; status", false);
  CHECK(nobody.code == 1);
  CHECK(nobody.err.find("use r9: r9 did not answer through the cluster in time") != std::string::npos);
  CHECK(nobody.out.empty()); // stopped at the failed use

  // trace ACTOR: r2's membership handles r1's heartbeats while traced (through r1).
  auto traced = shell(target, "use r2; trace membership 1", true);
  INFO(traced.err);
  REQUIRE(traced.code == 0);
  auto tj = json::parse(traced.out);
  CHECK(tj["host"] == "r2");
  CHECK(tj["handled"].get<int>() > 0);
  CHECK(tj["handled"].get<std::size_t>() >= tj["messages"].size());
  bool heartbeat = false;
  for (auto& m : tj["messages"])
    heartbeat = heartbeat || m["message"].get<std::string>().rfind("deliver \"r1\" hello (", 0) == 0;
  CHECK(heartbeat);

  // top N: N refreshes a second apart with messages handled per second; actors sorted.
  auto top = shell(target, "top 2", true);
  INFO(top.err);
  REQUIRE(top.code == 0);
  std::istringstream lines{top.out};
  int refreshes = 0;
  for (std::string line; std::getline(lines, line); ++refreshes) {
    auto r = json::parse(line);
    REQUIRE(r["actors"].size() == 5);
    double last = 1e18;
    for (auto& a : r["actors"]) { // busiest first
      REQUIRE(a["per_s"].is_number());
      CHECK(a["per_s"].get<double>() <= last);
      last = a["per_s"].get<double>();
    }
    CHECK(r["actors"][0]["per_s"].get<double>() > 0); // heartbeats and probes at least
  }
  CHECK(refreshes == 2);
  auto sorted = shell(target, "actors handled", true);
  REQUIRE(sorted.code == 0);
  auto rows = json::parse(sorted.out)["actors"];
  for (std::size_t i = 1; i < rows.size(); ++i)
    CHECK(rows[i - 1]["handled"].get<double>() >= rows[i]["handled"].get<double>());
  fs::remove_all(base);
}

TEST_CASE("the embedded cluster serves one shell: use HOST reaches every host, crash kills one host only") {
  auto dir = fs::temp_directory_path() / ("gwtf-embedded-shell-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto network = std::string{GWTF_SOURCE_DIR} + "/configs/networks/aws-8.yaml";
  std::ofstream{dir / "cluster.yaml"}
    << "node: {inspect: \"127.0.0.1:0\", inspect_control: true}\n"
    << "hosts:\n"
       "  - {name: dh-a, region: virginia, role: data_holder, capacity: 4}\n"
       "  - {name: r1, region: ohio, role: relay, stage: 1, capacity: 4}\n"
       "  - {name: r1b, region: london, role: relay, stage: 1, capacity: 4}\n"
       "  - {name: r2, region: oregon, role: relay, stage: 2, capacity: 4}\n"
    << "model: {arch: gpt, layers: 3, hidden: 32, heads: 2, seq_len: 16, vocab: 256, stages: 3}\n"
    << "data: {format: text, path: " << GWTF_SOURCE_DIR << "/test/app/good_configs/corpus.txt}\n"
    << "training: {iterations: 100000, microbatch_size: 2, microbatches_per_holder: 2}\n"
    << "emulation: {network: " << network << ", time_scale: 0.2}\n"
    << "routing: {gwtf: {idle_moves: true}}\n";
  node_process cluster;
  REQUIRE(cluster.start(GWTF_EXE, dir / "cluster.yaml", dir / "cluster.log"));
  auto port = start_inspectable_port(cluster, "inspect: caf-gwtf shell 127.0.0.1:");
  INFO(gwtf::test::read_file(dir / "cluster.log"));
  REQUIRE(port != 0);
  auto target = "127.0.0.1:" + std::to_string(port);
  auto first = shell(target, "status", true);
  INFO(first.err);
  REQUIRE(first.code == 0);
  CHECK(json::parse(first.out)["host"] == "dh-a"); // the first data holder answers
  for (auto host : {"r1", "r1b", "r2"}) {
    auto r = shell(target, std::string{"use "} + host + "; stage", true);
    INFO(host << ": " << r.err);
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["host"] == host);
  }
  // routing.gwtf.idle_moves: each compute tells its balancer which flows carry its
  // microbatches awaiting their backward; `flows` shows them busy. While training runs some
  // flow of a stage-1 relay is busy much of the time, and idle between a backward and the
  // next forward: asked until both were seen (each answer is a fresh view; which of r1 and
  // r1b carries the flows depends on the emulated links).
  bool busy = false, idle = false, listed = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(busy && idle) && std::chrono::steady_clock::now() < until)
    for (auto host : {"r1", "r1b"}) {
      auto f = shell(target, std::string{"use "} + host + "; flows", true);
      REQUIRE(f.code == 0);
      auto answer = json::parse(f.out); // not iterated as a temporary: it would be gone
      for (auto& flow : answer["flows"]) {
        listed = listed || flow.contains("busy");
        busy = busy || flow.value("busy", false);
        idle = idle || !flow.value("busy", true);
      }
    }
  CHECK(listed);
  CHECK(busy);
  CHECK(idle);
  auto stranger = shell(target, "use r9", false);
  CHECK(stranger.code == 1);
  CHECK(stranger.err.find("no running host named 'r9' in this embedded cluster") != std::string::npos);
  // crash: r1b's actors die, the process (and every other host) goes on.
  auto crash = shell(target, "use r1b; crash", true);
  INFO(crash.err);
  REQUIRE(crash.code == 0);
  CHECK(json::parse(crash.out)["host"] == "r1b");
  auto gone = shell(target, "use r1b; status", false);
  CHECK(gone.code == 1);
  CHECK(gone.err.find("no running host named 'r1b'") != std::string::npos);
  auto still = shell(target, "use r2; status", true);
  REQUIRE(still.code == 0);
  CHECK(json::parse(still.out)["host"] == "r2");
  CHECK(::kill(cluster.pid, 0) == 0); // the process lives
  cluster.stop();
  fs::remove_all(dir);
}
