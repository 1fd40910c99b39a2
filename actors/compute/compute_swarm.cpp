// SWARM as its code runs (routing.router: swarm; yandex-research/swarm): a data holder calls
// one stage at a time and gets each answer back; the peer of every call is chosen by the
// holder's routing::swarm_router (least accumulated expected work, wall-time EMAs); servers
// keep nothing between calls, so a backward call goes to any replica, which recomputes the
// forward from the input it is sent. A lost call is made again on another peer, and only
// that call. Training semantics stay GWTF's (docs/runtime.md, "SWARM in the runtime"): each
// backward is counted by the replica that ran it, exactly once, and averaged at the
// iteration's end as always.
#include <cstdio>

#include "actors/compute/compute_internal.hpp"

namespace gwtf::actors::compute {

namespace {

double now_s() {
  return static_cast<double>(steady_ms()) / 1000.0;
}

routing::swarm_task task_of(const swarm_call& c) {
  return c.backward ? routing::swarm_task::backward : routing::swarm_task::forward;
}

std::chrono::milliseconds timeout_of(const compute_state& st, const swarm_call& c) {
  auto& cfg = st.ctx->spec->routing.swarm;
  return std::chrono::milliseconds(c.backward ? cfg.backward_timeout_ms : cfg.forward_timeout_ms);
}

/// The holder's router, its peer list refreshed when the period says so or when `force`.
routing::swarm_router& router(compute_state& st, bool force = false) {
  auto& h = st.holder;
  if (!h.swarm) {
    h.swarm.emplace(st.ctx->spec->routing.swarm, stages(st));
    force = true;
  }
  if (force || h.swarm->refresh_due(now_s())) {
    std::vector<routing::swarm_peer> live;
    for (auto& [id, stage] : st.peers)
      live.push_back({id, stage});
    h.swarm->refresh(now_s(), live);
  }
  return *h.swarm;
}

wire::microbatch_ref ref_of(const compute_state& st, std::uint64_t key) {
  return {key >> 24, static_cast<std::uint32_t>(key >> 12 & 0xfff), static_cast<std::uint32_t>(key & 0xfff),
          st.run_origin};
}

// Sends call `n` of microbatch `key` to its peer and arms its timeout (none chosen yet:
// looks again in 50 ms).
void send_call(self_ptr self, std::uint64_t key, std::uint32_t n) {
  auto& st = self->state;
  auto& o = st.holder.origins[key];
  auto& c = o.trip.calls.at(n);
  if (c.peer.empty()) {
    self->delayed_send(self, std::chrono::milliseconds(50), call_atom::value, key, n);
    return;
  }
  wire::activation a;
  a.microbatch = ref_of(st, key);
  a.dir = c.backward ? wire::direction::backward : wire::direction::forward;
  a.path = {me(st)};
  a.attempt = n;
  a.call = wire::call_kind::request;
  a.stage = static_cast<std::uint32_t>(c.stage);
  auto s = static_cast<std::size_t>(c.stage);
  a.tensor = dense_payload(st, c.backward ? o.trip.grads[s] : o.trip.inputs[s]);
  if (c.backward)
    a.input = dense_payload(st, o.trip.inputs[s]);
  c.sent_ms = steady_ms();
  o.first_hop = c.peer; // the shell's and the balancer's view: where it is now
  st.ctx->send(self, c.peer, service::stage, a);
  self->delayed_send(self, timeout_of(st, c), call_atom::value, key, n);
}

// A new call of microbatch `key` to `stage`: its peer is the router's choice.
void call(self_ptr self, std::uint64_t key, int stage, bool backward, bool repair = false) {
  auto& st = self->state;
  swarm_call c;
  c.stage = stage;
  c.backward = backward;
  c.repair = repair;
  auto& r = router(st);
  auto peer = r.choose(stage, task_of(c));
  if (!peer) // none known at the stage: the peer list may be older than the membership
    peer = router(st, true).choose(stage, task_of(c));
  c.peer = peer.value_or("");
  auto n = ++st.holder.next_call;
  st.holder.origins[key].trip.calls[n] = c;
  send_call(self, key, n);
}

} // namespace

void swarm_start(self_ptr self, std::uint64_t key) {
  auto& st = self->state;
  auto& o = st.holder.origins[key];
  auto n = static_cast<std::size_t>(stages(st));
  o.trip.inputs.assign(n + 1, torch::Tensor());
  o.trip.grads.assign(n, torch::Tensor());
  o.trip.counted_at.assign(n, std::string{});
  o.trip.inputs[1] = o.output;
  call(self, key, 1, false);
}

void swarm_request(self_ptr self, const std::string& from, wire::activation a) {
  auto& st = self->state;
  bool backward = a.dir == wire::direction::backward;
  auto what = std::string{backward ? "backward" : "forward"} + " call from " + from;
  auto& holders = st.ctx->spec->holders;
  if (is_holder(st) || !swarm_routed(st)) {
    report_failure(self, what + ": this host takes no calls (routing.router is not swarm here, or it is a data holder)");
    return;
  }
  if (a.microbatch.holder >= holders.size() || holders[a.microbatch.holder] != from) {
    report_failure(self, what + ": only a microbatch's own data holder calls for it: dropped");
    return;
  }
  if (a.stage != 0 && a.stage != static_cast<std::uint32_t>(st.ctx->stage)) {
    // Sent to this host before it moved (SWARM's rebalancing) or to the wrong host: the
    // holder calls another replica of that stage (it learnt of the move as of a leave).
    report_note(self, what + " for stage " + std::to_string(a.stage) + ": this host serves stage "
                        + std::to_string(st.ctx->stage) + ": dropped");
    return;
  }
  if (!acceptable_tensor(self, what, a.tensor) || (backward && !acceptable_tensor(self, what + " (its input)", a.input)))
    return;
  if (!st.ready || a.microbatch.iteration > st.current) {
    // Before the weights: after the download or step. A holder is at most one iteration
    // ahead of a stage (it starts i + 1 once every stage averaged i), and it calls for its
    // own microbatches only: anything beyond is dropped, so that a peer cannot grow the queue.
    queue_early(self, what, from, std::move(a));
    return;
  }
  auto reply = [&](wire::tensor_payload t) {
    wire::activation r;
    r.microbatch = a.microbatch;
    r.dir = a.dir;
    r.path = {me(st)};
    r.attempt = a.attempt;
    r.call = wire::call_kind::reply;
    r.tensor = std::move(t);
    st.ctx->send(self, from, service::stage, r);
  };
  if (a.microbatch.iteration < st.current && !open_iteration(st, a.microbatch.iteration)) {
    // An iteration this stage applied: a backward asked again after a replica died (a repair)
    // came after the stage averaged without needing it. An empty answer says so. (With
    // overlap the iteration before `current` stays open until its step, as `current` in sync.)
    if (backward)
      reply({});
    return;
  }
  auto key = key_of(a.microbatch);
  auto t0 = clock::now();
  if (!backward) {
    auto out = st.model->forward_only(as_fp32(a.tensor));
    auto* y = value_or_report(self, out, what);
    report_compute(self, a.microbatch.iteration, computed(self, t0), 0);
    if (!y || crash_now(self, "forward"))
      return;
    reply(dense_payload(st, *y));
    return;
  }
  if (st.stash.swarm_counted.count(key) > 0) {
    // Asked again (the answer was late or lost, or its holder started the iteration again
    // after a reload): counted once per microbatch, the input gradient it gave, as a GWTF hop
    // that rebinds sends its stored gradient again.
    if (st.stash.grad_out.count(key) > 0)
      reply(dense_payload(st, st.stash.grad_out[key]));
    return;
  }
  auto g = st.model->recompute_backward(key, as_fp32(a.input), as_fp32(a.tensor));
  auto* grad = value_or_report(self, g, what);
  report_compute(self, a.microbatch.iteration, computed(self, t0), 0);
  if (!grad || crash_now(self, "backward"))
    return;
  st.stash.swarm_counted[key] = a.microbatch;
  st.stash.grad_out[key] = *grad;
  reply(dense_payload(st, *grad));
  auto i = a.microbatch.iteration;
  if (st.agg.shared.count(i) > 0 && st.agg.averaged.count(i) == 0) {
    send_share(self, i); // a repair after this replica shared
    resume(self, try_average(self, i));
  }
}

void swarm_reply(self_ptr self, const std::string& from, const wire::activation& a) {
  auto& st = self->state;
  if (!is_holder(st) || !swarm_routed(st))
    return;
  auto key = key_of(a.microbatch);
  auto it = st.holder.origins.find(key);
  if (it == st.holder.origins.end() || a.microbatch.origin != st.run_origin || !open_iteration(st, a.microbatch.iteration))
    return; // not one of this run's microbatches of an open iteration (overlap: a repair of the one before): late
  auto& o = it->second;
  auto ci = o.trip.calls.find(a.attempt);
  if (ci == o.trip.calls.end() || ci->second.peer != from || ci->second.backward != (a.dir == wire::direction::backward))
    return; // answered already, made again elsewhere, or not this call
  auto c = ci->second;
  o.trip.calls.erase(ci);
  router(st).completed(from, task_of(c), static_cast<double>(steady_ms() - c.sent_ms) / 1000.0);
  if (a.tensor.size == 0) // the stage averaged without this repair
    return;
  auto what = std::string{c.backward ? "input gradient" : "output"} + " of stage " + std::to_string(c.stage)
              + " from " + from;
  if (!acceptable_tensor(self, what, a.tensor))
    return;
  auto s = static_cast<std::size_t>(c.stage);
  if (c.repair) {
    o.trip.counted_at[s] = from;
    return;
  }
  auto t = as_fp32(a.tensor);
  if (!c.backward) {
    o.trip.inputs[s + 1] = t;
    if (c.stage + 1 < stages(st)) {
      call(self, key, c.stage + 1, false);
      return;
    }
    auto t0 = clock::now();
    auto res = st.model->head(key, t, o.targets);
    auto* h = value_or_report(self, res, "head of microbatch from " + from);
    report_compute(self, st.current, computed(self, t0), 0);
    if (!h || crash_now(self, "backward"))
      return;
    st.holder.losses.emplace(key, h->loss);
    o.trip.grads[s] = h->grad_input;
    call(self, key, c.stage, true);
    return;
  }
  o.trip.counted_at[s] = from;
  if (c.stage > 1) {
    o.trip.grads[s - 1] = t;
    call(self, key, c.stage - 1, true);
    return;
  }
  auto t0 = clock::now();
  auto res = st.model->embed_backward(key, t);
  auto* ok = value_or_report(self, res, "embedding backward of microbatch from " + from);
  report_compute(self, st.current, computed(self, t0), 0);
  if (!ok || crash_now(self, "backward"))
    return;
  finish_origin(self, key);
}

void swarm_timeout(self_ptr self, std::uint64_t key, std::uint32_t n) {
  auto& st = self->state;
  auto it = st.holder.origins.find(key);
  if (it == st.holder.origins.end())
    return;
  auto& calls = it->second.trip.calls;
  auto ci = calls.find(n);
  if (ci == calls.end())
    return; // answered
  auto c = ci->second;
  if (c.peer.empty()) { // no peer was known: choose again
    calls.erase(ci);
    call(self, key, c.stage, c.backward, c.repair);
    return;
  }
  if (c.backward && st.peers.count(c.peer) > 0) {
    // A live peer may have counted it: asked again there (it answers what it computed, or
    // computes it if the call was lost), never counted by a second replica.
    ++st.metrics.resends;
    send_call(self, key, n);
    return;
  }
  calls.erase(ci);
  router(st).timed_out(c.peer, task_of(c)); // SWARM's code: another peer, no ban
  ++st.metrics.resends;
  call(self, key, c.stage, c.backward, c.repair);
}

void swarm_peer_down(self_ptr self, const std::string& id, int stage) {
  auto& st = self->state;
  if (!is_holder(st) || !st.holder.swarm)
    return;
  bool oracle = st.ctx->spec->routing.swarm.detection == routing::swarm_detection::oracle;
  bool crashed = st.departed.count(id) == 0;
  std::map<int, int> repairs; // stage -> backwards called again
  // Told of the death (oracle), or the peer said it leaves: an error in SWARM's code, banned
  // at once. With timeout detection it stays choosable until a call to it times out and the
  // peer-list refresh drops it, as in SWARM's code.
  if ((oracle || !crashed) && stage >= 1) // a relay (the queues hold nothing else)
    router(st).failed(id, routing::swarm_task::forward, now_s());
  for (auto& [key, o] : st.holder.origins) {
    std::vector<swarm_call> again;
    for (auto ci = o.trip.calls.begin(); ci != o.trip.calls.end();) {
      if (ci->second.peer == id && (oracle || !crashed)) {
        again.push_back(ci->second);
        ci = o.trip.calls.erase(ci);
      } else {
        ++ci;
      }
    }
    // Backwards it counted in an iteration its stage has not averaged: its share is dropped
    // there, so another replica counts them again (the answer is not needed downstream).
    if (crashed)
      for (std::size_t s = 1; s < o.trip.counted_at.size(); ++s)
        if (o.trip.counted_at[s] == id) {
          o.trip.counted_at[s].clear();
          swarm_call c;
          c.stage = static_cast<int>(s);
          c.backward = true;
          c.repair = true;
          again.push_back(c);
          ++repairs[c.stage];
        }
    for (auto& c : again) {
      ++st.metrics.resends;
      call(self, key, c.stage, c.backward, c.repair);
    }
  }
  for (auto& [stage, n] : repairs)
    report_note(self, "iteration " + std::to_string(st.current) + ": " + id + " died before stage "
                        + std::to_string(stage) + " averaged: the backward of " + std::to_string(n)
                        + " microbatch(es) it counted is called again on another replica");
}

void swarm_forget(compute_state& st, std::uint64_t iteration) {
  for (auto it = st.stash.swarm_counted.begin(); it != st.stash.swarm_counted.end();) {
    if (it->second.iteration <= iteration) {
      st.stash.forget(it->first);
      it = st.stash.swarm_counted.erase(it);
    } else {
      ++it;
    }
  }
}

void swarm_rebalance_due(self_ptr self) {
  auto& st = self->state;
  if (!is_holder(st) || !swarm_routed(st))
    return;
  // One holder decides: the live one with the lowest name. (SWARM's peers read one table of
  // throughputs in its DHT; here the deciding trainer's own measurements stand for it.)
  bool lowest = true;
  for (auto& [id, stage] : st.peers)
    lowest = lowest && !(stage == 0 && id < me(st));
  auto& rb = st.holder.rebalance;
  int mover_stage = -1;
  if (rb.move)
    if (auto p = st.peers.find(rb.move->peer); p != st.peers.end())
      mover_stage = p->second;
  auto now = steady_ms();
  // One move at a time: the last one is under way until its peer serves its new stage (or
  // it never does within 10 connection timeouts: it crashed, or refused the order).
  if (rebalance_due(rb, now, st.ctx->spec->routing.swarm.rebalance_ms,
                    10 * static_cast<std::int64_t>(st.ctx->spec->faults.connection_timeout_ms), lowest, mover_stage)
      != rebalance_turn::look)
    return;
  auto& r = router(st); // its own refresh period, as SWARM's balancer: looking refreshes nothing
  std::vector<routing::swarm_load> relays;
  for (auto& [id, stage] : st.peers)
    if (stage >= 1)
      relays.push_back({id, stage, r.throughput(id).value_or(0.0)}); // unmeasured: counts for nothing yet
  auto m = routing::swarm_rebalance(relays, stages(st));
  if (!m)
    return;
  auto total = [&](int stage) {
    double sum = 0;
    for (auto& l : relays)
      sum += l.stage == stage ? l.throughput : 0.0;
    return sum;
  };
  auto& peer = relays[m->peer];
  char what[160];
  std::snprintf(what, sizeof what, "stage %d measured %.2f tasks/s, stage %d %.2f; %s (%.2f) moves", m->from,
                total(m->from), m->to, total(m->to), peer.id.c_str(), peer.throughput);
  st.ctx->send(self, peer.id, service::stage,
               wire::stage_move{static_cast<std::uint32_t>(m->to), static_cast<std::uint32_t>(m->from), st.current, me(st)});
  rb.move = rebalance_state::ordered_move{peer.id, m->to, now};
  report_note(self, "iteration " + std::to_string(st.current) + ": SWARM's rebalancing: " + what + " from stage "
                      + std::to_string(m->from) + " to " + std::to_string(m->to));
}

void on_stage_move(self_ptr self, const std::string& from, const wire::stage_move& m) {
  auto& st = self->state;
  auto sender = st.peers.find(from);
  move_order_context c;
  c.swarm = swarm_routed(st);
  c.from_live_holder = sender != st.peers.end() && sender->second == 0;
  c.stage = st.ctx->stage;
  c.stages = stages(st);
  c.ready = st.ready;
  c.draining = st.draining;
  c.stage_mates = live_at(st, st.ctx->stage).size();
  if (auto why = stage_move_refusal(m, from, c)) {
    report_failure(self, "STAGE_MOVE to stage " + std::to_string(m.stage) + " from " + from + " refused: " + *why);
    return;
  }
  self->send(st.supervisor, move_atom::value, static_cast<std::int32_t>(m.stage),
             "ordered by " + m.decided_by + " at its iteration " + std::to_string(m.iteration));
}

} // namespace gwtf::actors::compute
