// A relay stage (or the head stage at a data holder): forward and backward of one microbatch
// hop, with the hop_ledger deciding what a message means (docs/runtime.md).
#include "actors/compute/compute_internal.hpp"

#include "model/sparse.hpp"

namespace gwtf::actors::compute {

// An injected crash strikes after the computation it was armed for has run.
bool crash_now(self_ptr self, const char* phase) {
  auto& st = self->state;
  if (st.armed != phase)
    return false;
  st.armed.clear();
  self->send(st.supervisor, crash_atom::value, std::string{"any"});
  return true;
}

// compression.mode adaptive: the tensor as `to` gets it over its link (routing/compression.hpp):
// dense fp16 while the link keeps up with the receiver's compute, else its top-k values with
// their positions. Gradients carry what earlier ones of the same iteration to `to` left out
// (error feedback); a residual of an earlier iteration is dropped: the weights that made it
// have stepped since (docs/compression.md).
wire::tensor_payload adaptive_payload(compute_state& st, const std::string& to, wire::direction dir,
                                      const torch::Tensor& t, std::uint64_t iteration) {
  std::optional<double> bandwidth;
  double receiver_s = 0;
  if (auto l = st.encoder.links.find(to); l != st.encoder.links.end()) {
    if (l->second.bandwidth_bytes_s > 0)
      bandwidth = l->second.bandwidth_bytes_s;
    receiver_s = l->second.compute_s / 2; // one of its forward or backward calls
  }
  auto plan = routing::plan_wire(*st.ctx->spec->adaptive, t.numel(), bandwidth, receiver_s);
  torch::Tensor* residual = nullptr;
  if (dir == wire::direction::backward) {
    auto& owed = st.encoder.residual[to];
    if (owed.iteration != iteration)
      owed = {torch::Tensor(), iteration};
    residual = &owed.values;
  }
  st.encoder.dense_bytes += static_cast<double>(t.numel()) * 2;
  if (!plan.sparse) {
    ++st.encoder.sent_dense;
    st.encoder.wire_bytes += plan.bytes;
    auto x = t;
    if (residual && residual->defined() && residual->sizes() == t.sizes()) {
      x = t + *residual; // what earlier sparse gradients left out goes now
      *residual = torch::Tensor();
    }
    return to_payload(x.to(torch::kHalf));
  }
  ++st.encoder.sent_sparse;
  auto s = model::top_k(t, plan.keep, torch::kHalf, residual);
  st.encoder.wire_bytes += static_cast<double>(s.indices.size() * (2 + routing::sparse_index_bytes));
  auto p = to_payload(s.values);
  p.shape.assign(t.sizes().begin(), t.sizes().end());
  p.sparse = true;
  p.indices = std::move(s.indices);
  return p;
}

wire::tensor_payload dense_payload(const compute_state& st, const torch::Tensor& t) {
  switch (st.ctx->spec->activation_wire_type) { // compression.mode
    case wire::dtype::float16: return to_payload(t.to(torch::kHalf));
    case wire::dtype::bfloat16: return to_payload(t.to(torch::kBFloat16));
    default: return to_payload(t);
  }
}

void send_activation(self_ptr self, const std::string& to, const hop_record& r, wire::direction dir,
                     const torch::Tensor& t, const std::string& continue_to) {
  wire::activation a;
  a.microbatch = r.mb;
  a.dir = dir;
  a.path = r.path;
  auto& st = self->state;
  a.tensor = st.ctx->spec->adaptive ? adaptive_payload(st, to, dir, t, r.mb.iteration) : dense_payload(st, t);
  a.attempt = r.attempt;
  a.continue_to = continue_to;
  self->state.ctx->send(self, to, service::stage, a);
}

void progress_upstream(self_ptr self, const hop_record& r) {
  // path = [..., u, prev, self]: tell u where the microbatch went after prev.
  if (r.path.size() >= 3 && r.path[r.path.size() - 3] != me(self->state))
    self->state.ctx->send(self, r.path[r.path.size() - 3], service::stage,
                          wire::hop_progress{r.mb, r.path});
}

std::string next_for(self_ptr self, const hop_record& r, const std::string& hint) {
  auto& st = self->state;
  int next_stage = (st.ctx->stage + 1) % stages(st);
  const auto& holder = st.ctx->spec->holders.at(r.mb.holder);
  if (next_stage == 0)
    return holder;
  if (!hint.empty()) {
    auto it = st.peers.find(hint);
    if (it != st.peers.end() && it->second == next_stage)
      return hint;
  }
  auto n = next_hop(st.flows, r.prev, holder, r.mb.index, candidates_at(st, next_stage));
  return n ? *n : std::string{};
}

// --- forward / backward at a relay or at the head ------------------------------------

// The gradient of an input that arrived sparse, at the positions the sender sent only: the
// others were zeros here whatever the sender computed, so its output there did not reach the
// loss and gets no gradient. Passing it on whole (straight-through) trained the sender's
// dropped values too: in the demo forward-only top-k at density 0.3 did no better than at 0.1.
torch::Tensor sent_positions_only(const compute_state& st, std::uint64_t key, const torch::Tensor& g) {
  auto m = st.stash.sparse_in.find(key);
  if (m == st.stash.sparse_in.end() || m->second.sizes() != g.sizes())
    return g;
  return g * m->second;
}

// Whether an activation or its gradient from a peer is one this stage can take: a float type
// and the shape [microbatch_size, seq_len, hidden]. Anything else is reported and dropped (a
// peer's bytes must never reach LibTorch unchecked: a wrong shape would throw there).
bool acceptable(self_ptr self, const std::string& from, const wire::activation& a) {
  return acceptable_tensor(self, std::string{a.dir == wire::direction::forward ? "activation" : "gradient"} + " from " + from,
                           a.tensor);
}

bool acceptable_tensor(self_ptr self, const std::string& what, const wire::tensor_payload& t) {
  auto& spec = *self->state.ctx->spec;
  if (t.type != wire::dtype::float32 && t.type != wire::dtype::float16 && t.type != wire::dtype::bfloat16) {
    report_failure(self, what + ": not a float tensor: dropped");
    return false;
  }
  std::vector<std::int64_t> want{spec.training.microbatch_size, spec.model.seq_len, spec.model.hidden};
  if (t.shape != want) {
    std::string got;
    for (auto d : t.shape)
      got += (got.empty() ? "" : ", ") + std::to_string(d);
    report_failure(self, what + ": shape [" + got + "], expected [" + std::to_string(want[0]) + ", "
                           + std::to_string(want[1]) + ", " + std::to_string(want[2]) + "]: dropped");
    return false;
  }
  return true;
}

// An acceptable tensor as fp32 (compression.mode sends 16-bit floats).
torch::Tensor as_fp32(const wire::tensor_payload& t) {
  auto x = to_torch(t);
  return t.type == wire::dtype::float32 ? x : x.to(torch::kFloat);
}

void queue_early(self_ptr self, const std::string& what, const std::string& from, wire::activation a) {
  auto& st = self->state;
  auto limit = early_queue_limit(static_cast<std::size_t>(st.ctx->spec->training.microbatches_per_holder),
                                 st.ctx->spec->holders.size());
  switch (admit_early(st.ready, st.current, a.microbatch.iteration, st.stash.pending.size(), limit)) {
    case early_admission::queue:
      st.stash.pending.emplace_back(from, std::move(a));
      return;
    case early_admission::too_far:
      report_failure(self, what + ": iteration " + std::to_string(a.microbatch.iteration) + " is too far ahead of "
                             + std::to_string(st.current) + ": dropped");
      return;
    case early_admission::full:
      report_failure(self, what + ": " + std::to_string(limit) + " forwards wait for this relay's weights or step "
                             "already: dropped");
      return;
  }
}

void handle_forward(self_ptr self, const std::string& from, wire::activation a) {
  auto& st = self->state;
  if (a.call == wire::call_kind::request) { // a SWARM call queued before the weights (resume)
    swarm_request(self, from, std::move(a));
    return;
  }
  if (!acceptable(self, from, a))
    return;
  if (!st.ready || a.microbatch.iteration > st.current) {
    queue_early(self, "activation from " + from, from, std::move(a));
    return;
  }
  if (a.microbatch.iteration < st.current && !open_iteration(st, a.microbatch.iteration))
    return; // an iteration already applied: a late duplicate (with overlap the one before stays open until its step:
            // a repair of it passes stages, and data holders' heads, that averaged it already)
  if (a.microbatch.holder >= st.ctx->spec->holders.size()) {
    report_failure(self, "activation from " + from + " names data holder "
                           + std::to_string(a.microbatch.holder) + ", which does not exist");
    return;
  }
  auto key = key_of(a.microbatch);
  bool head = is_holder(st);
  if (head && st.ctx->spec->holders[a.microbatch.holder] != me(st)) {
    report_failure(self, "activation from " + from + " for another data holder's microbatch");
    return;
  }
  if (head && st.holder.origins.count(key) == 0) {
    report_failure(self, "activation from " + from + " for a microbatch this holder never sent");
    return;
  }
  if (head && a.microbatch.origin != st.run_origin)
    return; // sent by this holder's previous run (it restarted or reloaded): its state is gone
  auto action = st.ledger->on_forward(from, a);
  if (action == forward_action::ignore)
    return;
  if (action == forward_action::compute)
    st.stash.arrived_ms.emplace(key, steady_ms());

  auto* r = st.ledger->find(key);
  if (action == forward_action::rebind) {
    progress_upstream(self, *r);
    if (r->backward_done) {
      auto& g = head ? st.stash.head_grad[key] : st.stash.grad_out[key];
      send_activation(self, r->prev, *r, wire::direction::backward, g);
    } else if (!head && r->forwarded) {
      // The upstream timed out waiting: this hop's output, or what came of it, may have been
      // lost further on (a frame dropped on a connection going down or not bound yet). Send it
      // on with the new attempt: a hop that holds it rebinds and passes it on, the one that
      // lost it computes it.
      auto out = st.stash.fwd_out.find(key);
      auto next = st.peers.count(r->next) > 0 ? r->next : next_for(self, *r, {});
      if (out != st.stash.fwd_out.end() && !next.empty()) {
        send_activation(self, next, *r, wire::direction::forward, out->second);
        st.ledger->sent_forward(key, next);
        report_in_flight(self);
      }
    }
    return;
  }
  auto t0 = clock::now();
  auto input = as_fp32(a.tensor);
  if (a.tensor.sparse)
    st.stash.sparse_in[key] = input != 0;
  else
    st.stash.sparse_in.erase(key);
  if (head) {
    auto res = st.model->head(key, input, st.holder.origins[key].targets);
    auto* h = value_or_report(self, res, "head of microbatch from " + from);
    double secs = computed(self, t0);
    report_compute(self, a.microbatch.iteration, secs, 0);
    if (!h)
      return;
    if (crash_now(self, "backward"))
      return;
    if (a.microbatch.iteration == st.current) // not a repair of the iteration before (overlap)
      st.holder.losses.emplace(key, h->loss);
    st.stash.head_grad[key] = sent_positions_only(st, key, h->grad_input);
    progress_upstream(self, *r);
    send_activation(self, r->prev, *r, wire::direction::backward, st.stash.head_grad[key]);
    st.ledger->sent_backward(key);
    report_in_flight(self);
    return;
  }
  auto out = st.model->forward(key, input);
  auto* y = value_or_report(self, out, "forward of microbatch from " + from);
  double secs = computed(self, t0);
  report_compute(self, a.microbatch.iteration, secs, 0);
  if (!y)
    return;
  if (crash_now(self, "forward"))
    return;
  st.stash.fwd_seconds[key] = secs;
  progress_upstream(self, *r);
  auto next = next_for(self, *r, a.continue_to);
  st.stash.fwd_out[key] = *y;
  if (next.empty()) {
    // No next-stage host known yet (node mode: membership still growing) or all dead: the
    // output waits for the next one to come up (peer_up), or for a re-send.
    report_failure(self, "no live next hop for a microbatch; waiting for one");
    st.stash.stalled.insert(key);
    return;
  }
  send_activation(self, next, *r, wire::direction::forward, *y);
  st.ledger->sent_forward(key, next);
  report_in_flight(self);
}

// A next-stage host came up: the outputs that found no next hop go on.
void resume_stalled(self_ptr self) {
  auto& st = self->state;
  for (auto it = st.stash.stalled.begin(); it != st.stash.stalled.end();) {
    auto key = *it;
    auto* r = st.ledger->find(key);
    auto out = st.stash.fwd_out.find(key);
    if (!r || out == st.stash.fwd_out.end() || !open_iteration(st, r->mb.iteration)) {
      it = st.stash.stalled.erase(it);
      continue;
    }
    auto next = next_for(self, *r, {});
    if (next.empty()) {
      ++it;
      continue;
    }
    send_activation(self, next, *r, wire::direction::forward, out->second);
    st.ledger->sent_forward(key, next);
    report_in_flight(self);
    it = st.stash.stalled.erase(it);
  }
}

void finish_origin(self_ptr self, std::uint64_t key);

void handle_backward(self_ptr self, const std::string& from, const wire::activation& a) {
  if (!acceptable(self, from, a))
    return;
  auto& st = self->state;
  if (!st.ready || !open_iteration(st, a.microbatch.iteration))
    return;
  auto key = key_of(a.microbatch);
  auto t0 = clock::now();
  if (is_holder(st)) {
    auto it = st.holder.origins.find(key);
    if (it == st.holder.origins.end() || it->second.done || a.microbatch.origin != st.run_origin)
      return; // unknown, finished, or of this holder's previous run
    auto res = st.model->embed_backward(key, as_fp32(a.tensor));
    auto* ok = value_or_report(self, res, "embedding backward of microbatch from " + from);
    report_compute(self, a.microbatch.iteration, computed(self, t0), 0);
    if (!ok || crash_now(self, "backward"))
      return;
    finish_origin(self, key);
    return;
  }
  if (auto* held = st.ledger->find(key); held != nullptr && held->mb.origin != a.microbatch.origin)
    return; // the gradient of another run of its holder than the forward held here
  if (!st.ledger->on_backward(key))
    return;
  auto res = st.model->backward(key, as_fp32(a.tensor));
  auto* g = value_or_report(self, res, "backward of microbatch from " + from);
  report_compute(self, a.microbatch.iteration, computed(self, t0), 0);
  if (!g)
    return;
  if (crash_now(self, "backward"))
    return;
  auto* r = st.ledger->find(key);
  st.stash.grad_out[key] = sent_positions_only(st, key, *g);
  send_activation(self, r->prev, *r, wire::direction::backward, st.stash.grad_out[key]);
  st.ledger->sent_backward(key);
  report_in_flight(self);
  if (st.agg.shared.count(a.microbatch.iteration) > 0 && st.agg.averaged.count(a.microbatch.iteration) == 0) {
    send_share(self, a.microbatch.iteration); // a repair after this replica shared
    resume(self, try_average(self, a.microbatch.iteration));
  }
}

} // namespace gwtf::actors::compute
