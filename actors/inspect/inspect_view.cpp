#include "actors/inspect/inspect_view.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <cstdlib>
#include <cmath>

#include <nlohmann/json.hpp>

namespace gwtf::actors {

using json = nlohmann::ordered_json;

const std::vector<std::pair<std::string, std::string>>& inspect_queries() {
  static const std::vector<std::pair<std::string, std::string>> q{
    {"status", "this host: role, stage, iteration, loss, peers, flows"},
    {"hosts", "the membership view: every peer, its address, stage, state and when it was last heard"},
    {"flows", "the flows through this host: data holder, previous and next hop, ring cost (busy: a microbatch in flight on it, with routing.gwtf.idle_moves); with routing.router swarm, a data holder's queue of peers per stage and their learnt throughput"},
    {"graph", "the flows through this host as a Graphviz DOT graph"},
    {"links", "measured links to the neighbouring stages: latency, bandwidth, round trip"},
    {"stage", "the stage: replicas, iteration, weights hash, stashed microbatches"},
    {"microbatches", "microbatches this host holds: where each is and its attempt"},
    {"actors", "actors [name|mailbox|handled]: the host's actors: kind, mailbox, messages handled, restarts"},
    {"inspect", "inspect ACTOR: all that one actor (supervisor, membership, probe, balancer, compute) reports"},
    {"trace", "trace ACTOR [SECONDS]: the messages one actor handles for SECONDS (default 5, at most 60)"},
    {"metrics", "the same figures in the Prometheus text format (what GET /metrics serves)"},
  };
  return q;
}

const std::vector<std::pair<std::string, std::string>>& control_queries() {
  static const std::vector<std::pair<std::string, std::string>> q{
    {"drain", "lab control: leave gracefully (finish and hand over this iteration's part, then LEAVE)"},
    {"crash", "lab control: the process exits at once, as if it crashed"},
    {"slow-link", "lab control: slow-link PEER FACTOR: the emulated link to PEER gets FACTOR x its latency "
                  "and 1/FACTOR its bandwidth for what this host sends (emulation.network hosts only; 1 undoes it)"},
  };
  return q;
}

const std::vector<std::string>& host_actor_names() {
  static const std::vector<std::string> names{"supervisor", "membership", "probe", "balancer", "compute"};
  return names;
}

std::string host_actor_list() {
  std::string out;
  for (auto& n : host_actor_names())
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool is_control(const std::string& query) {
  auto word = query.substr(0, query.find(' '));
  for (auto& [q, help] : control_queries())
    if (q == word)
      return true;
  return false;
}

std::variant<slow_link_request, std::string> parse_slow_link(const std::string& query) {
  std::istringstream words{query};
  std::string cmd, peer, factor_text, extra;
  words >> cmd >> peer >> factor_text;
  if (cmd != "slow-link" || peer.empty() || factor_text.empty() || (words >> extra))
    return std::string{"slow-link: expected slow-link PEER FACTOR, got '" + query + "'"};
  char* end = nullptr;
  double factor = std::strtod(factor_text.c_str(), &end);
  if (end == factor_text.c_str() || *end != '\0' || !std::isfinite(factor) || factor < 1 || factor > 1000)
    return std::string{"slow-link: FACTOR: expected a number from 1 to 1000 (1: as measured), got '" + factor_text + "'"};
  return slow_link_request{peer, factor};
}

std::variant<trace_request, std::string> parse_trace(const std::string& query) {
  std::istringstream words{query};
  std::string cmd, actor, seconds_text, extra;
  words >> cmd >> actor;
  auto usage = "trace: expected trace ACTOR [SECONDS], ACTOR one of " + host_actor_list() + ", got '" + query + "'";
  if (cmd != "trace" || actor.empty())
    return usage;
  auto& known = host_actor_names();
  if (std::find(known.begin(), known.end(), actor) == known.end())
    return "trace: no actor named '" + actor + "': the host's actors are " + host_actor_list();
  trace_request t{actor, 5};
  if (words >> seconds_text) {
    if (words >> extra)
      return usage;
    char* end = nullptr;
    long v = std::strtol(seconds_text.c_str(), &end, 10);
    if (end == seconds_text.c_str() || *end != '\0' || v < 1 || v > max_trace_seconds)
      return "trace: SECONDS: expected a whole number from 1 to " + std::to_string(max_trace_seconds) + ", got '"
             + seconds_text + "'";
    t.seconds = static_cast<int>(v);
  }
  return t;
}

std::optional<std::variant<hop_request, std::string>> parse_hop(const std::string& query) {
  if (query.empty() || query[0] != '@')
    return std::nullopt;
  auto space = query.find(' ');
  auto host = query.substr(1, space == std::string::npos ? std::string::npos : space - 1);
  std::string rest;
  if (auto start = space == std::string::npos ? space : query.find_first_not_of(' ', space); start != std::string::npos)
    rest = query.substr(start);
  if (host.empty() || rest.empty())
    return std::variant<hop_request, std::string>{std::string{"expected @HOST QUERY, got '" + query + "'"}};
  if (rest[0] == '@')
    return std::variant<hop_request, std::string>{std::string{"a query hops once: '" + query + "'"}};
  return std::variant<hop_request, std::string>{hop_request{host, rest}};
}

std::variant<front_route, std::string> route_front(const std::string& query, const std::string& attached,
                                                   const std::vector<std::string>& live, bool control) {
  front_route r{attached, query};
  if (auto hop = parse_hop(query)) {
    if (auto* e = std::get_if<std::string>(&*hop))
      return *e;
    r = front_route{std::get<hop_request>(*hop).host, std::get<hop_request>(*hop).query};
  } else if (std::find(live.begin(), live.end(), attached) == live.end()) {
    if (live.empty())
      return std::string{"no host of the embedded cluster is running"};
    r.host = live.front(); // the attached host is gone: the next one answers
  }
  if (std::find(live.begin(), live.end(), r.host) == live.end()) {
    std::string names;
    for (auto& h : live)
      names += (names.empty() ? "" : ", ") + h;
    return "no running host named '" + r.host + "' in this embedded cluster (running: " + names + ")";
  }
  if (is_control(r.query) && !control)
    return r.query.substr(0, r.query.find(' ')) + ": refused: this cluster runs with node.inspect_control: false (read-only shell)";
  return r;
}

int extra_answer_ms(const std::string& query) {
  auto q = query;
  if (auto h = parse_hop(query); h && std::holds_alternative<hop_request>(*h))
    q = std::get<hop_request>(*h).query;
  if (q.rfind("trace ", 0) != 0)
    return 0;
  auto t = parse_trace(q);
  return std::holds_alternative<trace_request>(t) ? std::get<trace_request>(t).seconds * 1000 : 0;
}

std::string compose_trace(const std::string& host, const trace_request& t, std::uint64_t handled,
                          const std::vector<traced_message>& messages, std::uint64_t dropped) {
  json list = json::array();
  for (auto& m : messages)
    list.push_back({{"t_ms", static_cast<double>(m.at_us) / 1000.0}, {"from", m.from}, {"message", m.what}});
  return json{{"host", host},
              {"actor", t.actor},
              {"seconds", t.seconds},
              {"handled", handled},
              {"per_second", static_cast<double>(handled) / t.seconds},
              {"not_recorded", dropped},
              {"messages", list}}
    .dump();
}

namespace {

// The part of `actor`, parsed; null when it did not answer or is not a JSON object.
json part(const inspect_parts& p, const std::string& actor) {
  auto it = p.parts.find(actor);
  if (it == p.parts.end())
    return nullptr;
  auto j = json::parse(it->second, nullptr, false);
  return j.is_object() ? j : json(nullptr);
}

json value_or_null(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) ? obj.at(key) : json(nullptr);
}

inspect_answer need(const inspect_parts& p, const std::string& query, const std::string& actor) {
  auto why = p.missing.count(actor) > 0 ? p.missing.at(actor) : std::string{"no answer"};
  return {false, query + ": the " + actor + " actor of " + p.host + " did not answer (" + why + ")"};
}

std::string dot_id(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

// A label value in the text format: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

struct exposition {
  std::string text;
  void family(const char* name, const char* type, const char* help) {
    text += std::string{"# HELP "} + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const char* name, const std::vector<std::pair<std::string, std::string>>& labels, double v) {
    text += name;
    if (!labels.empty()) {
      text += "{";
      for (std::size_t i = 0; i < labels.size(); ++i)
        text += (i ? "," : "") + labels[i].first + "=\"" + label(labels[i].second) + "\"";
      text += "}";
    }
    text += " " + number(v) + "\n";
  }
};

double num(const json& obj, const char* key, double otherwise = 0) {
  return obj.is_object() && obj.contains(key) && obj.at(key).is_number() ? obj.at(key).get<double>() : otherwise;
}

// The host's figures in the Prometheus text format 0.0.4 (docs/metrics.md).
std::string prometheus_text(const inspect_parts& p, const json& compute, const json& membership, const json& balancer,
                            const json& probe, const json& supervisor) {
  exposition e;
  e.family("gwtf_up", "gauge", "1 while the host's process answers");
  e.sample("gwtf_up", {}, 1);
  auto role = compute.is_object() ? compute.value("role", std::string{"unplaced"}) : std::string{"unplaced"};
  e.family("gwtf_host_info", "gauge", "the host's name, role and stage (value 1)");
  e.sample("gwtf_host_info", {{"host", p.host}, {"role", role}, {"stage", std::to_string(static_cast<int>(num(supervisor, "stage", -1)))}}, 1);
  e.family("gwtf_ready", "gauge", "1 when the host holds valid weights of its stage");
  e.sample("gwtf_ready", {}, compute.is_object() && compute.value("ready", false) ? 1 : 0);
  if (compute.is_object()) {
    e.family("gwtf_iteration", "gauge", "the iteration in progress (= optimizer steps applied)");
    e.sample("gwtf_iteration", {}, num(compute, "iteration"));
    e.family("gwtf_iterations_planned", "gauge", "training.iterations");
    e.sample("gwtf_iterations_planned", {}, num(compute, "iterations"));
    if (compute.contains("loss")) {
      e.family("gwtf_loss", "gauge", "mean loss of this data holder's microbatches in its last finished iteration");
      e.sample("gwtf_loss", {}, num(compute, "loss"));
    }
    if (compute.contains("checkpoint_iteration")) {
      e.family("gwtf_checkpoint_iteration", "gauge", "the newest iteration of this host's stage checkpoints (written or resumed from)");
      e.sample("gwtf_checkpoint_iteration", {}, num(compute, "checkpoint_iteration"));
    }
    e.family("gwtf_compute_seconds_total", "counter", "seconds this host's stage spent computing forwards and backwards");
    e.sample("gwtf_compute_seconds_total", {}, num(compute, "compute_s_total"));
    e.family("gwtf_wasted_compute_seconds_total", "counter", "of those, seconds whose result was thrown away (a stash never used by a backward)");
    e.sample("gwtf_wasted_compute_seconds_total", {}, num(compute, "wasted_s_total"));
    e.family("gwtf_resends_total", "counter", "microbatches this host sent again to a replacement hop after a peer was lost");
    e.sample("gwtf_resends_total", {}, num(compute, "resends"));
    e.family("gwtf_peers_lost_total", "counter", "peers this host's stage saw crash or hang (declared down; graceful leaves not counted)");
    e.sample("gwtf_peers_lost_total", {}, num(compute, "peers_lost"));
    e.family("gwtf_share_bytes_sent_total", "counter", "bytes of gradient shares, butterfly parts and sums this host sent its stage-mates (values and scales)");
    e.sample("gwtf_share_bytes_sent_total", {}, num(compute, "share_bytes_sent"));
    e.family("gwtf_butterfly_fallbacks_total", "counter", "butterfly averaging rounds this host fell back from to whole shares (a replica of the round gone, groups that differed)");
    e.sample("gwtf_butterfly_fallbacks_total", {}, num(compute, "butterfly_fallbacks"));
    e.family("gwtf_exactly_once_violations_total", "counter", "iterations whose averaged gradient shares did not hold each of their microbatches once (the stage's own exactly-once check)");
    e.sample("gwtf_exactly_once_violations_total", {}, num(compute, "exactly_once_violations"));
    e.family("gwtf_stashed_microbatches", "gauge", "microbatches whose activations (or inputs) this host keeps for their backward");
    e.sample("gwtf_stashed_microbatches", {}, num(compute, "stashed"));
    std::map<std::string, int> states;
    for (auto& m : value_or_null(compute, "microbatches"))
      ++states[m.value("state", std::string{"?"})];
    e.family("gwtf_microbatches", "gauge", "microbatches of the current iteration this host holds, by state");
    for (auto& [state, n] : states)
      e.sample("gwtf_microbatches", {{"state", state}}, n);
  }
  if (membership.is_object()) {
    int alive = 0, down = 0;
    for (auto& peer : value_or_null(membership, "peers"))
      (peer.value("state", "") == "alive" ? alive : down) += 1;
    e.family("gwtf_peers", "gauge", "peers in the membership view, by state");
    e.sample("gwtf_peers", {{"state", "alive"}}, alive);
    e.sample("gwtf_peers", {{"state", "down"}}, down);
  }
  if (balancer.is_object()) {
    int built = 0, half = 0;
    e.family("gwtf_flow_ring_cost_seconds", "gauge", "cost of a flow's whole ring as this host knows it");
    for (auto& f : value_or_null(balancer, "flows")) {
      (f.value("built", false) ? built : half) += 1;
      if (f.contains("ring_cost_s") && f["ring_cost_s"].is_number())
        e.sample("gwtf_flow_ring_cost_seconds",
                 {{"holder", f.value("holder", "")}, {"next", f.value("next", "")}, {"flow", f["id"].dump()}},
                 f["ring_cost_s"].get<double>());
    }
    e.family("gwtf_flows", "gauge", "flows through this host, built or half-built");
    e.sample("gwtf_flows", {{"state", "built"}}, built);
    e.sample("gwtf_flows", {{"state", "half_built"}}, half);
    e.family("gwtf_link_latency_seconds", "gauge", "measured one-way latency to a neighbouring-stage peer");
    for (auto& l : value_or_null(balancer, "links"))
      e.sample("gwtf_link_latency_seconds", {{"peer", l.value("peer", "")}}, num(l, "latency_ms") / 1000);
    e.family("gwtf_link_bandwidth_bytes_per_second", "gauge", "measured bandwidth to a neighbouring-stage peer");
    for (auto& l : value_or_null(balancer, "links"))
      e.sample("gwtf_link_bandwidth_bytes_per_second", {{"peer", l.value("peer", "")}},
               num(l, "bandwidth_mbps") * 1e6 / 8);
    auto moves = value_or_null(balancer, "moves");
    e.family("gwtf_balancer_moves_total", "counter", "moves of this host's balancer, by kind");
    for (auto kind : {"proposed", "redirects", "swaps", "reroutes", "deferred"})
      e.sample("gwtf_balancer_moves_total", {{"kind", kind}}, num(moves, kind));
  }
  if (probe.is_object()) {
    e.family("gwtf_link_rtt_seconds", "gauge", "round trip of the latest small probe to a peer");
    auto rtts = value_or_null(probe, "rtt_ms"); // items() of a temporary would dangle
    for (auto& [peer, ms] : rtts.items())
      if (ms.is_number())
        e.sample("gwtf_link_rtt_seconds", {{"peer", peer}}, ms.get<double>() / 1000);
  }
  e.family("gwtf_actor_mailbox", "gauge", "messages waiting in each of the host's actors");
  for (auto& name : host_actor_names()) {
    auto j = part(p, name);
    if (j.is_object())
      e.sample("gwtf_actor_mailbox", {{"actor", name}}, num(j, "mailbox"));
  }
  e.family("gwtf_actor_messages_handled_total", "counter", "messages each of the host's actors handled since the host started");
  auto handled = value_or_null(supervisor, "handled");
  for (auto& name : host_actor_names())
    if (handled.is_object() && handled.contains(name) && handled[name].is_number())
      e.sample("gwtf_actor_messages_handled_total", {{"actor", name}}, handled[name].get<double>());
  e.family("gwtf_actor_restarts_total", "counter", "restarts of the host's actors by its supervisor");
  e.sample("gwtf_actor_restarts_total", {}, num(supervisor, "restarts"));
  return e.text;
}

} // namespace

static inspect_answer compose(const std::string& query, const inspect_parts& p) {
  auto compute = part(p, "compute");
  auto membership = part(p, "membership");
  auto balancer = part(p, "balancer");
  auto probe = part(p, "probe");
  auto supervisor = part(p, "supervisor");
  if (query == "status") {
    json out{{"host", p.host}};
    for (auto key : {"role", "stage", "iteration", "iterations", "ready", "draining", "loss", "loss_iteration",
                     "applied_iteration", "weights_hash", "checkpoint_iteration"})
      if (!value_or_null(compute, key).is_null())
        out[key] = compute.at(key);
    if (!value_or_null(supervisor, "stage").is_null() && !out.contains("stage"))
      out["stage"] = supervisor.at("stage");
    if (membership.is_object()) {
      int alive = 0, down = 0;
      for (auto& peer : value_or_null(membership, "peers"))
        (peer.value("state", "") == "alive" ? alive : down) += 1;
      out["peers_alive"] = alive;
      out["peers_down"] = down;
      out["address"] = value_or_null(value_or_null(membership, "self"), "address");
    }
    if (balancer.is_object()) {
      int built = 0;
      for (auto& f : value_or_null(balancer, "flows"))
        built += f.value("built", false) ? 1 : 0;
      out["flows"] = built;
    }
    if (supervisor.is_object())
      out["restarts"] = value_or_null(supervisor, "restarts");
    return {true, out.dump()};
  }
  if (query == "hosts") {
    if (membership.is_null())
      return need(p, query, "membership");
    json out{{"host", p.host}, {"self", value_or_null(membership, "self")}, {"peers", value_or_null(membership, "peers")}};
    return {true, out.dump()};
  }
  if (query == "flows" || query == "graph") {
    if (balancer.is_null())
      return need(p, query, "balancer");
    auto flows = value_or_null(balancer, "flows");
    if (query == "flows") {
      json out{{"host", p.host}, {"stage", value_or_null(supervisor, "stage")},
               {"spare", value_or_null(balancer, "spare")}, {"flows", flows},
               {"moves", value_or_null(balancer, "moves")}};
      // routing.router swarm: no flows; a data holder's per-peer queue and learnt throughput
      if (auto swarm = value_or_null(compute, "swarm"); !swarm.is_null())
        out["swarm"] = swarm;
      return {true, out.dump()};
    }
    std::string dot = "digraph flows {\n  rankdir=LR;\n  " + dot_id(p.host) + " [shape=box];\n";
    for (auto& f : flows) {
      auto label = "holder " + f.value("holder", "?") + (f.value("built", false) ? "" : " (half-built)");
      if (f.contains("ring_cost_s") && f["ring_cost_s"].is_number()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, ", ring %.3f s", f["ring_cost_s"].get<double>());
        label += buf;
      }
      dot += "  " + dot_id(f.value("prev", "?")) + " -> " + dot_id(p.host) + " [label=" + dot_id(label) + "];\n";
      dot += "  " + dot_id(p.host) + " -> " + dot_id(f.value("next", "?")) + ";\n";
    }
    dot += "}\n";
    return {true, json{{"host", p.host}, {"dot", dot}}.dump()};
  }
  if (query == "links") {
    if (balancer.is_null())
      return need(p, query, "balancer");
    auto links = value_or_null(balancer, "links");
    auto rtts = value_or_null(probe, "rtt_ms");
    if (links.is_array())
      for (auto& l : links) {
        auto peer = l.value("peer", "");
        if (rtts.is_object() && rtts.contains(peer))
          l["rtt_ms"] = rtts[peer];
      }
    return {true, json{{"host", p.host}, {"links", links}}.dump()};
  }
  if (query == "stage") {
    if (compute.is_null())
      return need(p, query, "compute");
    json out{{"host", p.host}};
    for (auto key : {"stage", "role", "ready", "iteration", "applied_iteration", "weights_hash", "optimizer_steps",
                     "last_aggregation", "checkpoint_iteration", "replicas", "stashed", "flows", "draining"})
      if (compute.contains(key))
        out[key] = compute.at(key);
    return {true, out.dump()};
  }
  if (query == "microbatches") {
    if (compute.is_null())
      return need(p, query, "compute");
    return {true, json{{"host", p.host}, {"iteration", value_or_null(compute, "iteration")},
                       {"microbatches", value_or_null(compute, "microbatches")}}
                    .dump()};
  }
  if (query == "actors" || query.rfind("actors ", 0) == 0) {
    auto by = query == "actors" ? std::string{} : query.substr(7);
    if (!by.empty() && by != "name" && by != "mailbox" && by != "handled")
      return {false, "actors: sort by name, mailbox or handled, got '" + by + "'"};
    auto handled = value_or_null(supervisor, "handled");
    auto restarts = value_or_null(supervisor, "restarts");
    json actors = json::array();
    for (auto& name : host_actor_names()) {
      auto j = part(p, name);
      std::string kind = name == "supervisor"   ? "supervisor"
                         : name == "membership" ? "membership"
                         : name == "probe"      ? "link probe"
                         : name == "balancer"   ? "flow balancer"
                                                : "stage";
      if (name == "compute" && j.is_object())
        kind = j.value("role", std::string{"relay"}) == "data holder" ? "data holder" : "relay stage";
      json row{{"actor", name}, {"kind", kind}};
      if (j.is_object()) {
        row["state"] = "running";
        row["mailbox"] = value_or_null(j, "mailbox");
      } else {
        row["state"] = p.missing.count(name) > 0 ? p.missing.at(name) : std::string{"no answer"};
        row["mailbox"] = nullptr;
      }
      row["handled"] = value_or_null(handled, name.c_str());
      // The supervisor restarts its children together; it is never restarted itself.
      row["restarts"] = name == "supervisor" ? json(0) : restarts;
      actors.push_back(std::move(row));
    }
    if (by == "mailbox" || by == "handled")
      std::stable_sort(actors.begin(), actors.end(), [&](const json& a, const json& b) {
        return num(a, by.c_str(), -1) > num(b, by.c_str(), -1); // most first; no answer last
      });
    else if (by == "name")
      std::stable_sort(actors.begin(), actors.end(),
                       [](const json& a, const json& b) { return a.value("actor", "") < b.value("actor", ""); });
    return {true, json{{"host", p.host}, {"actors", actors}, {"restarts", restarts}}.dump()};
  }
  if (query == "metrics")
    return {true, prometheus_text(p, compute, membership, balancer, probe, supervisor)};
  if (query.rfind("inspect ", 0) == 0) {
    auto name = query.substr(8);
    auto& known = host_actor_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      return {false, "inspect: no actor named '" + name + "': " + p.host + "'s actors are " + host_actor_list()};
    auto j = part(p, name);
    if (!j.is_object())
      return need(p, query, name);
    auto handled = value_or_null(value_or_null(supervisor, "handled"), name.c_str());
    return {true, json{{"host", p.host}, {"actor", name}, {"handled", handled}, {"report", j}}.dump()};
  }
  std::string known;
  for (auto& [q, help] : inspect_queries())
    known += (known.empty() ? "" : ", ") + q;
  return {false, "unknown query '" + query + "': this host answers " + known};
}

inspect_answer compose_view(const std::string& query, const inspect_parts& p) {
  // The parts come from this host's own actors, but a field of an unexpected type must not
  // take the host down: nlohmann::json throws on type errors.
  try {
    return compose(query, p);
  } catch (const std::exception& e) {
    return {false, query + ": cannot compose the answer from the actors' reports: " + e.what()};
  }
}

} // namespace gwtf::actors
