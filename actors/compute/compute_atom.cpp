// training.mode atom (docs/atom.md): the compute of a host as one of ATOM's whole-model peers.
// It trains the whole model (model::atom_peer, relay stages swapped over the host's memory
// budget) on the microbatches of its own data-holder index, one local step per iteration, and
// at the end of each round (actors/core/atom_rounds: every training.atom.sync_every steps)
// sends its parameters to every live peer as a whole GRADIENT_CHUNK share (fp32, in chunks).
// A round is complete once every live member's parameters are in; the peer tells the others
// whose it holds (NORM_SHARE), and lands what every live contributor holds: their average,
// weighted by microbatches, plus this peer's steps since it sent (training.averaging
// overlap: the next round's iterations but its last train meanwhile; sync: it waits). A
// joiner asks a peer for the state (STATE_REQUEST);
// the peer names it as a member from the round after its next contribution (in that
// contribution: every peer learns it before it can complete that round), and answers once
// that round landed: its average and the peer's optimizer state (STATE_CHUNKs).
#include <cstring>

#include "actors/compute/compute_internal.hpp"
#include "actors/core/key_digest.hpp"
#include "model/hash.hpp"

namespace gwtf::actors::compute {

namespace {

constexpr std::uint32_t atom_state_magic = 0x41544f4d; // "ATOM"

const std::vector<std::string>& roster(const compute_state& st) { return st.ctx->spec->holders; }

std::uint64_t average_hash(const torch::Tensor& avg) {
  auto c = avg.contiguous();
  return model::fast_hash(static_cast<const std::uint8_t*>(c.data_ptr()), static_cast<std::size_t>(c.nbytes()));
}

void send_state(self_ptr self, const std::string& to, std::uint64_t transfer);

void schedule(self_ptr self) {
  auto& st = self->state;
  if (st.atom.scheduled)
    return;
  st.atom.scheduled = true;
  self->send(self, start_atom::value);
}

// Round r is complete here: this peer tells every peer whose parameters it holds (a NORM_SHARE
// of stage 0: the round's last iteration, the contributors as holders), then lands what
// every live contributor holds: its average (exactly-once checked, reported, hashed).
void try_land(self_ptr self) {
  auto& st = self->state;
  auto& a = st.atom;
  if (!a.pending)
    return;
  auto r = *a.pending;
  auto last = a.rounds->iterations_of(r).second - 1;
  if (!a.announced) {
    auto complete = a.rounds->complete(r);
    if (!complete)
      return;
    a.announced = *complete;
    wire::norm_share holds{last, 0, 0, {}};
    for (auto& who : *complete) {
      auto* c = a.rounds->of(r, who);
      holds.holders.push_back({who, static_cast<std::uint32_t>(c ? std::max<std::int64_t>(0, c->microbatches) : 0)});
    }
    // Every live peer, as the contributions go: a joiner that loaded may still be stage -1
    // here (its new stage comes by gossip) and waits for this announcement in its first round.
    for (auto& [id, stage] : st.peers)
      st.ctx->send(self, id, service::stage, holds);
  }
  auto contributors = a.rounds->agreed(r, *a.announced);
  if (!contributors)
    return;
  for (auto& who : *a.announced)
    if (!std::binary_search(contributors->begin(), contributors->end(), who))
      report_note(self, "atom round " + std::to_string(r) + ": " + who
                          + "'s parameters are left out (it went down before every live peer had them)");
  std::vector<std::pair<std::int64_t, torch::Tensor>> in;
  std::vector<std::uint64_t> digests;
  for (auto& who : *contributors) {
    auto v = a.values[r].find(who);
    auto* c = a.rounds->of(r, who);
    digests.push_back(c ? c->keys_digest : 0); // one per contributor, as the driver reads them
    if (v == a.values[r].end() || !c || c->microbatches < 1)
      continue; // an empty contribution (a peer that trained nothing) weighs nothing
    in.emplace_back(c->microbatches, v->second);
  }
  if (auto why = a.rounds->check(r, *contributors); !why.empty()) {
    ++st.metrics.exactly_once_violations;
    report_failure(self, "exactly-once: atom round " + std::to_string(r) + ": " + why);
  }
  auto avg = model::average_parameters(in);
  if (auto* e = std::get_if<std::string>(&avg)) {
    report_failure(self, "atom round " + std::to_string(r) + ": " + *e);
    return;
  }
  auto& average = std::get<torch::Tensor>(avg);
  tell(self, st.ctx->reporter, averaged_atom::value, me(st), std::uint32_t{0}, last, *contributors, digests);
  if (auto landed = a.peer->land(average, a.sent.at(r)); std::holds_alternative<std::string>(landed)) {
    report_failure(self, "atom round " + std::to_string(r) + ": " + std::get<std::string>(landed));
    return;
  }
  a.last_average = average;
  a.landed = r;
  a.pending.reset();
  a.announced.reset();
  a.rounds->close(r);
  a.values.erase(a.values.begin(), a.values.upper_bound(r));
  a.sent.erase(a.sent.begin(), a.sent.upper_bound(r));
  st.agg.incoming->forget_before(last + 1); // chunks carry the round's last iteration
  // Peers that averaged the same contributions hold the same average: the driver compares
  // these hashes as it compares replicas' weights.
  tell(self, st.ctx->reporter, applied_atom::value, me(st), std::uint32_t{0}, last, average_hash(average));
  for (auto j = a.joiners.begin(); j != a.joiners.end();) // their round comes next: this average is theirs
    if (j->second.first == r + 1) {
      send_state(self, j->first, j->second.second);
      j = a.joiners.erase(j);
    } else {
      ++j;
    }
  schedule(self);
}

// The end of round r here: this peer's parameters and what it trained go to every live peer.
void contribute(self_ptr self, std::uint64_t r) {
  auto& st = self->state;
  auto& a = st.atom;
  atom_rounds::contribution c{a.trained_from, a.next, static_cast<std::int64_t>(a.keys.size()), key_digest(a.keys)};
  auto values = a.peer->contribution();
  a.sent[r] = values;
  a.values[r][me(st)] = values;
  a.rounds->contributed(me(st), r, c);
  tell(self, st.ctx->reporter, share_atom::value, me(st), std::uint32_t{0}, a.next - 1, a.keys);
  wire::gradient_chunk whole;
  whole.iteration = a.next - 1; // the round's last iteration: the receivers derive the round and the range
  whole.stage = 0;
  whole.contributors = {me(st)};
  whole.microbatches = static_cast<std::uint64_t>(c.microbatches);
  whole.total_elements = static_cast<std::uint64_t>(values.numel());
  whole.values = to_payload(values); // fp32: parameters do not take bf16's rounding
  whole.holders = {{me(st), static_cast<std::uint32_t>(c.microbatches)}};
  for (auto& [j, at] : a.joiners) // a member from the next round: every peer learns it here
    if (at.first == r + 1)
      whole.holders.push_back({j, 0});
  whole.keys_digest = c.keys_digest;
  std::vector<std::string> to;
  for (auto& [id, stage] : st.peers)
    if (st.gone.count(id) == 0)
      to.push_back(id);
  if (st.armed == "averaging") { // an injected crash while sending: only the first half get them
    to.resize(to.size() / 2);
    send_share_chunks(self, to, whole);
    crash_now(self, "averaging");
    return;
  }
  send_share_chunks(self, to, whole);
  a.keys.clear();
  a.trained_from = a.next;
  a.pending = r;
  try_land(self);
}

// One iteration: its microbatches forward and backward, the local step, and at a round's end
// the contribution. With a round pending, sync waits for it to land; overlap trains on, but
// contributes the next round only after the pending one landed.
void atom_iteration(self_ptr self) {
  auto& st = self->state;
  auto& a = st.atom;
  auto& spec = *st.ctx->spec;
  a.scheduled = false;
  if (!st.ready || st.draining || a.next >= spec.end_iteration())
    return;
  if (!a.started) {
    // The founding members: every roster peer heard before iteration 0 (or after 20 ticks,
    // the ones heard by then); a peer met later joins a later round.
    for (auto& h : roster(st))
      if (h != me(st) && st.peers.count(h) == 0 && st.gone.count(h) == 0
          && st.holder.roster_waited_ms < 20 * spec.routing.gwtf.tick_ms) {
        st.holder.roster_waited_ms += 50;
        a.scheduled = true;
        self->delayed_send(self, std::chrono::milliseconds(50), start_atom::value);
        return;
      }
    for (auto& [id, stage] : st.peers)
      if (stage == 0) // a joiner still loading (-1) is named by the peer that serves it
        a.rounds->member(id, a.rounds->round_of(a.next));
    a.started = true;
  }
  if (a.pending && (!overlapped(st) || a.rounds->ends_round(a.next) || a.next + 1 >= spec.end_iteration()))
    return; // try_land schedules the next iteration
  auto i = a.next;
  auto t0 = clock::now();
  double loss_sum = 0;
  auto per = spec.training.microbatches_per_holder;
  for (int j = 0; j < per; ++j) {
    model::microbatch_id id{i, st.holder.holder_index, static_cast<std::uint32_t>(j)};
    auto tokens = model::sample(*st.data, spec.training.seed, id, spec.training.microbatch_size, spec.model.seq_len);
    if (crash_now(self, "forward") || crash_now(self, "backward"))
      return;
    auto loss = a.peer->train(id.key(), tokens);
    auto* l = value_or_report(self, loss, "atom microbatch");
    if (!l)
      return;
    loss_sum += *l;
    a.keys.push_back(id.key());
  }
  auto step = a.peer->step(static_cast<std::int64_t>(i));
  if (!value_or_report(self, step, "atom local step " + std::to_string(i)))
    return;
  report_compute(self, i, computed(self, t0), 0);
  a.next = i + 1;
  st.current = a.next;
  tell(self, st.ctx->reporter, iteration_atom::value, me(st), i, static_cast<std::uint32_t>(per), loss_sum,
       std::uint32_t{0});
  if (a.rounds->ends_round(i))
    contribute(self, a.rounds->round_of(i));
  try_land(self); // overlap: the pending round may be complete by now
  schedule(self);
}

// A peer's parameters for a round, chunk by chunk.
void on_contribution(self_ptr self, const std::string& from, wire::gradient_chunk&& m) {
  auto& st = self->state;
  auto& a = st.atom;
  auto r = a.rounds->round_of(m.iteration);
  // Not an atom share, or a round closed here or further than any peer can be (a joiner keeps
  // any round until it knows its own: the newest three).
  if (m.stage != 0 || !m.group.empty() || st.gone.count(from) > 0 || !a.rounds->ends_round(m.iteration)
      || (st.ready && (r < a.rounds->open_from() || r > a.rounds->open_from() + 2)))
    return;
  auto piece = st.agg.incoming->add(from, std::move(m));
  if (!piece.error.empty()) {
    report_failure(self, "atom parameters from " + from + ": " + piece.error);
    return;
  }
  if (!piece.whole)
    return;
  auto& w = *piece.whole;
  // Its iterations: the ones up to the round's last that its microbatches fill (a joiner
  // trains from a round's start, as every peer); a count that fills none exactly fails the
  // exactly-once check.
  auto per = static_cast<std::uint64_t>(st.ctx->spec->training.microbatches_per_holder);
  auto end = w.iteration + 1;
  auto first = std::max(a.rounds->iterations_of(r).first, end - std::min(end, w.microbatches / per));
  atom_rounds::contribution c{first, end, static_cast<std::int64_t>(w.microbatches), w.keys_digest};
  for (auto& h : w.holders) // joiners the sender serves: members from the next round
    if (h.microbatches == 0 && h.holder != from && h.holder != me(st) && st.gone.count(h.holder) == 0)
      a.rounds->member(h.holder, r + 1);
  if (!a.rounds->contributed(from, r, c))
    return;
  a.values[r][from] = as_fp32(w.values);
  while (!st.ready && a.values.size() > 3)
    a.values.erase(a.values.begin());
  try_land(self);
}

// --- a joiner's download of the newest average -------------------------------------

// The state a joiner gets: magic, round, the round's average (fp32), then this peer's
// optimizer state (model::atom_peer::export_state, with its own weights, which the average
// replaces).
void send_state(self_ptr self, const std::string& to, std::uint64_t transfer) {
  auto& st = self->state;
  auto& a = st.atom;
  auto state = a.peer->export_state();
  auto avg = static_cast<std::size_t>(a.last_average.nbytes());
  std::vector<std::uint8_t> blob(16 + avg + state.size());
  std::uint32_t magic = atom_state_magic;
  std::uint32_t pad = 0;
  std::uint64_t round = *a.landed;
  std::memcpy(blob.data(), &magic, 4);
  std::memcpy(blob.data() + 4, &pad, 4);
  std::memcpy(blob.data() + 8, &round, 8);
  std::memcpy(blob.data() + 16, a.last_average.contiguous().data_ptr(), avg);
  std::memcpy(blob.data() + 16 + avg, state.data(), state.size());
  auto chunk = std::max<std::size_t>(1024, wire_chunk_bytes(*st.ctx->spec));
  for (std::size_t off = 0; off < blob.size(); off += chunk) {
    auto n = std::min(chunk, blob.size() - off);
    st.ctx->send(self, to, service::stage,
                 wire::state_chunk{transfer, 0, off, blob.size(),
                                   std::vector<std::uint8_t>(blob.begin() + static_cast<std::ptrdiff_t>(off),
                                                             blob.begin() + static_cast<std::ptrdiff_t>(off + n))});
  }
}

// A joiner asks: it takes part from the round after this peer's next contribution, which
// names it, and gets the average of that contribution's round once it landed here.
void serve_average(self_ptr self, const std::string& from, const wire::state_request& r) {
  auto& st = self->state;
  auto& a = st.atom;
  auto next = a.pending ? *a.pending + 1 : a.landed ? *a.landed + 1 : 0; // the next round it contributes
  auto last = a.rounds->round_of(st.ctx->spec->end_iteration() - 1);
  if (!st.ready || r.checkpoint || r.stage != 0) { // none here
    st.ctx->send(self, from, service::stage, wire::state_chunk{r.transfer_id, r.stage, 0, 0, {}});
    return;
  }
  if (!a.pending && a.landed && *a.landed == last) { // the run's last average landed here: take it, done
    send_state(self, from, r.transfer_id);
    return;
  }
  if (next > last) { // the last round is contributed and lands soon: its average is the joiner's
    a.joiners[from] = {last + 1, r.transfer_id};
    return;
  }
  // No round left to train after `next` if it is the last: the joiner gets its average all the same.
  a.joiners[from] = {next + 1, r.transfer_id};
  if (next < last)
    a.rounds->member(from, next + 1);
}

void ask_average(self_ptr self) {
  auto& st = self->state;
  auto& a = st.atom;
  if (st.ready || !a.source.empty())
    return;
  for (auto& [id, stage] : st.peers)
    if (st.gone.count(id) == 0 && stage == 0) { // a peer that trains (not another joiner)
      a.source = id;
      a.download.clear();
      st.ctx->send(self, id, service::stage, wire::state_request{++a.transfer, 0, false, 0});
      return;
    }
}

void on_average_chunk(self_ptr self, const std::string& from, const wire::state_chunk& c) {
  auto& st = self->state;
  auto& a = st.atom;
  if (st.ready || from != a.source || c.transfer_id != a.transfer)
    return;
  auto n = static_cast<std::uint64_t>(a.peer->parameter_count());
  auto most = 16 + 4 * n + 16 * n + (4u << 20); // the average, then weights, moments, names
  if (c.total_bytes == 0) { // none there (not ready, or the run ends first): ask again later
    a.source.clear();
    self->delayed_send(self, std::chrono::milliseconds(200), fetch_atom::value);
    return;
  }
  if (c.total_bytes < 16 + 4 * n || c.total_bytes > most || c.offset != a.download.size()
      || c.offset + c.data.size() > c.total_bytes) {
    report_failure(self, "atom state from " + from + ": " + std::to_string(c.total_bytes) + " bytes at offset "
                           + std::to_string(c.offset) + "; expected " + std::to_string(16 + 4 * n) + " to "
                           + std::to_string(most) + ", in order");
    a.source.clear();
    self->delayed_send(self, std::chrono::milliseconds(200), fetch_atom::value);
    return;
  }
  a.download.insert(a.download.end(), c.data.begin(), c.data.end());
  if (a.download.size() < c.total_bytes)
    return;
  std::uint32_t magic = 0;
  std::uint64_t round = 0;
  std::memcpy(&magic, a.download.data(), 4);
  std::memcpy(&round, a.download.data() + 8, 8);
  auto rounds_total = a.rounds->round_of(st.ctx->spec->end_iteration() - 1);
  if (magic != atom_state_magic || round > rounds_total) {
    report_failure(self, "atom average from " + from + ": not an average of one of the run's rounds");
    a.source.clear();
    self->delayed_send(self, std::chrono::milliseconds(200), fetch_atom::value);
    return;
  }
  auto avg = torch::from_blob(a.download.data() + 16, {a.peer->parameter_count()}, torch::kFloat32).clone();
  auto at = 16 + 4 * n;
  if (auto r = a.peer->import_state(a.download.data() + at, a.download.size() - at); std::holds_alternative<std::string>(r)) {
    report_failure(self, "atom state from " + from + ": " + std::get<std::string>(r));
    a.source.clear();
    self->delayed_send(self, std::chrono::milliseconds(200), fetch_atom::value);
    return;
  }
  auto mine = a.peer->contribution();
  a.peer->land(avg, mine); // its weights: exactly the average; its moments: the server's
  a.last_average = avg;
  a.landed = round;
  a.rounds->close(round);
  a.next = a.rounds->iterations_of(round + 1).first;
  a.trained_from = a.next;
  st.current = a.next;
  a.started = true;
  for (auto& [id, stage] : st.peers)
    if (stage == 0) // another joiner still loading is named by the peer that serves it
      a.rounds->member(id, round + 1);
  st.ready = true;
  self->send(st.supervisor, stage_atom::value, std::int32_t{0}); // its peers see it loaded
  tell(self, st.ctx->reporter, joined_atom::value, me(st), a.next, static_cast<std::uint64_t>(a.download.size()));
  a.download.clear();
  a.download.shrink_to_fit();
  if (round == a.rounds->round_of(st.ctx->spec->end_iteration() - 1)) // the run's last average: nothing left to train
    tell(self, st.ctx->reporter, applied_atom::value, me(st), std::uint32_t{0}, st.ctx->spec->end_iteration() - 1,
         average_hash(avg));
  schedule(self);
}

// What a peer holds for a round it completed (try_land).
void on_holds(self_ptr self, const std::string& from, const wire::norm_share& m) {
  auto& st = self->state;
  auto& a = st.atom;
  if (m.stage != 0 || !a.rounds->ends_round(m.iteration) || m.holders.size() > roster(st).size())
    return;
  std::vector<std::string> names;
  for (auto& h : m.holders)
    names.push_back(h.holder);
  a.rounds->holds(from, a.rounds->round_of(m.iteration), std::move(names));
  try_land(self);
}

// A peer is down: no round waits for it, a joiner it was is served no more, a download
// from it goes to another peer.
void peer_gone(self_ptr self, const std::string& id) {
  auto& st = self->state;
  st.gone.insert(id);
  st.peers.erase(id);
  st.agg.incoming->forget(id);
  st.atom.rounds->down(id);
  st.atom.joiners.erase(id);
  if (st.atom.source == id) {
    st.atom.source.clear();
    ask_average(self);
  }
  try_land(self);
}

} // namespace

compute_actor::behavior_type atom_behaviour(self_ptr self) {
  auto& st = self->state;
  auto& ctx = st.ctx;
  auto& spec = *ctx->spec;
  auto swap = host_swap(*ctx);
  swap.capacity = 1; // one microbatch at a time through the whole model
  try {
    st.atom.peer.emplace(spec.model, spec.training, swap);
  } catch (const std::exception& e) {
    report_failure(self, std::string{"hosts[].memory_budget_mb: "} + e.what() + ": the peer runs in memory");
    st.atom.peer.emplace(spec.model, spec.training);
  }
  if (st.atom.peer->resident_blocks() > 0)
    report_note(self, "layer swapping: the whole model's relay blocks over a budget of "
                        + std::to_string(swap.budget_bytes >> 20) + " MiB: " + std::to_string(st.atom.peer->resident_blocks())
                        + " block(s) resident, the rest in " + swap.dir);
  auto& names = spec.holders;
  st.holder.holder_index =
    static_cast<std::uint32_t>(std::find(names.begin(), names.end(), ctx->host.name) - names.begin());
  st.atom.rounds.emplace(names, ctx->host.name, spec.training.atom.sync_every,
                         static_cast<std::uint64_t>(spec.end_iteration()), spec.training.microbatches_per_holder);
  // A peer's contributions under way: one round, the next (overlap), one more at most.
  st.agg.incoming.emplace(static_cast<std::uint64_t>(st.atom.peer->parameter_count()), 3, 256, false);
  auto c = model::corpus::open(spec.data, spec.model.vocab, spec.model.seq_len);
  if (auto* why = std::get_if<std::string>(&c))
    report_failure(self, "corpus: " + *why);
  else
    st.data.emplace(std::move(std::get<model::corpus>(c)));
  st.ready = !ctx->joining;
  if (st.ready && st.data)
    schedule(self);
  return {
    [self](deliver_atom, const std::string& from, wire_frame& frame) {
      auto msg = open_message(self, from, std::move(frame));
      if (!msg)
        return;
      if (auto* g = std::get_if<wire::gradient_chunk>(&*msg))
        on_contribution(self, from, std::move(*g));
      else if (auto* r = std::get_if<wire::state_request>(&*msg))
        serve_average(self, from, *r);
      else if (auto* sc = std::get_if<wire::state_chunk>(&*msg))
        on_average_chunk(self, from, *sc);
      else if (auto* n = std::get_if<wire::norm_share>(&*msg))
        on_holds(self, from, *n);
      else if (!std::holds_alternative<wire::iteration_done>(*msg) && !std::holds_alternative<wire::replica_hash>(*msg))
        report_failure(self, std::string{"unexpected "} + wire::kind_name(*msg) + " from " + from + " (atom mode)");
    },
    [self](peer_up_atom, const std::string& id, std::int32_t stage) {
      auto& st = self->state;
      // Stage -1: a joiner still loading (membership.cpp), live: it gets the contributions of
      // the rounds it will take part in.
      st.peers[id] = stage;
      st.gone.erase(id);
      // A peer met after the start is a member once a peer that served it names it, or from
      // its first contribution (atom_rounds::contributed).
      if (!st.ready)
        ask_average(self);
    },
    [self](peer_down_atom, const std::string& id) { peer_gone(self, id); },
    [](lost_stage_atom, std::uint32_t, std::uint64_t) {},
    [](call_atom, std::uint64_t, std::uint32_t) {},
    [](timeout_atom, std::uint64_t, std::uint64_t) {},
    [self](fetch_atom) { ask_average(self); },
    [self](left_atom, const std::string& id) { self->state.departed.insert(id); },
    [self](stop_atom) { self->state.draining = true; },
    [](flows_atom, const std::vector<std::string>&, const std::vector<std::string>&, const std::vector<std::string>&) {},
    [self](crash_atom, const std::string& phase) {
      if (phase == "actor")
        self->quit(caf::make_error(caf::sec::runtime_error, "injected actor failure"));
      else
        self->state.armed = phase;
    },
    [self](start_atom) { atom_iteration(self); },
    [](tick_atom, std::uint64_t) {},
    [](checkpoint_atom, std::uint64_t) {},
    [self](inspect_atom) -> std::string {
      auto& st = self->state;
      auto& a = st.atom;
      return "{\"mode\":\"atom\",\"iteration\":" + std::to_string(a.next) + ",\"landed_round\":"
             + (a.landed ? std::to_string(*a.landed) : std::string{"null"}) + ",\"pending_round\":"
             + (a.pending ? std::to_string(*a.pending) : std::string{"null"}) + ",\"peers\":" + std::to_string(st.peers.size())
             + ",\"ready\":" + (st.ready ? "true" : "false") + "}";
    },
    [](peer_speed_atom, const std::string&, double, double) {},
    [](probe_atom, probe_actor) {},
    [](balancer_handle_atom, balancer_actor) {},
    [](resend_atom, std::uint64_t, const std::string&, std::uint32_t, const std::string&) {},
  };
}

} // namespace gwtf::actors::compute
