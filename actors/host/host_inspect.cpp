// The shell's gateway in a host's supervisor: gathers every actor's state, relays queries
// to peers, runs traces and lab controls (inspect_view composes the answers).
#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/inspect/inspect_view.hpp"
#include "actors/host/host_internal.hpp"
#include "actors/host/supervisor_state.hpp"

namespace gwtf::actors {

namespace {

// The peers' queries a host answers at once; more are refused (a peer must not make it
// gather its actors' state without bound).
constexpr int max_answering = 8;
constexpr std::size_t max_peer_query = 4096;

caf::result<std::string> relay_query(supervisor_ptr self, const hop_request& hop) {
  auto& st = self->state;
  if (is_control(hop.query))
    return make_error(ec::bad_query, hop.query.substr(0, hop.query.find(' '))
                                       + ": lab controls are not relayed: connect to " + hop.host
                                       + "'s own inspect port");
  auto id = ++st.next_serial;
  auto promise = self->make_response_promise<std::string>();
  st.relays[id] = {promise, hop.host};
  st.ctx->send(self, hop.host, service::inspect, wire::inspect_request{id, hop.query});
  self->delayed_send(self, std::chrono::milliseconds(answer_budget_ms(st.ctx->spec->faults) + extra_answer_ms(hop.query)),
                     timeout_atom::value, id);
  return promise;
}

caf::result<std::string> start_trace(supervisor_ptr self, const std::string& query) {
  auto& st = self->state;
  auto t = parse_trace(query);
  if (auto* e = std::get_if<std::string>(&t))
    return make_error(ec::bad_query, *e);
  auto req = std::get<trace_request>(t);
  auto meter = st.ctx->meters ? st.ctx->meters->of(req.actor) : nullptr;
  if (!meter)
    return make_error(ec::bad_query, "trace: this host does not meter its actors");
  if (!meter->start_trace())
    return make_error(ec::bad_query, "trace: a trace of " + req.actor + " is already running on " + st.ctx->host.name);
  auto serial = ++st.next_serial;
  auto promise = self->make_response_promise<std::string>();
  st.traces[serial] = {promise, req, meter, meter->handled()};
  self->delayed_send(self, std::chrono::seconds(req.seconds), trace_atom::value, serial);
  return promise;
}

} // namespace

// The shell's query: a hop to a peer (@HOST), a trace, a lab control, or a view: every actor
// of the host reports its state (each request bounded by the heartbeat interval, so a busy or
// restarting actor shows as such instead of stalling the answer), then inspect_view composes
// the answer.
caf::result<std::string> inspect(supervisor_ptr self, const std::string& query) {
  auto& st = self->state;
  if (auto hop = parse_hop(query)) {
    if (auto* e = std::get_if<std::string>(&*hop))
      return make_error(ec::bad_query, *e);
    auto& h = std::get<hop_request>(*hop);
    if (h.host == st.ctx->host.name)
      return inspect(self, h.query);
    return relay_query(self, h);
  }
  if (query == "trace" || query.rfind("trace ", 0) == 0)
    return start_trace(self, query);
  // Lab controls: the inspection server lets them through only with node.inspect_control.
  if (query == "drain") {
    self->send(self, stop_atom::value);
    return nlohmann::ordered_json{{"host", st.ctx->host.name}, {"done", "draining: leaves once its part of the iteration is handed over"}}.dump();
  }
  if (query == "crash") {
    tell(self, st.ctx->reporter, verdict_atom::value, st.ctx->host.name, std::string{"crash asked by the shell"});
    self->delayed_send(self, std::chrono::milliseconds(100), crash_atom::value, std::string{"process"});
    return nlohmann::ordered_json{{"host", st.ctx->host.name}, {"done", "crashing in 100 ms"}}.dump();
  }
  if (query.rfind("slow-link", 0) == 0) {
    auto req = parse_slow_link(query);
    if (auto* e = std::get_if<std::string>(&req))
      return make_error(ec::bad_query, *e);
    auto r = std::get<slow_link_request>(req);
    auto promise = self->make_response_promise<std::string>();
    auto host = st.ctx->host.name;
    self->request(st.ctx->link, std::chrono::milliseconds(std::max(1000, st.ctx->spec->faults.heartbeat_interval_ms)),
                  slow_atom::value, caf::get_atom::value, r.peer, r.factor)
      .then(
        [promise, host, r](const std::string& why) mutable {
          if (!why.empty()) {
            promise.deliver(make_error(ec::bad_query, "slow-link: " + why));
            return;
          }
          promise.deliver(nlohmann::ordered_json{{"host", host}, {"peer", r.peer}, {"factor", r.factor},
                                                 {"done", "the emulated link to " + r.peer + " is now " + std::to_string(r.factor)
                                                            + "x slower than measured for what this host sends"}}
                            .dump());
        },
        [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
    return promise;
  }
  struct gather {
    inspect_parts parts;
    int waiting = 0;
    caf::typed_response_promise<std::string> promise;
    std::string query;
  };
  auto g = std::make_shared<gather>();
  g->parts.host = st.ctx->host.name;
  g->query = query;
  g->promise = self->make_response_promise<std::string>();
  nlohmann::ordered_json handled = nlohmann::ordered_json::object();
  if (st.ctx->meters)
    for (auto& name : host_actor_names())
      handled[name] = st.ctx->meters->of(name)->handled();
  g->parts.parts["supervisor"] = nlohmann::ordered_json{{"mailbox", self->mailbox().size()},
                                                {"stage", st.ctx->stage},
                                                {"restarts", st.generation},
                                                {"leaving", st.leaving},
                                                {"handled", handled}}
                                   .dump();
  auto done = [g] {
    if (--g->waiting > 0)
      return;
    auto a = compose_view(g->query, g->parts);
    if (a.ok)
      g->promise.deliver(std::move(a.body));
    else
      g->promise.deliver(make_error(ec::bad_query, a.body));
  };
  auto timeout = std::chrono::milliseconds(std::max(100, st.ctx->spec->faults.heartbeat_interval_ms));
  auto ask = [&](const char* name, auto& handle) {
    if (!handle) {
      g->parts.missing[name] = "not running (the host is not placed yet, or restarting)";
      return;
    }
    ++g->waiting;
    self->request(handle, timeout, inspect_atom::value)
      .then([g, name, done](std::string& j) {
              g->parts.parts[name] = std::move(j);
              done();
            },
            [g, name, done](caf::error& e) {
              g->parts.missing[name] = e == caf::sec::request_timeout ? "busy: no answer within the timeout"
                                                                      : "no answer: " + to_string(e);
              done();
            });
  };
  ++g->waiting; // held until every request is out
  ask("membership", st.membership);
  ask("probe", st.probe);
  ask("balancer", st.balancer);
  ask("compute", st.compute);
  done();
  return g->promise;
}

// A peer's INSPECT_REQUEST (its shell's `use`) or the answer to one this host relayed.
void on_inspect_frame(supervisor_ptr self, const std::string& from, wire_frame&& frame) {
  auto& st = self->state;
  auto msg = st.ctx->open(self, from, std::move(frame));
  if (!msg)
    return;
  if (auto* rep = std::get_if<wire::inspect_reply>(&*msg)) {
    auto it = st.relays.find(rep->request_id);
    if (it == st.relays.end() || it->second.host != from)
      return; // late, or not an answer to us
    if (rep->ok)
      it->second.promise.deliver(std::move(rep->body));
    else
      it->second.promise.deliver(make_error(ec::bad_query, from + ": " + rep->body));
    st.relays.erase(it);
    return;
  }
  auto* req = std::get_if<wire::inspect_request>(&*msg);
  if (req == nullptr) {
    tell(self, st.ctx->reporter, failure_atom::value, st.ctx->host.name,
         "inspect: " + std::string{wire::kind_name(*msg)} + " from " + from + " is no INSPECT message: dropped");
    return;
  }
  auto id = req->request_id;
  auto refuse = [&](const std::string& why) {
    st.ctx->send(self, from, service::inspect, wire::inspect_reply{id, false, why});
  };
  if (req->query.size() > max_peer_query)
    return refuse("a query of " + std::to_string(req->query.size()) + " bytes (at most " + std::to_string(max_peer_query) + ")");
  if (is_control(req->query) || parse_hop(req->query))
    return refuse(req->query.substr(0, req->query.find(' ')) + ": " + st.ctx->host.name
                  + " answers only read-only queries from its peers");
  if (st.answering >= max_answering)
    return refuse(st.ctx->host.name + " is answering " + std::to_string(max_answering) + " queries already: ask again");
  ++st.answering;
  auto ctx = st.ctx;
  auto timeout = std::chrono::milliseconds(answer_budget_ms(ctx->spec->faults) + extra_answer_ms(req->query));
  self->request(supervisor_actor{self}, timeout, inspect_atom::value, req->query)
    .then(
      [self, ctx, from, id](std::string& body) {
        --self->state.answering;
        ctx->send(self, from, service::inspect, wire::inspect_reply{id, true, std::move(body)});
      },
      [self, ctx, from, id](caf::error& e) {
        --self->state.answering;
        ctx->send(self, from, service::inspect, wire::inspect_reply{id, false, shell_text(e)});
      });
}

} // namespace gwtf::actors
