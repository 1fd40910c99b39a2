// The compute of a host: a relay stage, or a data holder (stage 0 + the iteration loop +
// microbatch carriers). Thin: the hop_ledger decides what a message means, the
// iteration_barrier when an iteration ends, model::stage computes (docs/runtime.md).
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>

#include "model/data.hpp"
#include "model/stage.hpp"
#include "model/transformer.hpp"

#include <caf/all.hpp>

#include "actors/hop_ledger.hpp"
#include "actors/host_internal.hpp"
#include "actors/iteration_barrier.hpp"
#include "actors/replica_vote.hpp"
#include "actors/state_download.hpp"
#include "actors/tensor_bridge.hpp"

namespace gwtf::actors {

namespace {

using ctx_ptr = std::shared_ptr<const host_context>;
using clock = std::chrono::steady_clock;
constexpr std::size_t state_chunk_bytes = 1 << 20;

double since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

// One microbatch that this data holder originates.
struct origin {
  torch::Tensor output;  ///< embedding output, kept for re-sends
  torch::Tensor targets;
  std::string first_hop;
  std::string next_next; ///< where first_hop sent it (HOP_PROGRESS): the re-send hint
  std::uint32_t attempt = 0;
  caf::actor carrier;
  bool done = false;
};

struct share_data {
  std::int64_t count = 0;
  wire::tensor_payload values;
};

struct compute_state {
  ctx_ptr ctx;
  caf::actor supervisor;
  std::optional<model::stage> model;
  std::optional<model::corpus> data;
  std::unique_ptr<hop_ledger> ledger;
  std::unique_ptr<iteration_barrier> barrier;
  std::map<std::uint64_t, torch::Tensor> fwd_out, grad_out, head_grad;
  std::map<std::uint64_t, double> fwd_seconds;
  std::set<std::uint64_t> stalled;           // forward outputs that found no next hop yet
  std::map<std::string, std::int32_t> peers; // live peers and their stage
  std::set<std::string> gone;                // peers reported down (late frames ignored)
  std::set<std::string> departed;            // peers that left gracefully (shares stay valid)
  bool draining = false;                     // leaving: finish the iteration's part, start none
  std::vector<flow_hop> flows;
  std::uint64_t current = 0;                 // iteration in progress (= optimizer steps)
  bool ready = false;                        // holds valid weights
  std::string armed;                         // injected crash: "forward" / "backward"
  std::deque<std::pair<std::string, wire::activation>> pending;
  // aggregation
  std::map<std::uint64_t, std::map<std::string, share_data>> shares;
  std::set<std::uint64_t> shared, normed;
  std::map<std::uint64_t, std::vector<torch::Tensor>> averaged;
  std::map<std::uint64_t, double> my_norm; // this stage's squared norm, until applied
  replica_vote vote;
  std::optional<wire::replica_hash> last_hash; // of the last step applied
  bool fresh = false; // loaded a state and applied no step since: may be behind the others
  // state download (joiners, repairs)
  state_download download;
  std::uint64_t transfers = 0; // downloads asked for (transfer ids)
  // data holder
  std::uint32_t holder_index = 0;
  bool running = false;
  std::map<std::uint64_t, origin> origins;
  std::map<std::uint64_t, double> losses;
  std::uint32_t done_count = 0;
  std::optional<wire::iteration_done> last_done; // this holder's report of `current`
  std::uint64_t next_carrier = 0;
  std::int64_t waited_ms = 0; // waiting for a flow
};

using self_ptr = caf::stateful_actor<compute_state>*;

bool is_holder(const compute_state& st) { return st.ctx->stage == 0; }
int stages(const compute_state& st) { return st.ctx->spec->model.stages; }
const std::string& me(const compute_state& st) { return st.ctx->host.name; }

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

void report_failure(self_ptr self, const std::string& what) {
  self->send(self->state.ctx->reporter, failure_atom::value, me(self->state), what);
}

void report_compute(self_ptr self, std::uint64_t iteration, double seconds, double wasted) {
  self->send(self->state.ctx->reporter, compute_atom::value, me(self->state), iteration, seconds, wasted);
}

template <class T>
T* value_or_report(self_ptr self, model::outcome<T>& r, const std::string& what) {
  if (auto* e = std::get_if<std::string>(&r)) {
    report_failure(self, what + ": " + *e);
    return nullptr;
  }
  return &std::get<T>(r);
}

// An injected crash strikes after the computation it was armed for has run.
bool crash_now(self_ptr self, const char* phase) {
  auto& st = self->state;
  if (st.armed != phase)
    return false;
  st.armed.clear();
  self->send(st.supervisor, crash_atom::value, std::string{"any"});
  return true;
}

void send_activation(self_ptr self, const std::string& to, const hop_record& r, wire::direction dir,
                     const torch::Tensor& t, const std::string& continue_to = {}) {
  wire::activation a;
  a.microbatch = r.mb;
  a.dir = dir;
  a.path = r.path;
  a.tensor = to_payload(t);
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

void send_share(self_ptr self, std::uint64_t i);
void try_share(self_ptr self, std::uint64_t i);
void try_average(self_ptr self, std::uint64_t i);
void try_apply(self_ptr self, std::uint64_t i);
bool check_vote(self_ptr self, std::uint64_t i);
void request_state(self_ptr self);
void start_iteration(self_ptr self);
void handle_forward(self_ptr self, const std::string& from, wire::activation a);

// --- forward / backward at a relay or at the head ------------------------------------

void handle_forward(self_ptr self, const std::string& from, wire::activation a) {
  auto& st = self->state;
  if (!st.ready || a.microbatch.iteration > st.current) {
    st.pending.emplace_back(from, std::move(a));
    return;
  }
  if (a.microbatch.iteration < st.current)
    return; // an iteration already applied: late duplicate
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
  if (head && st.origins.count(key) == 0) {
    report_failure(self, "activation from " + from + " for a microbatch this holder never sent");
    return;
  }
  auto action = st.ledger->on_forward(from, a);
  if (action == forward_action::ignore)
    return;
  auto* r = st.ledger->find(key);
  if (action == forward_action::rebind) {
    progress_upstream(self, *r);
    if (r->backward_done) {
      auto& g = head ? st.head_grad[key] : st.grad_out[key];
      send_activation(self, r->prev, *r, wire::direction::backward, g);
    } else if (!head && r->forwarded) {
      // The upstream timed out waiting: this hop's output, or what came of it, may have been
      // lost further on (a frame dropped on a connection going down or not bound yet). Send it
      // on with the new attempt: a hop that holds it rebinds and passes it on, the one that
      // lost it computes it.
      auto out = st.fwd_out.find(key);
      auto next = st.peers.count(r->next) > 0 ? r->next : next_for(self, *r, {});
      if (out != st.fwd_out.end() && !next.empty()) {
        send_activation(self, next, *r, wire::direction::forward, out->second);
        st.ledger->sent_forward(key, next);
      }
    }
    return;
  }
  auto t0 = clock::now();
  auto input = to_torch(a.tensor);
  if (head) {
    auto res = st.model->head(key, input, st.origins[key].targets);
    auto* h = value_or_report(self, res, "head of microbatch from " + from);
    double secs = since(t0);
    report_compute(self, a.microbatch.iteration, secs, 0);
    if (!h)
      return;
    if (crash_now(self, "backward"))
      return;
    st.losses.emplace(key, h->loss);
    st.head_grad[key] = h->grad_input;
    progress_upstream(self, *r);
    send_activation(self, r->prev, *r, wire::direction::backward, h->grad_input);
    st.ledger->sent_backward(key);
    return;
  }
  auto out = st.model->forward(key, input);
  auto* y = value_or_report(self, out, "forward of microbatch from " + from);
  double secs = since(t0);
  report_compute(self, a.microbatch.iteration, secs, 0);
  if (!y)
    return;
  if (crash_now(self, "forward"))
    return;
  st.fwd_seconds[key] = secs;
  progress_upstream(self, *r);
  auto next = next_for(self, *r, a.continue_to);
  st.fwd_out[key] = *y;
  if (next.empty()) {
    // No next-stage host known yet (node mode: membership still growing) or all dead: the
    // output waits for the next one to come up (peer_up), or for a re-send.
    report_failure(self, "no live next hop for a microbatch; waiting for one");
    st.stalled.insert(key);
    return;
  }
  send_activation(self, next, *r, wire::direction::forward, *y);
  st.ledger->sent_forward(key, next);
}

// A next-stage host came up: the outputs that found no next hop go on.
void resume_stalled(self_ptr self) {
  auto& st = self->state;
  for (auto it = st.stalled.begin(); it != st.stalled.end();) {
    auto key = *it;
    auto* r = st.ledger->find(key);
    auto out = st.fwd_out.find(key);
    if (!r || out == st.fwd_out.end() || r->mb.iteration != st.current) {
      it = st.stalled.erase(it);
      continue;
    }
    auto next = next_for(self, *r, {});
    if (next.empty()) {
      ++it;
      continue;
    }
    send_activation(self, next, *r, wire::direction::forward, out->second);
    st.ledger->sent_forward(key, next);
    it = st.stalled.erase(it);
  }
}

void finish_origin(self_ptr self, std::uint64_t key);

void handle_backward(self_ptr self, const std::string& from, const wire::activation& a) {
  auto& st = self->state;
  if (!st.ready || a.microbatch.iteration != st.current)
    return;
  auto key = key_of(a.microbatch);
  auto t0 = clock::now();
  if (is_holder(st)) {
    auto it = st.origins.find(key);
    if (it == st.origins.end() || it->second.done)
      return;
    auto res = st.model->embed_backward(key, to_torch(a.tensor));
    auto* ok = value_or_report(self, res, "embedding backward of microbatch from " + from);
    report_compute(self, a.microbatch.iteration, since(t0), 0);
    if (!ok || crash_now(self, "backward"))
      return;
    finish_origin(self, key);
    return;
  }
  if (!st.ledger->on_backward(key))
    return;
  auto res = st.model->backward(key, to_torch(a.tensor));
  auto* g = value_or_report(self, res, "backward of microbatch from " + from);
  report_compute(self, a.microbatch.iteration, since(t0), 0);
  if (!g)
    return;
  if (crash_now(self, "backward"))
    return;
  auto* r = st.ledger->find(key);
  st.grad_out[key] = *g;
  send_activation(self, r->prev, *r, wire::direction::backward, *g);
  st.ledger->sent_backward(key);
  if (st.shared.count(a.microbatch.iteration) > 0 && st.averaged.count(a.microbatch.iteration) == 0) {
    send_share(self, a.microbatch.iteration); // a repair after this replica shared
    try_average(self, a.microbatch.iteration);
  }
}

// --- peers going down ----------------------------------------------------------------

void on_resend(self_ptr self, std::uint64_t key, const std::string& to, std::uint32_t attempt,
               const std::string& hint, bool finished_too = false);

void on_peer_down(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto it = st.peers.find(id);
  if (it == st.peers.end())
    return;
  auto it_stage = it->second;
  st.peers.erase(it);
  st.gone.insert(id);
  st.flows.erase(std::remove_if(st.flows.begin(), st.flows.end(),
                                [&](auto& f) { return f.next == id || f.prev == id; }),
                 st.flows.end());
  if (is_holder(st)) {
    auto live1 = live_at(st, 1 % stages(st));
    for (auto& [key, o] : st.origins) {
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
      if (!repl || !st.fwd_out.count(rs.key))
        continue;
      send_activation(self, *repl, *r, wire::direction::forward, st.fwd_out[rs.key], rs.hint);
      st.ledger->redirect(rs.key, *repl);
    }
  }
  if (st.download.active() && st.download.source() == id && !st.ready) {
    st.download.cancel(); // the download source died: ask another replica
    request_state(self);
  }
  // Its share, if any, is dropped: its microbatches come back through re-sends. Not so for a
  // replica that drained and left (it shared everything it counted before its LEAVE), nor
  // for a data holder (its own microbatches, counted at stage 0 by it alone, never come back).
  if (it_stage == st.ctx->stage && st.departed.count(id) == 0 && !is_holder(st))
    for (auto i = st.current; i <= st.current + 1; ++i)
      if (st.averaged.count(i) == 0)
        st.shares[i].erase(id);
  // A dead holder or replica may be what an iteration boundary was waiting for.
  try_share(self, st.current);
  try_average(self, st.current);
}

// --- the iteration boundary ----------------------------------------------------------

std::vector<std::string> same_stage(const compute_state& st) { return live_at(st, st.ctx->stage); }

std::vector<std::string> live_holders(const compute_state& st) {
  auto out = live_at(st, 0);
  if (is_holder(st))
    out.push_back(me(st));
  return out;
}

wire::gradient_chunk share_chunk(const compute_state& st, std::uint64_t i, const share_data& mine) {
  wire::gradient_chunk c;
  c.iteration = i;
  c.stage = static_cast<std::uint32_t>(st.ctx->stage);
  c.contributors = {me(st)};
  c.microbatches = static_cast<std::uint64_t>(mine.count);
  c.offset = 0;
  c.total_elements = mine.count > 0 ? static_cast<std::uint64_t>(mine.values.shape[0]) : 0;
  c.values = mine.count > 0 ? mine.values : wire::tensor_payload{wire::dtype::float32, {0}, nullptr, 0};
  return c;
}

// Sends this replica's gradient sum of iteration i to the live replicas of its stage (again
// after a repair changed it: receivers keep the latest share of each replica).
void send_share(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  auto g = st.model->gradients();
  auto* sum = value_or_report(self, g, "gradient sum of iteration " + std::to_string(i));
  if (!sum)
    return;
  st.shared.insert(i);
  share_data mine;
  mine.count = sum->count;
  if (sum->count > 0) {
    std::vector<torch::Tensor> flat;
    for (auto& t : sum->sums)
      flat.push_back(t.reshape({-1}));
    mine.values = to_payload(torch::cat(flat));
  }
  std::vector<std::uint64_t> keys;
  if (is_holder(st)) {
    for (auto& [k, o] : st.origins)
      if (o.done)
        keys.push_back(k);
  } else {
    for (auto& [k, r] : st.ledger->records())
      if (r.mb.iteration == i && r.backward_done && st.model->counted(k))
        keys.push_back(k);
  }
  self->send(st.ctx->reporter, share_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage), i, keys);
  auto c = share_chunk(st, i, mine);
  for (auto& [h, d] : st.barrier->reports(i))
    c.reports.push_back(d);
  for (auto& r : same_stage(st))
    st.ctx->send(self, r, service::stage, c);
  st.shares[i][me(st)] = std::move(mine);
  st.barrier->share(i, me(st));
}

// A draining host is done once it shared its part of the iteration in progress, or has no
// part in it: then the supervisor may announce LEAVE.
void maybe_drained(self_ptr self) {
  auto& st = self->state;
  if (!st.draining)
    return;
  bool stake = false;
  if (is_holder(st)) {
    stake = st.running;
  } else {
    for (auto& [k, r] : st.ledger->records())
      stake = stake || r.mb.iteration == st.current;
  }
  if (stake && st.shared.count(st.current) == 0)
    return;
  st.draining = false;
  self->send(st.supervisor, drained_atom::value, true);
}

// A data holder's report, from the holder or relayed in a share. Only the roster's holders
// count, and only they are waited for: a name from a peer is not trusted to exist.
void take_report(compute_state& st, wire::iteration_done&& d) {
  auto& roster = st.ctx->spec->holders;
  auto listed = [&](const std::string& h) { return std::find(roster.begin(), roster.end(), h) != roster.end(); };
  if (!listed(d.holder))
    return;
  d.participants.erase(std::remove_if(d.participants.begin(), d.participants.end(),
                                      [&](const std::string& h) { return !listed(h); }),
                       d.participants.end());
  st.barrier->holder_done(d);
}

void try_share(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready || i != st.current || st.shared.count(i) > 0
      || !st.barrier->holders_done(i, live_holders(st), st.gone))
    return;
  send_share(self, i);
  maybe_drained(self);
  try_average(self, i);
}

void try_average(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready || i != st.current || st.averaged.count(i) > 0 || st.shared.count(i) == 0)
    return;
  // Every microbatch the data holders finished must be in the shares. A replica that died
  // before its share arrived had its microbatches re-sent to the others (hop_ledger), which
  // share again once they have counted them; empty shares change nothing and are not waited for.
  std::int64_t counted = 0;
  for (auto& [r, sh] : st.shares[i])
    counted += sh.count;
  // At stage 0 a data holder's microbatches are counted by that holder alone and never come
  // back: a dead holder whose share did not arrive takes its finished microbatches with it.
  if (is_holder(st))
    for (auto& [holder, rep] : st.barrier->reports(i))
      if (st.gone.count(holder) > 0 && st.shares[i].count(holder) == 0)
        counted += static_cast<std::int64_t>(rep.microbatches);
  if (!st.barrier->shares_complete(i, me(st), counted))
    return;
  auto params = st.model->parameters();
  std::vector<model::gradient_sum> sums;
  std::vector<std::string> contributors;
  for (auto& [replica, s] : st.shares[i]) { // replica-name order: bit-identical everywhere
    if (s.count == 0)
      continue;
    contributors.push_back(replica);
    model::gradient_sum g;
    g.count = s.count;
    if (s.count > 0) {
      auto flat = to_torch(s.values);
      std::int64_t off = 0;
      for (auto& p : params) {
        auto n = p.tensor.numel();
        if (off + n > flat.numel())
          break;
        g.sums.push_back(flat.narrow(0, off, n).view(p.tensor.sizes()));
        off += n;
      }
      if (off != flat.numel() || g.sums.size() != params.size()) {
        report_failure(self, "gradient share of " + replica + " has " + std::to_string(flat.numel())
                               + " elements; this stage has " + std::to_string(off));
        continue;
      }
    }
    sums.push_back(std::move(g));
  }
  std::int64_t total = 0;
  for (auto& g : sums)
    total += g.count;
  std::vector<torch::Tensor> avg;
  if (total > 0) {
    avg = model::average(sums);
  } else {
    for (auto& p : params)
      avg.push_back(torch::zeros_like(p.tensor));
  }
  double sq = model::stage::squared_norm(avg);
  st.averaged[i] = std::move(avg);
  st.my_norm[i] = sq;
  self->send(st.ctx->reporter, averaged_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage), i,
             contributors);
  wire::norm_share n{i, static_cast<std::uint32_t>(st.ctx->stage), sq};
  for (auto& [id, s] : st.peers)
    st.ctx->send(self, id, service::stage, n);
  st.barrier->norm(i, n.stage, sq);
  try_apply(self, i);
}

void try_apply(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready || i != st.current || st.averaged.count(i) == 0)
    return;
  auto norm = st.barrier->global_norm(i);
  if (!norm)
    return;
  auto r = st.model->apply(st.averaged[i], static_cast<std::int64_t>(i), *norm);
  if (!value_or_report(self, r, "optimizer step " + std::to_string(i)))
    return;
  // Stashes never used by a backward (a re-routed stream) were wasted compute.
  double wasted = 0;
  for (auto k : st.ledger->finish(i)) {
    if (st.model->drop(k))
      wasted += st.fwd_seconds.count(k) ? st.fwd_seconds[k] : 0.0;
    st.fwd_out.erase(k);
    st.grad_out.erase(k);
    st.head_grad.erase(k);
    st.fwd_seconds.erase(k);
  }
  if (wasted > 0)
    report_compute(self, i, 0, wasted);
  st.averaged.erase(i);
  st.shares.erase(i);
  st.my_norm.erase(i);
  st.barrier->finish(i);
  st.current = i + 1;
  st.fresh = false;
  st.last_done.reset();
  auto h = st.model->weights_hash();
  st.vote.mine(i, h);
  self->send(st.ctx->reporter, applied_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage), i, h);
  st.last_hash = wire::replica_hash{i, static_cast<std::uint32_t>(st.ctx->stage), h};
  for (auto& r : same_stage(st))
    st.ctx->send(self, r, service::stage, *st.last_hash);
  check_vote(self, i); // diverged: not ready until the download, so the next steps wait
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (auto& [from, a] : pending)
    handle_forward(self, from, std::move(a));
  if (is_holder(st))
    start_iteration(self);
  else
    try_share(self, st.current);
}

// A peer this host had not known at its stage (a joiner, a restarted host) missed what was
// sent before: the messages of the iteration in progress that it needs go to it again.
void catch_up(self_ptr self, const std::string& id, std::int32_t stage) {
  auto& st = self->state;
  if (!st.ready)
    return;
  if (st.last_done && st.last_done->iteration == st.current)
    st.ctx->send(self, id, service::stage, *st.last_done);
  if (auto n = st.my_norm.find(st.current); n != st.my_norm.end())
    st.ctx->send(self, id, service::stage,
                 wire::norm_share{st.current, static_cast<std::uint32_t>(st.ctx->stage), n->second});
  if (stage != st.ctx->stage)
    return;
  if (auto s = st.shares.find(st.current); s != st.shares.end())
    if (auto mine = s->second.find(me(st)); mine != s->second.end())
      st.ctx->send(self, id, service::stage, share_chunk(st, st.current, mine->second));
  if (st.last_hash)
    st.ctx->send(self, id, service::stage, *st.last_hash); // tells a fresh replica where we are
}

// --- state download (joiners and repairs) ----------------------------------------

// Asks `from` for the stage state and watches the transfer: a request or chunks lost on a
// connection going down, or a source that died, must not leave this replica waiting forever.
void ask_state(self_ptr self, const std::string& from) {
  auto& st = self->state;
  auto id = (static_cast<std::uint64_t>(std::hash<std::string>{}(me(st))) << 16) + (++st.transfers);
  st.download.start(from, id);
  st.ctx->send(self, from, service::stage, wire::state_request{id, static_cast<std::uint32_t>(st.ctx->stage)});
  self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.connection_timeout_ms), timeout_atom::value,
                     id, std::uint64_t{0});
}

// Downloads from a live replica of the stage: the one after the last source tried, so that
// a retry goes elsewhere.
void request_state(self_ptr self) {
  auto& st = self->state;
  if (st.ready || st.download.active())
    return;
  auto replicas = same_stage(st);
  if (replicas.empty())
    return; // peer_up asks again when one comes
  auto next = std::upper_bound(replicas.begin(), replicas.end(), st.download.source());
  ask_state(self, next == replicas.end() ? replicas.front() : *next);
}

// The download watchdog: a transfer that received nothing for a connection timeout is asked
// again from the next replica.
void on_transfer_timeout(self_ptr self, std::uint64_t transfer, std::uint64_t had) {
  auto& st = self->state;
  if (st.ready || st.download.transfer() != transfer) // an inactive download has transfer 0
    return;
  auto have = st.download.received();
  if (have > had) { // progressing: keep watching
    self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.connection_timeout_ms),
                       timeout_atom::value, transfer, have);
    return;
  }
  report_failure(self, "state download from " + st.download.source() + " stalled at " + std::to_string(have)
                         + " bytes; asking again");
  st.download.cancel();
  request_state(self);
}

// Downloads the stage state from `from` (any replica if empty). `withdraw`: stop being a
// replica meanwhile (diverged weights); a replica that is only behind stays one, so the
// others wait for its share instead of finishing the iteration without it.
void enter_download(self_ptr self, const std::string& from, bool withdraw = true) {
  auto& st = self->state;
  st.ready = false;
  st.download.cancel();
  if (withdraw)
    self->send(st.supervisor, stage_atom::value, std::int32_t{-1});
  if (!from.empty())
    ask_state(self, from);
  else
    request_state(self);
}

void on_state_chunk(self_ptr self, const std::string& from, const wire::state_chunk& c) {
  auto& st = self->state;
  if (st.ready)
    return;
  auto limit = static_cast<std::uint64_t>(st.ctx->spec->max_message_bytes) * 64;
  auto got = st.download.chunk(from, c, static_cast<std::uint32_t>(st.ctx->stage), limit);
  if (got == state_download::outcome::refused)
    report_failure(self, "state from " + from + " announces " + std::to_string(c.total_bytes) + " bytes (limit "
                           + std::to_string(limit) + ")");
  if (got != state_download::outcome::complete)
    return;
  auto blob = st.download.take();
  auto r = st.model->import_state(blob.data(), blob.size());
  if (!value_or_report(self, r, "state from " + from)) {
    request_state(self);
    return;
  }
  st.ready = true;
  st.fresh = true;
  st.current = static_cast<std::uint64_t>(st.model->steps());
  // import_state discarded the gradients and stashes computed with the replaced weights; the
  // hops they belong to go too. They are of an iteration the peers applied (behind), or the
  // peers re-sent them when this replica withdrew (diverged).
  for (auto k : st.ledger->finish(std::numeric_limits<std::uint64_t>::max())) {
    st.fwd_out.erase(k);
    st.grad_out.erase(k);
    st.head_grad.erase(k);
    st.fwd_seconds.erase(k);
  }
  st.stalled.clear();
  st.shared.clear();
  st.averaged.clear();
  st.my_norm.clear();
  auto bytes = static_cast<std::uint64_t>(blob.size());
  self->send(st.supervisor, stage_atom::value, static_cast<std::int32_t>(st.ctx->stage));
  self->send(st.ctx->reporter, joined_atom::value, me(st), static_cast<std::uint64_t>(st.current), bytes);
  // Microbatches queued while downloading: the ones of the current iteration go on.
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (auto& [f, a] : pending)
    handle_forward(self, f, std::move(a));
  if (is_holder(st) && !st.running)
    start_iteration(self); // a holder that diverged right after a step had not started the next
}

// A replica that loaded a state while the others moved on misses the shares, reports and
// norms they sent before they knew it: it loads the state again from a replica that is ahead.
// It stays a replica meanwhile; nobody waits for it unless it carries microbatches.
void behind(self_ptr self, const std::string& from, std::uint64_t their_iteration) {
  auto& st = self->state;
  report_failure(self, "behind replica " + from + " (at iteration " + std::to_string(st.current) + ", "
                         + from + " at " + std::to_string(their_iteration) + "); loading its state again");
  enter_download(self, from, false);
}

// The step verification of iteration i, once this replica's hash and every other replica's
// are in; true when this replica diverged (it is downloading the majority's state now).
bool check_vote(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready)
    return false;
  auto v = st.vote.decide(i, me(st), same_stage(st).size());
  if (!v || !v->diverged)
    return false;
  report_failure(self, "weights diverged from replica " + v->source + " after iteration " + std::to_string(i)
                         + "; downloading its state");
  // A data holder stays one (its hello must say stage 0); a relay withdraws meanwhile.
  enter_download(self, v->source, !is_holder(st));
  return true;
}

void on_replica_hash(self_ptr self, const std::string& from, const wire::replica_hash& h) {
  auto& st = self->state;
  if (h.stage != static_cast<std::uint32_t>(st.ctx->stage))
    return;
  // A replica that applied an iteration beyond the one this replica is in has left it
  // behind for good (it applied `current` without this replica's share, or this one missed
  // the step): load its state. A freshly loaded state is behind as soon as a peer applied
  // the iteration it is in.
  if (st.ready && (h.iteration > st.current || (st.fresh && h.iteration >= st.current))) {
    behind(self, from, h.iteration);
    return;
  }
  st.vote.theirs(h.iteration, from, h.hash);
  check_vote(self, h.iteration);
}

// --- stall report -----------------------------------------------------------------

// An iteration still in progress after four hop timeouts is reported with what this replica
// still waits for (the operator's first question; the recovery paths have timeouts of their
// own). Re-armed for as long as the actor lives.
void stall_watch(self_ptr self, std::uint64_t seen) {
  auto& st = self->state;
  auto period = std::chrono::milliseconds(4 * st.ctx->spec->faults.hop_timeout_ms);
  self->delayed_send(self, period, tick_atom::value, st.current);
  if (seen != st.current || st.current >= static_cast<std::uint64_t>(st.ctx->spec->training.iterations))
    return;
  if (!st.ready) {
    report_failure(self, "iteration " + std::to_string(st.current) + " in progress for over "
                           + std::to_string(period.count()) + " ms: no weights"
                           + (st.download.active() ? ", downloading them from " + st.download.source() : std::string{}));
    return;
  }
  std::int64_t counted = 0;
  if (auto sh = st.shares.find(st.current); sh != st.shares.end())
    for (auto& [r, d] : sh->second)
      counted += d.count;
  auto missing = st.barrier->waiting_for(st.current, me(st), live_holders(st), counted, st.gone);
  if (is_holder(st) && st.running)
    missing = std::to_string(st.ctx->spec->training.microbatches_per_holder - static_cast<std::int64_t>(st.done_count))
              + " of its microbatches unfinished"
              + (missing.empty() ? "" : "; " + missing);
  if (!missing.empty())
    report_failure(self, "iteration " + std::to_string(st.current) + " in progress for over "
                           + std::to_string(period.count()) + " ms, waiting for " + missing);
}

// --- data holder: iterations and carriers ----------------------------------------

struct carrier_state {
  std::uint64_t key = 0;
  std::string first_hop;
  std::string hint;
  std::uint32_t attempt = 0;
  std::chrono::milliseconds timeout{10000};
};

caf::behavior carrier(caf::stateful_actor<carrier_state>* self, caf::actor holder, std::uint64_t key,
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
  for (auto& [k, l] : st.losses)
    loss_sum += l;
  auto flows = static_cast<std::uint32_t>(st.flows.size());
  wire::iteration_done d{st.current, me(st), st.done_count, loss_sum, live_holders(st)};
  std::sort(d.participants.begin(), d.participants.end());
  st.last_done = d;
  self->send(st.ctx->reporter, iteration_atom::value, me(st), st.current, st.done_count, loss_sum, flows);
  for (auto& [id, s] : st.peers)
    st.ctx->send(self, id, service::stage, d);
  st.barrier->holder_done(d);
  try_share(self, st.current);
}

void finish_origin(self_ptr self, std::uint64_t key) {
  auto& st = self->state;
  auto& o = st.origins[key];
  o.done = true;
  if (o.carrier)
    self->send(o.carrier, done_atom::value);
  if (++st.done_count == static_cast<std::uint32_t>(st.ctx->spec->training.microbatches_per_holder))
    finish_iteration(self);
}

void start_iteration(self_ptr self) {
  auto& st = self->state;
  if (!st.ready || st.draining
      || st.current >= static_cast<std::uint64_t>(st.ctx->spec->training.iterations)) {
    st.running = false;
    return;
  }
  int first_stage = 1 % stages(st);
  std::vector<flow_hop> mine;
  for (auto& f : st.flows)
    if (f.target == me(st) && st.peers.count(f.next) > 0)
      mine.push_back(f);
  if (!mine.empty())
    st.waited_ms = 0;
  else if (st.waited_ms >= (st.current == 0 ? 20 : 4) * st.ctx->spec->routing.gwtf.tick_ms) {
    // (At the start, longer: in node mode the hosts are still finding each other.)
    // No ring for this holder after several balancer ticks (its relays died and the
    // survivors are full): degrade to any live first-stage host rather than stall.
    for (auto& id : live_at(st, first_stage))
      mine.push_back({me(st), me(st), id});
  }
  if (mine.empty()) { // no flow yet: the balancers are still building rings
    st.running = false;
    st.waited_ms += 50;
    self->delayed_send(self, std::chrono::milliseconds(50), start_atom::value);
    return;
  }
  st.running = true;
  for (auto& [k, o] : st.origins)
    if (o.carrier)
      self->send(o.carrier, done_atom::value);
  st.origins.clear();
  st.losses.clear();
  st.done_count = 0;
  auto& spec = *st.ctx->spec;
  for (int j = 0; j < spec.training.microbatches_per_holder; ++j) {
    model::microbatch_id id{st.current, st.holder_index, static_cast<std::uint32_t>(j)};
    auto tokens = model::sample(*st.data, spec.training.seed, id, spec.training.microbatch_size,
                                spec.model.seq_len);
    auto [inputs, targets] = model::to_inputs_targets(tokens.rows, tokens.cols, tokens.tokens);
    auto key = id.key();
    auto t0 = clock::now();
    auto x = st.model->embed(key, inputs);
    auto* out = value_or_report(self, x, "embedding");
    report_compute(self, st.current, since(t0), 0);
    if (!out)
      return;
    if (crash_now(self, "forward"))
      return;
    auto& o = st.origins[key];
    o.output = *out;
    o.targets = targets;
    o.first_hop = mine[static_cast<std::size_t>(j) % mine.size()].next;
    hop_record r;
    r.mb = wire::microbatch_ref{id.iteration, id.holder, id.index};
    r.path = {me(st)};
    send_activation(self, o.first_hop, r, wire::direction::forward, o.output);
    auto timeout = std::chrono::milliseconds(spec.faults.hop_timeout_ms);
    o.carrier = self->spawn<caf::linked>(carrier, caf::actor_cast<caf::actor>(self), key, o.first_hop, timeout);
  }
}

void on_resend(self_ptr self, std::uint64_t key, const std::string& to, std::uint32_t attempt,
               const std::string& hint, bool finished_too) {
  auto& st = self->state;
  auto it = st.origins.find(key);
  if (it == st.origins.end() || (it->second.done && !finished_too))
    return;
  it->second.first_hop = to;
  it->second.attempt = attempt;
  hop_record r;
  r.mb = wire::microbatch_ref{key >> 24, static_cast<std::uint32_t>(key >> 12 & 0xfff),
                              static_cast<std::uint32_t>(key & 0xfff)};
  r.path = {me(st)};
  r.attempt = attempt;
  send_activation(self, to, r, wire::direction::forward, it->second.output, hint);
}

// --- the behaviour ---------------------------------------------------------------

caf::behavior compute(self_ptr self, ctx_ptr ctx, caf::actor supervisor) {
  auto& st = self->state;
  st.ctx = ctx;
  st.supervisor = std::move(supervisor);
  st.model.emplace(ctx->spec->model, ctx->spec->training, ctx->stage);
  st.ledger = std::make_unique<hop_ledger>(ctx->host.name);
  st.barrier = std::make_unique<iteration_barrier>(ctx->spec->model.stages);
  st.ready = !ctx->joining;
  if (ctx->stage == 0) {
    auto& holders = ctx->spec->holders;
    st.holder_index = static_cast<std::uint32_t>(std::find(holders.begin(), holders.end(), ctx->host.name)
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
      auto msg = st.ctx->open(self, from, std::move(frame));
      if (!msg)
        return;
      std::visit(
        [&](auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, wire::activation>) {
            if (m.dir == wire::direction::forward)
              handle_forward(self, from, std::move(m));
            else
              handle_backward(self, from, m);
          } else if constexpr (std::is_same_v<T, wire::hop_progress>) {
            if (is_holder(st) && m.path.size() == 3 && m.path[0] == me(st)) {
              auto o = st.origins.find(key_of(m.microbatch));
              if (o != st.origins.end() && o->second.first_hop == m.path[1]) {
                o->second.next_next = m.path[2];
                if (o->second.carrier)
                  self->send(o->second.carrier, progress_atom::value, m.path[2]);
              }
            } else {
              st.ledger->on_progress(m);
            }
          } else if constexpr (std::is_same_v<T, wire::iteration_done>) {
            if (m.holder != from)
              return;
            auto i = m.iteration;
            take_report(st, std::move(m));
            try_share(self, i);
          } else if constexpr (std::is_same_v<T, wire::gradient_chunk>) {
            if (m.stage != static_cast<std::uint32_t>(st.ctx->stage) || m.iteration < st.current
                || st.gone.count(from) > 0 || st.averaged.count(m.iteration) > 0)
              return;
            share_data s;
            s.count = static_cast<std::int64_t>(m.microbatches);
            s.values = m.values;
            st.shares[m.iteration][from] = std::move(s);
            st.barrier->share(m.iteration, from);
            for (auto& d : m.reports) // holders' reports this replica may not hear itself
              take_report(st, std::move(d));
            try_share(self, m.iteration);
            if (st.ready && st.fresh && m.iteration > st.current) {
              behind(self, from, m.iteration);
              return;
            }
            try_average(self, m.iteration);
          } else if constexpr (std::is_same_v<T, wire::norm_share>) {
            st.barrier->norm(m.iteration, m.stage, m.sum_squares);
            try_apply(self, m.iteration);
          } else if constexpr (std::is_same_v<T, wire::replica_hash>) {
            on_replica_hash(self, from, m);
          } else if constexpr (std::is_same_v<T, wire::state_request>) {
            if (!st.ready || m.stage != static_cast<std::uint32_t>(st.ctx->stage))
              return;
            auto blob = st.model->export_state();
            // Chunks stay well below the peers' frame limit (node.max_message_bytes).
            auto chunk = std::min(state_chunk_bytes, static_cast<std::size_t>(st.ctx->spec->max_message_bytes / 2));
            for (std::size_t off = 0; off < blob.size(); off += chunk) {
              auto n = std::min(chunk, blob.size() - off);
              wire::state_chunk c{m.transfer_id, m.stage, off, blob.size(),
                                  std::vector<std::uint8_t>(blob.begin() + static_cast<std::ptrdiff_t>(off),
                                                            blob.begin() + static_cast<std::ptrdiff_t>(off + n))};
              st.ctx->send(self, from, service::stage, c);
            }
          } else if constexpr (std::is_same_v<T, wire::state_chunk>) {
            on_state_chunk(self, from, m);
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
      if (!st.ready && stage == st.ctx->stage)
        request_state(self);
      if (is_new)
        catch_up(self, id, stage);
      if (!st.stalled.empty() && stage == (st.ctx->stage + 1) % stages(st))
        resume_stalled(self);
    },
    [self](peer_down_atom, const std::string& id) { on_peer_down(self, id); },
    [self](timeout_atom, std::uint64_t transfer, std::uint64_t had) { on_transfer_timeout(self, transfer, had); },
    [self](left_atom, const std::string& id) { self->state.departed.insert(id); },
    [self](stop_atom) {
      self->state.draining = true;
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
      else
        self->state.armed = phase;
    },
    [self](start_atom) {
      if (!self->state.running)
        start_iteration(self);
    },
    [self](tick_atom, std::uint64_t iteration) { stall_watch(self, iteration); },
    [self](resend_atom, std::uint64_t key, const std::string& to, std::uint32_t attempt,
           const std::string& hint) { on_resend(self, key, to, attempt, hint); },
  };
}

} // namespace

caf::actor spawn_compute(caf::event_based_actor* parent, std::shared_ptr<const host_context> ctx) {
  return parent->spawn<caf::linked>(compute, std::move(ctx), caf::actor_cast<caf::actor>(parent));
}

} // namespace gwtf::actors
