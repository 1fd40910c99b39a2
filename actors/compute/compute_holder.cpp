// A data holder: its iteration loop (stage 0 embedding of its microbatches), one carrier
// actor per microbatch that re-sends on timeouts and deaths, and its ITERATION_DONE.
#include "actors/compute/compute_internal.hpp"

namespace gwtf::actors::compute {

// --- data holder: iterations and carriers ----------------------------------------

struct carrier_state {
  std::uint64_t key = 0;
  std::string first_hop;
  std::string hint;
  std::uint32_t attempt = 0;
  std::chrono::milliseconds timeout{10000};
};

carrier_actor::behavior_type carrier(carrier_actor::stateful_pointer<carrier_state> self, compute_actor holder,
                                     std::uint64_t key,
                      std::string first_hop, std::chrono::milliseconds timeout) {
  auto& st = self->state;
  st.key = key;
  st.first_hop = std::move(first_hop);
  st.timeout = timeout;
  self->delayed_send(self, timeout, timeout_atom::value, std::uint32_t{0});
  auto resend_to = [self, holder](std::string to) {
    auto& st = self->state;
    ++st.attempt;
    st.first_hop = std::move(to);
    self->send(holder, resend_atom::value, st.key, st.first_hop, st.attempt, st.hint);
    st.hint.clear();
    self->delayed_send(self, st.timeout, timeout_atom::value, st.attempt);
  };
  return {
    [self, resend_to](peer_down_atom, const std::string& dead, const std::vector<std::string>& live) {
      auto& st = self->state;
      if (dead == st.hint)
        st.hint.clear();
      if (dead != st.first_hop)
        return;
      std::vector<candidate> c;
      for (auto& l : live)
        c.push_back({l, 0.0});
      if (auto r = choose_replacement(c, dead))
        resend_to(*r);
    },
    [self](progress_atom, const std::string& next_next) { self->state.hint = next_next; },
    [self, resend_to](timeout_atom, std::uint32_t attempt) {
      // No answer within the hop timeout: send the same output again (a hop that holds it
      // only rebinds, one that lost it computes it).
      if (attempt == self->state.attempt)
        resend_to(self->state.first_hop);
    },
    [self](done_atom) { self->quit(); },
  };
}

void finish_iteration(self_ptr self) {
  auto& st = self->state;
  double loss_sum = 0;
  for (auto& [k, l] : st.holder.losses)
    loss_sum += l;
  auto flows = static_cast<std::uint32_t>(st.flows.size());
  wire::iteration_done d{st.current, me(st), st.holder.done_count, loss_sum, live_holders(st)};
  std::sort(d.participants.begin(), d.participants.end());
  st.holder.last_done = d;
  tell(self, st.ctx->reporter, iteration_atom::value, me(st), st.current, st.holder.done_count, loss_sum, flows);
  for (auto& [id, s] : st.peers)
    st.ctx->send(self, id, service::stage, d);
  st.barrier->holder_done(d);
  resume(self, try_share(self, st.current));
}

void finish_origin(self_ptr self, std::uint64_t key) {
  auto& st = self->state;
  auto& o = st.holder.origins[key];
  o.done = true;
  report_in_flight(self);
  if (o.carrier)
    self->send(o.carrier, done_atom::value);
  if (++st.holder.done_count == static_cast<std::uint32_t>(st.ctx->spec->training.microbatches_per_holder))
    finish_iteration(self);
}

void start_iteration(self_ptr self) {
  auto& st = self->state;
  if (!st.ready || st.draining
      || st.current >= st.ctx->spec->end_iteration()) {
    st.holder.running = false;
    return;
  }
  int first_stage = 1 % stages(st);
  // The first iteration waits until this holder has heard from every data holder of the
  // roster (or 20 balancer ticks): its iteration barrier awaits the holders it holds live,
  // so a holder that started before it knew of another would average alone and diverge
  // (seen under load: dh-b averaged iteration 0 over its own share, dh-a over both).
  if (st.current == st.first_iteration && st.holder.roster_waited_ms < 20 * st.ctx->spec->routing.gwtf.tick_ms) {
    for (auto& h : st.ctx->spec->holders)
      if (h != me(st) && st.peers.count(h) == 0 && st.gone.count(h) == 0) {
        st.holder.running = false;
        st.holder.roster_waited_ms += 50;
        self->delayed_send(self, std::chrono::milliseconds(50), start_atom::value);
        return;
      }
  }
  bool swarm = swarm_routed(st); // SWARM: no flows; each call chooses its peer (compute_swarm.cpp)
  if (swarm)
    swarm_rebalance_due(self);
  std::vector<flow_hop> mine;
  for (auto& f : st.flows)
    if (f.target == me(st) && st.peers.count(f.next) > 0)
      mine.push_back(f);
  if (!mine.empty())
    st.holder.waited_ms = 0;
  else if (st.holder.waited_ms >= (st.current == 0 ? 20 : 4) * st.ctx->spec->routing.gwtf.tick_ms) {
    // (At the start, longer: in node mode the hosts are still finding each other.)
    // No ring for this holder after several balancer ticks (its relays died and the
    // survivors are full): degrade to any live first-stage host rather than stall.
    for (auto& id : live_at(st, first_stage))
      mine.push_back({me(st), me(st), id});
  }
  if (mine.empty() && !swarm) { // no flow yet: the balancers are still building rings
    st.holder.running = false;
    st.holder.waited_ms += 50;
    self->delayed_send(self, std::chrono::milliseconds(50), start_atom::value);
    return;
  }
  st.holder.running = true;
  // The microbatches of an iteration not stepped yet (overlap: the one averaged meanwhile)
  // stay: a replica that counted one may die before its stage averaged it, and the
  // microbatch is computed again from here (on_peer_down).
  for (auto it = st.holder.origins.begin(); it != st.holder.origins.end();) {
    if (it->second.carrier)
      self->send(it->second.carrier, done_atom::value);
    auto iteration = it->first >> 24;
    bool keep = iteration >= next_step(st) && iteration < st.current;
    it = keep ? std::next(it) : st.holder.origins.erase(it);
  }
  st.holder.losses.clear();
  st.holder.done_count = 0;
  auto& spec = *st.ctx->spec;
  for (int j = 0; j < spec.training.microbatches_per_holder; ++j) {
    model::microbatch_id id{st.current, st.holder.holder_index, static_cast<std::uint32_t>(j)};
    auto tokens = model::sample(*st.data, spec.training.seed, id, spec.training.microbatch_size,
                                spec.model.seq_len);
    auto [inputs, targets] = model::to_inputs_targets(tokens.rows, tokens.cols, tokens.tokens);
    auto key = id.key();
    auto t0 = clock::now();
    auto x = st.model->embed(key, inputs);
    auto* out = value_or_report(self, x, "embedding");
    report_compute(self, st.current, computed(self, t0), 0);
    if (!out)
      return;
    if (crash_now(self, "forward"))
      return;
    auto& o = st.holder.origins[key];
    o.started_ms = steady_ms();
    o.output = *out;
    o.targets = targets;
    if (swarm) {
      swarm_start(self, key);
      continue;
    }
    o.first_hop = mine[static_cast<std::size_t>(j) % mine.size()].next;
    hop_record r;
    r.mb = wire::microbatch_ref{id.iteration, id.holder, id.index, st.run_origin};
    r.path = {me(st)};
    send_activation(self, o.first_hop, r, wire::direction::forward, o.output);
    auto timeout = std::chrono::milliseconds(spec.faults.hop_timeout_ms);
    o.carrier = self->spawn<caf::linked>(carrier, compute_actor{self}, key, o.first_hop, timeout);
  }
  report_in_flight(self);
}

void on_resend(self_ptr self, std::uint64_t key, const std::string& to, std::uint32_t attempt,
               const std::string& hint, bool finished_too) {
  auto& st = self->state;
  auto it = st.holder.origins.find(key);
  if (it == st.holder.origins.end() || (it->second.done && !finished_too))
    return;
  it->second.first_hop = to;
  it->second.attempt = attempt;
  hop_record r;
  r.mb = wire::microbatch_ref{key >> 24, static_cast<std::uint32_t>(key >> 12 & 0xfff),
                              static_cast<std::uint32_t>(key & 0xfff), st.run_origin};
  r.path = {me(st)};
  r.attempt = attempt;
  send_activation(self, to, r, wire::direction::forward, it->second.output, hint);
  report_in_flight(self);
  ++st.metrics.resends;
}

} // namespace gwtf::actors::compute
