#include "actors/inspect_view.hpp"

#include <nlohmann/json.hpp>

namespace gwtf::actors {

using json = nlohmann::ordered_json;

const std::vector<std::pair<std::string, std::string>>& inspect_queries() {
  static const std::vector<std::pair<std::string, std::string>> q{
    {"status", "this host: role, stage, iteration, loss, peers, flows"},
    {"hosts", "the membership view: every peer, its address, stage, state and when it was last heard"},
    {"flows", "the flows through this host: data holder, previous and next hop, ring cost"},
    {"graph", "the flows through this host as a Graphviz DOT graph"},
    {"links", "measured links to the neighbouring stages: latency, bandwidth, round trip"},
    {"stage", "the stage: replicas, iteration, weights hash, stashed microbatches"},
    {"microbatches", "microbatches this host holds: where each is and its attempt"},
    {"actors", "the host's actors: mailbox size; restarts of the host's actors"},
  };
  return q;
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

} // namespace

inspect_answer compose_view(const std::string& query, const inspect_parts& p) {
  auto compute = part(p, "compute");
  auto membership = part(p, "membership");
  auto balancer = part(p, "balancer");
  auto probe = part(p, "probe");
  auto supervisor = part(p, "supervisor");
  if (query == "status") {
    json out{{"host", p.host}};
    for (auto key : {"role", "stage", "iteration", "iterations", "ready", "draining", "loss", "loss_iteration",
                     "applied_iteration", "weights_hash"})
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
    if (query == "flows")
      return {true, json{{"host", p.host}, {"spare", value_or_null(balancer, "spare")}, {"flows", flows},
                         {"moves", value_or_null(balancer, "moves")}}
                      .dump()};
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
    for (auto key : {"stage", "role", "ready", "iteration", "applied_iteration", "weights_hash", "replicas", "stashed",
                     "flows", "draining"})
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
  if (query == "actors") {
    json actors = json::array();
    for (auto name : {"supervisor", "membership", "probe", "balancer", "compute"}) {
      auto j = part(p, name);
      json row{{"actor", name}};
      if (j.is_object()) {
        row["state"] = "running";
        row["mailbox"] = value_or_null(j, "mailbox");
      } else {
        row["state"] = p.missing.count(name) > 0 ? p.missing.at(name) : std::string{"no answer"};
      }
      actors.push_back(std::move(row));
    }
    return {true, json{{"host", p.host}, {"actors", actors}, {"restarts", value_or_null(supervisor, "restarts")}}.dump()};
  }
  std::string known;
  for (auto& [q, help] : inspect_queries())
    known += (known.empty() ? "" : ", ") + q;
  return {false, "unknown query '" + query + "': this host answers " + known};
}

} // namespace gwtf::actors
