// The compute of a host: a relay stage, or a data holder (stage 0 + the iteration loop +
// microbatch carriers). Thin: the hop_ledger decides what a message means, the
// iteration_barrier when an iteration ends, model::stage computes (docs/runtime.md).
#include "actors/core/catch_up.hpp"
#include "actors/compute/compute_internal.hpp"

#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

namespace gwtf::actors {

namespace compute {

std::vector<std::string> live_at(const compute_state& st, int stage) {
  std::vector<std::string> out;
  for (auto& [id, s] : st.peers)
    if (s == stage)
      out.push_back(id);
  return out;
}

std::vector<candidate> candidates_at(const compute_state& st, int stage) {
  std::vector<candidate> out;
  for (auto& id : live_at(st, stage))
    out.push_back({id, 0.0});
  return out;
}

void resume(self_ptr self, boundary b) {
  auto& st = self->state;
  while (b != boundary::none) {
    // Microbatches queued while downloading or stepping: the ones of the current iteration go on.
    auto pending = std::move(st.stash.pending);
    st.stash.pending.clear();
    for (auto& [from, a] : pending)
      handle_forward(self, from, std::move(a));
    if (is_holder(st)) {
      // After a load the iteration in flight, if any, lost its stashes with the old state:
      // start the loaded iteration as a new run (its microbatches carry the new run, so the
      // hops rebind what they hold and the holder drops what its old run still gets back).
      // After a step, the next iteration; otherwise only if none runs.
      if (b == boundary::loaded)
        ++st.run_origin;
      if (b == boundary::stepped || b == boundary::loaded || !st.holder.running)
        start_iteration(self);
      return;
    }
    b = b == boundary::stepped ? try_share(self, st.current) : boundary::none;
  }
}

void report_failure(self_ptr self, const std::string& what) {
  tell(self, self->state.ctx->reporter, failure_atom::value, me(self->state), what);
}

void report_note(self_ptr self, const std::string& what) {
  tell(self, self->state.ctx->reporter, verdict_atom::value, me(self->state), what);
}

// routing.gwtf.idle_moves (docs/routing.md, "Moves and microbatches in flight"): a relay's
// microbatches forwarded and without their backward yet, a data holder's own not finished.
void report_in_flight(self_ptr self) {
  auto& st = self->state;
  if (!st.balancer || !st.ctx->spec->routing.gwtf.idle_moves)
    return;
  std::set<std::pair<std::string, std::string>> now;
  const auto& holders = st.ctx->spec->holders;
  if (is_holder(st)) {
    for (auto& [key, o] : st.holder.origins)
      if (!o.done && !o.first_hop.empty())
        now.emplace(me(st), o.first_hop);
  } else if (st.ledger) {
    for (auto& [key, r] : st.ledger->records())
      if (r.forwarded && !r.backward_done && r.mb.holder < holders.size())
        now.emplace(holders[r.mb.holder], r.next);
  }
  if (now == st.in_flight)
    return;
  st.in_flight = std::move(now);
  std::vector<std::string> targets, nexts;
  for (auto& [t, n] : st.in_flight) {
    targets.push_back(t);
    nexts.push_back(n);
  }
  self->send(st.balancer, inflight_atom::value, std::move(targets), std::move(nexts));
}

double computed(self_ptr self, clock::time_point t0) {
  double secs = since(t0);
  double scale = self->state.ctx->host.compute_scale;
  if (scale <= 1 || secs <= 0)
    return secs;
  std::this_thread::sleep_for(std::chrono::duration<double>((scale - 1) * secs));
  return scale * secs;
}

void report_compute(self_ptr self, std::uint64_t iteration, double seconds, double wasted) {
  auto& st = self->state;
  st.metrics.compute_s_total += seconds;
  st.metrics.wasted_s_total += wasted;
  if (seconds > 0 && st.ctx->spec->adaptive) {
    // One forward and one backward call per microbatch: the peers' estimate of what this
    // stage takes to compute on what they send it.
    st.encoder.call_ema_s = st.encoder.call_ema_s > 0 ? 0.8 * st.encoder.call_ema_s + 0.2 * seconds : seconds;
    if (st.encoder.probe)
      self->send(st.encoder.probe, compute_atom::value, 2 * st.encoder.call_ema_s);
  }
  tell(self, self->state.ctx->reporter, compute_atom::value, me(self->state), iteration, seconds, wasted);
}

std::vector<std::string> same_stage(const compute_state& st) { return live_at(st, st.ctx->stage); }

std::vector<std::string> live_holders(const compute_state& st) {
  auto out = live_at(st, 0);
  if (is_holder(st))
    out.push_back(me(st));
  return out;
}

// --- inspection -------------------------------------------------------------------------

// This actor's state for the shell (docs/shell.md): stage, iteration, replicas and the
// microbatches it holds (a data holder: the ones it originates; a relay: its hop ledger).
std::string inspect_json(self_ptr self) {
  auto& st = self->state;
  nlohmann::ordered_json mbs = nlohmann::ordered_json::array();
  auto name = [](std::uint64_t key) {
    return std::to_string(key >> 24) + "/" + std::to_string((key >> 12) & 0xfff) + "/" + std::to_string(key & 0xfff);
  };
  auto now = steady_ms();
  if (is_holder(st)) {
    for (auto& [key, o] : st.holder.origins)
      mbs.push_back({{"microbatch", name(key)},
                     {"state", o.done ? "done" : "in flight"},
                     {"first_hop", o.first_hop},
                     {"attempt", o.attempt},
                     {"age_ms", o.started_ms > 0 ? nlohmann::ordered_json(now - o.started_ms) : nullptr}});
  } else if (st.ledger) {
    for (auto& [key, r] : st.ledger->records()) {
      auto seen = st.stash.arrived_ms.find(key);
      mbs.push_back({{"microbatch", name(key)},
                     {"state", r.backward_done ? "backward done" : r.forwarded ? "forwarded" : "forward"},
                     {"prev", r.prev},
                     {"next", r.next},
                     {"attempt", r.attempt},
                     {"age_ms", seen != st.stash.arrived_ms.end() ? nlohmann::ordered_json(now - seen->second) : nullptr}});
    }
  }
  nlohmann::ordered_json out{{"mailbox", self->mailbox().size()},
                     {"stage", st.ctx->stage},
                     {"role", is_holder(st) ? "data holder" : "relay"},
                     {"ready", st.ready},
                     {"iteration", st.current},
                     {"iterations", st.ctx->spec->training.iterations},
                     {"draining", st.draining},
                     {"replicas", same_stage(st)},
                     {"flows", st.flows.size()},
                     {"stashed", st.model ? st.model->stashed() : 0},
                     {"microbatches", mbs},
                     {"compute_s_total", st.metrics.compute_s_total},
                     {"wasted_s_total", st.metrics.wasted_s_total},
                     {"resends", st.metrics.resends},
                     {"peers_lost", st.metrics.peers_lost},
                     {"share_bytes_sent", st.metrics.share_bytes},
                     {"butterfly_fallbacks", st.metrics.butterfly_fallbacks},
                     {"exactly_once_violations", st.metrics.exactly_once_violations}};
  if (st.ctx->spec->adaptive) {
    nlohmann::ordered_json links = nlohmann::ordered_json::object();
    for (auto& [id, l] : st.encoder.links)
      links[id] = {{"bandwidth_mbps", l.bandwidth_bytes_s * 8 / 1e6}, {"compute_ms", l.compute_s * 1e3}};
    out["compression"] = {{"sent_dense", st.encoder.sent_dense},
                          {"sent_sparse", st.encoder.sent_sparse},
                          {"wire_bytes", st.encoder.wire_bytes},
                          {"dense_16bit_bytes", st.encoder.dense_bytes},
                          {"compute_ms_per_microbatch", 2 * st.encoder.call_ema_s * 1e3},
                          {"links", links}};
  }
  if (st.holder.swarm) { // routing.router swarm: this trainer's queue per stage (the shell's `flows`)
    nlohmann::ordered_json queue = nlohmann::ordered_json::array();
    for (auto& p : st.holder.swarm->queue())
      queue.push_back({{"peer", p.id},
                       {"stage", p.stage},
                       {"expected_work_s", p.key},
                       {"calls_measured", p.samples},
                       {"tasks_per_s", p.throughput ? nlohmann::ordered_json(*p.throughput) : nullptr}});
    std::size_t calls = 0;
    for (auto& [key, o] : st.holder.origins)
      calls += o.trip.calls.size();
    // SWARM's rebalancing as this holder runs it (actors/core/stage_moves): its period, when it
    // looks next (null: not armed yet), and the move it ordered last, until the mover serves
    // its new stage.
    auto& rb = st.holder.rebalance;
    auto now = steady_ms();
    nlohmann::ordered_json last = nullptr;
    if (rb.move)
      last = {{"peer", rb.move->peer}, {"to_stage", rb.move->to}, {"ordered_ms_ago", now - rb.move->sent_ms}};
    out["swarm"] = {{"queue", queue},
                    {"banned", st.holder.swarm->banned_peers()},
                    {"calls_under_way", calls},
                    {"rebalance",
                     {{"every_ms", st.ctx->spec->routing.swarm.rebalance_ms},
                      {"next_in_ms", rb.next_ms > 0 ? nlohmann::ordered_json(std::max<std::int64_t>(0, rb.next_ms - now)) : nullptr},
                      {"last_move", last}}}};
  }
  if (st.ckpt.last_checkpoint)
    out["checkpoint_iteration"] = *st.ckpt.last_checkpoint;
  if (st.model)
    out["optimizer_steps"] = st.model->steps();
  if (st.agg.last_aggregation)
    out["last_aggregation"] = {{"iteration", st.agg.last_aggregation->iteration},
                               {"ms_ago", now - st.agg.last_aggregation->applied_ms},
                               {"share_to_step_ms", st.agg.last_aggregation->took_ms}};
  if (st.agg.last_hash) {
    out["applied_iteration"] = st.agg.last_hash->iteration;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(st.agg.last_hash->hash));
    out["weights_hash"] = hex;
  }
  if (is_holder(st) && st.holder.last_done && st.holder.last_done->microbatches > 0) {
    out["loss"] = st.holder.last_done->loss_sum / st.holder.last_done->microbatches;
    out["loss_iteration"] = st.holder.last_done->iteration;
  }
  return out.dump();
}

// --- messages in pieces ---------------------------------------------------------------

// A piece of a message above the frame limit (actors/core/fragments.hpp): the whole message
// once its last piece came, decoded as any frame but bounded by the largest this model makes.
std::optional<wire::message> whole_message(self_ptr self, const std::string& from, wire::fragment&& piece) {
  auto& st = self->state;
  auto got = st.pieces->add(from, std::move(piece));
  if (!got.error.empty()) {
    report_failure(self, "bad frame from " + from + ": " + got.error);
    return std::nullopt;
  }
  if (!got.whole)
    return std::nullopt;
  wire::decode_limits limits;
  limits.max_bytes = static_cast<std::size_t>(st.pieces->limits().max_message);
  auto msg = open_frame(wire_frame{std::move(*got.whole)}, limits);
  if (!msg) {
    report_failure(self, "bad frame from " + from + " (put together from pieces): " + self->system().render(msg.error()));
    return std::nullopt;
  }
  if (std::holds_alternative<wire::fragment>(*msg)) {
    report_failure(self, "bad frame from " + from + ": a message put together from pieces is itself a piece");
    return std::nullopt;
  }
  return std::move(*msg);
}

std::optional<wire::message> open_message(self_ptr self, const std::string& from, wire_frame&& frame) {
  auto msg = self->state.ctx->open(self, from, std::move(frame));
  if (msg && std::holds_alternative<wire::fragment>(*msg))
    msg = whole_message(self, from, std::move(std::get<wire::fragment>(*msg)));
  return msg;
}

// --- peers going down ----------------------------------------------------------------

void on_peer_down(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto it = st.peers.find(id);
  if (it == st.peers.end())
    return;
  auto it_stage = it->second;
  st.peers.erase(it);
  st.gone.insert(id);
  st.agg.incoming->forget(id);   // its shares under way will not complete
  st.pieces->forget(id);         // nor its messages in pieces
  st.encoder.links.erase(id);    // measured afresh if it comes back
  st.encoder.residual.erase(id); // what it was owed went with it
  if (st.departed.count(id) == 0)
    ++st.metrics.peers_lost;
  st.flows.erase(std::remove_if(st.flows.begin(), st.flows.end(),
                                [&](auto& f) { return f.next == id || f.prev == id; }),
                 st.flows.end());
  if (is_holder(st) && swarm_routed(st)) {
    swarm_peer_down(self, id, it_stage);
  } else if (is_holder(st)) {
    auto live1 = live_at(st, 1 % stages(st));
    for (auto& [key, o] : st.holder.origins) {
      if (!o.done && o.carrier) {
        self->send(o.carrier, peer_down_atom::value, id, live1);
      } else if (o.done && o.first_hop == id && st.departed.count(id) == 0) {
        // Finished, but the first-stage replica that counted it died before its stage
        // averaged this iteration: its stage-mates drop its share, so the microbatch's
        // first-stage work is redone on a replacement, which rejoins the old path after it
        // (the next hop rebinds and re-sends its stored gradient; this holder ignores the
        // second backward). As a relay's hop_ledger does for its own next hop. Not after a
        // graceful leave: that replica shared its work before it left.
        auto repl = choose_replacement(candidates_at(st, 1 % stages(st)), id);
        if (repl)
          on_resend(self, key, *repl, o.attempt + 1, o.next_next == id ? std::string{} : o.next_next, true);
      }
    }
  } else {
    bool last = st.ctx->stage + 1 == stages(st);
    for (auto& rs : st.ledger->on_peer_down(id)) {
      auto* r = st.ledger->find(rs.key);
      // The last stage hands back to the microbatch's own data holder only; with it gone,
      // its microbatch is gone too.
      if (last)
        continue;
      // A replica that left gracefully shared the work it finished: only what it had not
      // finished is redone.
      if (st.departed.count(id) > 0 && r && r->backward_done)
        continue;
      auto repl = choose_replacement(candidates_at(st, st.ctx->stage + 1), id);
      if (!repl || !st.stash.fwd_out.count(rs.key))
        continue;
      send_activation(self, *repl, *r, wire::direction::forward, st.stash.fwd_out[rs.key], rs.hint);
      st.ledger->redirect(rs.key, *repl);
      report_in_flight(self);
      ++st.metrics.resends;
    }
  }
  if (st.fetch.download.active() && st.fetch.download.source() == id && !st.ready) {
    st.fetch.download.cancel(); // the download source died: ask another replica
    request_state(self);
  }
  butterfly_peer_down(self, id); // a round it was in falls back to whole shares
  // Its share, if any, is dropped: its microbatches come back through re-sends. Not so for a
  // replica that drained and left (it shared everything it counted before its LEAVE), nor
  // for a data holder (its own microbatches, counted at stage 0 by it alone, never come back).
  if (it_stage == st.ctx->stage && st.departed.count(id) == 0 && !is_holder(st))
    for (auto i = oldest_open(st); i <= st.current + 1; ++i)
      if (st.agg.averaged.count(i) == 0)
        st.agg.shares[i].erase(id);
  // A dead holder or replica may be what an iteration boundary was waiting for.
  resume(self, try_share(self, st.current));
  if (auto i = oldest_open(st); i < st.current) // overlap: the iteration averaged meanwhile
    resume(self, try_average(self, i));
  resume(self, try_average(self, st.current));
  maybe_drained(self); // a leaving relay may have waited for this holder's verdict
  // The last replica of a relay stage is gone: no ring can close. In node mode with
  // checkpoints the hosts restore it themselves if it stays so (docs/checkpoints.md).
  if (is_holder(st) && st.ctx->spec->self_restore && it_stage >= 1 && live_at(st, it_stage).empty())
    self->delayed_send(self, restore_delay(st), lost_stage_atom::value, static_cast<std::uint32_t>(it_stage), st.current);
}

// Node mode's self-restore: a relay stage still without a live replica and the iteration
// no further after the restore delay go to membership, whose deciding holder plans the
// restore; asked again every delay until a replica is back or the process starts again.
void check_lost_stage(self_ptr self, std::uint32_t stage, std::uint64_t iteration) {
  auto& st = self->state;
  if (!live_at(st, static_cast<int>(stage)).empty() || st.current >= st.ctx->spec->end_iteration())
    return;
  // The iteration moved on since the stage went (its last replica drained before a graceful
  // leave, or work in flight finished): not stalled yet, but look again, or the iteration the
  // stage's loss does stall would never be reported (a k8s run once waited for good so).
  if (st.current == iteration)
    self->send(st.supervisor, restore_atom::value, stage, iteration);
  self->delayed_send(self, restore_delay(st), lost_stage_atom::value, stage, st.current);
}

// A peer this host had not known (a joiner, a restarted host) missed what was sent before:
// the messages it may still wait for go to it again (actors/core/catch_up.hpp).
void catch_up(self_ptr self, const std::string& id, std::int32_t stage) {
  auto& st = self->state;
  if (!st.ready)
    return;
  catch_up_state c;
  c.current = st.current;
  c.same_stage = stage == st.ctx->stage;
  c.last_done = st.holder.last_done ? &*st.holder.last_done : nullptr;
  c.norms = &st.agg.my_norm;
  c.last_share = st.agg.last_share ? &*st.agg.last_share : nullptr;
  std::optional<wire::gradient_chunk> share;
  if (auto s = st.agg.shares.find(st.current); c.same_stage && s != st.agg.shares.end())
    if (auto mine = s->second.find(me(st)); mine != s->second.end())
      share = share_chunk(st, st.current, mine->second);
  c.current_share = share ? &*share : nullptr;
  c.last_hash = st.agg.last_hash ? &*st.agg.last_hash : nullptr;
  for (auto& m : catch_up_messages(c)) {
    if (auto* share = std::get_if<wire::gradient_chunk>(&m))
      send_share_chunks(self, {id}, *share);
    else
      st.ctx->send(self, id, service::stage, m);
  }
  // Overlap: the iteration averaged while `current` computes; the peer may wait for its share.
  if (auto i = oldest_open(st); c.same_stage && i < st.current && st.agg.averaged.count(i) == 0)
    if (auto s = st.agg.shares.find(i); s != st.agg.shares.end())
      if (auto mine = s->second.find(me(st)); mine != s->second.end())
        send_share_chunks(self, {id}, share_chunk(st, i, mine->second));
}

// The stage's model; over hosts[].memory_budget_mb a relay swaps its blocks through a file
// in node.data_dir/HOST (the temporary directory without one). A swap file that cannot be
// made is reported and the stage runs in memory.
model::swap_options host_swap(const host_context& ctx) {
  model::swap_options swap;
  swap.budget_bytes = static_cast<std::int64_t>(ctx.host.memory_budget_mb * 1024 * 1024);
  swap.capacity = ctx.host.capacity; // already what the budget leaves room for (app/config/derive.cpp)
  if (swap.budget_bytes > 0) {
    std::error_code ec;
    swap.dir = ctx.spec->data_dir.empty() ? std::filesystem::temp_directory_path(ec).string()
                                          : ctx.spec->data_dir + "/" + ctx.host.name;
    std::filesystem::create_directories(swap.dir, ec);
  }
  return swap;
}

void make_model(self_ptr self) {
  auto& st = self->state;
  auto& ctx = st.ctx;
  bool remat = routing::rematerialises(ctx->spec->routing.gwtf.backward, false);
  auto swap = host_swap(*ctx);
  if (swap.budget_bytes > 0) {
    try {
      st.model.emplace(ctx->spec->model, ctx->spec->training, ctx->stage, remat, swap);
      if (st.model->resident_blocks() > 0)
        report_note(self, "layer swapping: stage " + std::to_string(ctx->stage) + " state "
                            + std::to_string(st.model->state_bytes() >> 20) + " MiB over a budget of "
                            + std::to_string(swap.budget_bytes >> 20) + " MiB: " + std::to_string(st.model->resident_blocks())
                            + " block(s) resident, the rest in " + swap.dir + "; capacity "
                            + std::to_string(ctx->host.capacity) + " microbatch(es) in flight");
      return;
    } catch (const std::exception& e) {
      report_failure(self, std::string{"hosts[].memory_budget_mb: "} + e.what() + ": the stage runs in memory");
    }
  }
  st.model.emplace(ctx->spec->model, ctx->spec->training, ctx->stage, remat);
}

// --- the behaviour ---------------------------------------------------------------

compute_actor::behavior_type compute(self_ptr self, ctx_ptr ctx, supervisor_actor supervisor) {
  ctx->meter(self, "compute");
  auto& st = self->state;
  st.ctx = ctx;
  st.supervisor = std::move(supervisor);
  { // Messages in pieces: bounded by the largest this model makes (a SWARM backward call, two
    // activations), 4 under way per peer and 4 of the largest for all peers together.
    auto& m = ctx->spec->model;
    auto values = static_cast<std::uint64_t>(ctx->spec->training.microbatch_size) * m.seq_len * m.hidden;
    auto largest = largest_message_bytes(values, static_cast<std::uint64_t>(ctx->spec->max_message_bytes));
    st.pieces.emplace(fragment_limits{largest, 4, 4 * largest});
  }
  st.run_origin = ctx->incarnation;
  if (atom_mode(st))
    return atom_behaviour(self); // training.mode atom: a whole-model peer (compute_atom.cpp)
  make_model(self);
  st.ledger = std::make_unique<hop_ledger>(ctx->host.name);
  st.barrier = std::make_unique<iteration_barrier>(ctx->spec->model.stages);
  std::uint64_t share_elements = 0; // a share holds one value per parameter of this stage
  for (auto& p : st.model->parameters())
    share_elements += static_cast<std::uint64_t>(p.tensor.numel());
  // A stage-mate has at most two iterations' shares under way (three with overlap: the one
  // averaged while the next computes).
  st.agg.incoming.emplace(share_elements, overlapped(st) ? 3 : 2, 256, ctx->spec->training.reproducible_sums == model::sum_order::exact);
  st.agg.share_elements = share_elements;
  st.ready = !ctx->joining;
  if (ctx->awaits_cut()) {
    // Node mode, plain --resume: which of its checkpoints is the cluster's cut is decided by
    // the hosts together (membership); the process then starts again with --resume-at. Until
    // then it has no weights; a host that comes after the others agreed downloads the live
    // state from a replica instead, as a joiner does.
    st.ready = false;
    report_note(self, "resuming: waiting for the cluster to agree on the iteration to resume at (the newest "
                         "of which every stage has a checkpoint on a live host)");
  } else if (ctx->spec->resume && !ctx->joining) {
    resume_from_checkpoint(self);
  }
  if (ctx->stage == 0) {
    auto& holders = ctx->spec->holders;
    st.holder.holder_index = static_cast<std::uint32_t>(std::find(holders.begin(), holders.end(), ctx->host.name)
                                                 - holders.begin());
    auto c = model::corpus::open(ctx->spec->data, ctx->spec->model.vocab, ctx->spec->model.seq_len);
    if (auto* why = std::get_if<std::string>(&c)) {
      report_failure(self, "corpus: " + *why);
    } else {
      st.data.emplace(std::move(std::get<model::corpus>(c)));
      self->send(self, start_atom::value);
    }
  }
  stall_watch(self, std::numeric_limits<std::uint64_t>::max()); // arms it
  return {
    [self](deliver_atom, const std::string& from, wire_frame& frame) {
      auto& st = self->state;
      auto msg = open_message(self, from, std::move(frame));
      if (!msg)
        return;
      std::visit(
        [&](auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, wire::activation>) {
            if (m.call == wire::call_kind::request)
              swarm_request(self, from, std::move(m));
            else if (m.call == wire::call_kind::reply)
              swarm_reply(self, from, m);
            else if (m.dir == wire::direction::forward)
              handle_forward(self, from, std::move(m));
            else
              handle_backward(self, from, m);
          } else if constexpr (std::is_same_v<T, wire::hop_progress>) {
            if (is_holder(st) && m.path.size() == 3 && m.path[0] == me(st)) {
              auto o = st.holder.origins.find(key_of(m.microbatch));
              if (o != st.holder.origins.end() && o->second.first_hop == m.path[1]) {
                o->second.next_next = m.path[2];
                if (o->second.carrier)
                  self->send(o->second.carrier, progress_atom::value, m.path[2]);
              }
            } else {
              st.ledger->on_progress(m);
            }
          } else if constexpr (std::is_same_v<T, wire::iteration_done>) {
            if (m.holder != from || stranded(self, from, m.iteration))
              return;
            auto i = m.iteration;
            take_report(st, std::move(m));
            resume(self, try_share(self, i));
          } else if constexpr (std::is_same_v<T, wire::gradient_chunk>) {
            // A stage-mate is at most one iteration ahead (a share of the next iteration shows
            // this replica behind): what is further is kept nowhere (actors/core/share_assembly).
            if (m.stage != static_cast<std::uint32_t>(st.ctx->stage) || st.gone.count(from) > 0
                || admit_share(m.iteration, oldest_open(st), st.current, st.agg.averaged.count(m.iteration) > 0)
                     != share_admission::take)
              return;
            share_span span{0, st.agg.share_elements};
            if (!m.group.empty()) { // butterfly: a part for this replica, or the sum of the sender's part
              if (open_iteration(st, m.iteration)) // the round progresses (its stall timer: stall_watch)
                st.agg.bfly[m.iteration].heard_ms = steady_ms();
              auto& owner = m.reduced ? from : me(st);
              auto at = std::lower_bound(m.group.begin(), m.group.end(), owner);
              if (at == m.group.end() || *at != owner) {
                report_failure(self, "gradient share from " + from + ": a butterfly " + (m.reduced ? "sum" : "part")
                                       + " for a group without " + owner);
                return;
              }
              span = butterfly_part(st.agg.share_elements, m.group.size(),
                                    static_cast<std::size_t>(at - m.group.begin()));
            }
            auto piece = st.agg.incoming->add(from, std::move(m), span);
            if (!piece.error.empty()) {
              report_failure(self, "gradient share from " + from + ": " + piece.error);
              return;
            }
            if (!piece.whole)
              return; // more chunks to come
            m = std::move(*piece.whole);
            auto i = m.iteration;
            if (!m.group.empty()) {
              resume(self, on_butterfly(self, from, std::move(m)));
              resume(self, try_share(self, i));
              if (st.ready && st.agg.fresh && i > st.current) {
                behind(self, from, i);
                return;
              }
              resume(self, try_average(self, i));
              return;
            }
            whole_share_came(self, i, from);
            share_data s;
            s.count = static_cast<std::int64_t>(m.microbatches);
            s.values = m.values;
            s.digest = m.keys_digest;
            for (auto& h : m.holders)
              s.holders[h.holder] += h.microbatches;
            st.agg.shares[m.iteration][from] = std::move(s);
            st.barrier->share(m.iteration, from);
            for (auto& d : m.reports) // holders' reports this replica may not hear itself
              take_report(st, std::move(d));
            resume(self, try_share(self, m.iteration));
            if (st.ready && st.agg.fresh && m.iteration > st.current) {
              behind(self, from, m.iteration);
              return;
            }
            resume(self, try_average(self, m.iteration));
          } else if constexpr (std::is_same_v<T, wire::norm_share>) {
            if (m.iteration < oldest_open(st) || stranded(self, from, m.iteration))
              return; // applied here already (a catch-up for a peer that was behind), or stranded
            st.barrier->norm(m.iteration, m.stage, m.sum_squares);
            // Stage 0's verdict counts from a data holder of the roster only (a peer that
            // claims stage 0 does not decide which microbatches the relays average).
            auto& roster = st.ctx->spec->holders;
            if (m.stage == 0 && std::find(roster.begin(), roster.end(), from) != roster.end())
              resume(self, on_verdict(self, m.iteration, from, m.holders)); // may average and apply
            resume(self, try_apply(self, m.iteration));
          } else if constexpr (std::is_same_v<T, wire::replica_hash>) {
            on_replica_hash(self, from, m);
          } else if constexpr (std::is_same_v<T, wire::stage_move>) {
            on_stage_move(self, from, m);
          } else if constexpr (std::is_same_v<T, wire::state_request>) {
            if (m.checkpoint) {
              serve_checkpoint(self, from, m);
              return;
            }
            if (!st.ready || m.stage != static_cast<std::uint32_t>(st.ctx->stage)) {
              // None here (not a replica, or one without weights yet): said at once, so that
              // the asker goes on to its next source instead of waiting out its timeout.
              st.ctx->send(self, from, service::stage, wire::state_chunk{m.transfer_id, m.stage, 0, 0, {}});
              return;
            }
            serve_state(self, from, m);
          } else if constexpr (std::is_same_v<T, wire::state_chunk>) {
            if (m.stage != static_cast<std::uint32_t>(st.ctx->stage))
              on_replica_chunk(self, from, m); // a peer's checkpoint, to keep
            else
              resume(self, on_state_chunk(self, from, m));
          } else {
            report_failure(self, std::string{"unexpected "} + wire::kind_name(*msg) + " from " + from);
          }
        },
        *msg);
    },
    [self](peer_up_atom, const std::string& id, std::int32_t stage) {
      auto& st = self->state;
      if (stage < 0) {
        on_peer_down(self, id);
        return;
      }
      auto known = st.peers.find(id);
      bool is_new = known == st.peers.end() || known->second != stage;
      st.peers[id] = stage;
      st.gone.erase(id);
      st.departed.erase(id);
      if (!st.ready && (stage == st.ctx->stage || st.fetch.copy_iteration))
        request_state(self);
      if (is_new)
        catch_up(self, id, stage);
      if (!st.stash.stalled.empty() && stage == (st.ctx->stage + 1) % stages(st))
        resume_stalled(self);
    },
    [self](peer_down_atom, const std::string& id) { on_peer_down(self, id); },
    [self](lost_stage_atom, std::uint32_t stage, std::uint64_t iteration) { check_lost_stage(self, stage, iteration); },
    [self](call_atom, std::uint64_t key, std::uint32_t n) { swarm_timeout(self, key, n); },
    [self](timeout_atom, std::uint64_t transfer, std::uint64_t had) { on_transfer_timeout(self, transfer, had); },
    [self](fetch_atom) {
      self->state.fetch.fetch_armed = false;
      request_state(self, true);
    },
    [self](left_atom, const std::string& id) { self->state.departed.insert(id); },
    [self](stop_atom) {
      auto& st = self->state;
      st.draining = true;
      // A planned leave of a stage's last replica costs what a crash of it does: said up front
      // (not once the run is complete: then every host leaves, the last one of each stage too).
      if (!is_holder(st) && st.ctx->stage >= 1 && live_at(st, st.ctx->stage).empty()
          && st.current < st.ctx->spec->end_iteration())
        report_note(self, "leaving as the only live replica of stage " + std::to_string(st.ctx->stage)
                               + ": no ring can close without it; with checkpoints the hosts restore the stage "
                                 "from the newest iteration every stage has one of and train again from there "
                                 "(docs/checkpoints.md), without them training stops; drain a replica of a stage "
                                 "with two or more instead");
      maybe_drained(self);
    },
    [self](flows_atom, const std::vector<std::string>& t, const std::vector<std::string>& p,
           const std::vector<std::string>& n) {
      auto& st = self->state;
      st.flows.clear();
      for (std::size_t i = 0; i < t.size() && i < p.size() && i < n.size(); ++i)
        st.flows.push_back({t[i], p[i], n[i]});
    },
    [self](crash_atom, const std::string& phase) {
      if (phase == "actor") // injected failure of this actor: its supervisor restarts the host's actors
        self->quit(caf::make_error(caf::sec::runtime_error, "injected actor failure"));
      else if (phase == "double_count" && self->state.model) // the exactly-once check's own test
        self->state.model->add_next_twice();
      else
        self->state.armed = phase;
    },
    [self](start_atom) {
      if (!self->state.holder.running)
        start_iteration(self);
    },
    [self](tick_atom, std::uint64_t iteration) { stall_watch(self, iteration); },
    [self](checkpoint_atom, std::uint64_t iteration) {
      auto& last = self->state.ckpt.last_checkpoint;
      last = std::max(last.value_or(0), iteration);
    },
    [self](inspect_atom) -> std::string { return inspect_json(self); },
    [self](peer_speed_atom, const std::string& id, double bytes_per_s, double compute_s) {
      auto& l = self->state.encoder.links[id];
      l.bandwidth_bytes_s = bytes_per_s;
      if (compute_s > 0)
        l.compute_s = compute_s;
    },
    [self](probe_atom, probe_actor probe) { self->state.encoder.probe = std::move(probe); },
    [self](balancer_handle_atom, balancer_actor balancer) {
      self->state.balancer = std::move(balancer);
      self->state.in_flight.clear();
      report_in_flight(self);
    },
    [self](resend_atom, std::uint64_t key, const std::string& to, std::uint32_t attempt,
           const std::string& hint) { on_resend(self, key, to, attempt, hint); },
  };
}

} // namespace compute

compute_actor spawn_compute(caf::local_actor* parent, supervisor_actor supervisor,
                            std::shared_ptr<const host_context> ctx) {
  // Detached: in node mode a busy host stays alive to its peers; a host slowed by
  // compute_scale sleeps in its compute, which must not hold a worker other hosts share.
  if (ctx->spec->compute_detached || ctx->host.compute_scale > 1)
    return parent->spawn<caf::linked + caf::detached>(compute::compute, std::move(ctx), std::move(supervisor));
  return parent->spawn<caf::linked>(compute::compute, std::move(ctx), std::move(supervisor));
}

} // namespace gwtf::actors
