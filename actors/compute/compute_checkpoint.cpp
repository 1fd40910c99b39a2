// Checkpoints of a replica (docs/checkpoints.md): written after the steps that
// training.checkpoint_every names and after the last one, by a detached writer actor so
// that the file system never stalls the compute, and pushed as STATE_CHUNKs to
// training.checkpoint_replicas hosts of other stages, whose writers keep them; loaded at
// start when the run resumes.
#include "actors/compute/compute_internal.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "actors/core/push_pacer.hpp"
#include "model/checkpoint.hpp"

namespace gwtf::actors {

std::string checkpoint_root(const cluster_spec& spec, const std::string& host) {
  return spec.data_dir.empty() ? std::string{} : spec.data_dir + "/" + host;
}

namespace compute {

namespace {

using write_atom = caf::atom_constant<caf::atom("ckptwrite")>;
using piece_atom = caf::atom_constant<caf::atom("ckptpiece")>;
using serve_atom = caf::atom_constant<caf::atom("ckptserve")>;
using pace_atom = caf::atom_constant<caf::atom("ckptpace")>;

// A replica being received: in order, from one sender and transfer.
struct assembly {
  std::uint32_t stage = 0;
  std::uint64_t total = 0;
  std::vector<std::uint8_t> bytes;
};

struct writer_state {
  std::map<std::pair<std::string, std::uint64_t>, assembly> incoming; // (sender, transfer)
  std::deque<std::pair<std::string, std::uint64_t>> order;             // oldest first
  std::uint64_t transfers = 0;
  std::map<std::string, clock::time_point> served; // a peer's last checkpoint fetch, when it began
  std::unique_ptr<push_pacer> pacer; // training.checkpoint_push_mb_s > 0: copies paced
  bool pacing = false;               // a pace_atom is on its way
};

using writer_ptr = caf::stateful_actor<writer_state>*;
constexpr std::size_t max_incoming = 4; // replicas assembled at once; the oldest gives way

void report(writer_ptr self, const ctx_ptr& ctx, const std::string& what) {
  tell(self, ctx->reporter, failure_atom::value, ctx->host.name, what);
}

std::size_t chunk_bytes(const ctx_ptr& ctx) { return wire_chunk_bytes(*ctx->spec); }

// Sends a state blob to `to` as the STATE_CHUNKs of transfer `id`, each well below the
// peers' frame limit (node.max_message_bytes).
void send_chunks(writer_ptr self, const ctx_ptr& ctx, const std::string& to, std::uint64_t id, std::uint32_t stage,
                 const std::vector<std::uint8_t>& state) {
  auto chunk = chunk_bytes(ctx);
  for (std::size_t off = 0; off < state.size(); off += chunk) {
    auto n = std::min(chunk, state.size() - off);
    ctx->send(self, to, service::stage,
              wire::state_chunk{id, stage, off, state.size(),
                                std::vector<std::uint8_t>(state.begin() + static_cast<std::ptrdiff_t>(off),
                                                          state.begin() + static_cast<std::ptrdiff_t>(off + n))});
  }
}

// Paced copies: sends the next piece and comes back after its gap, until none is left.
void pace(writer_ptr self, const ctx_ptr& ctx) {
  auto& st = self->state;
  auto p = st.pacer->next();
  if (!p) {
    st.pacing = false;
    return;
  }
  auto bytes = p->data.size();
  ctx->send(self, p->to, service::stage, wire::state_chunk{p->transfer, p->stage, p->offset, p->total, std::move(p->data)});
  st.pacing = true;
  self->delayed_send(self, std::chrono::microseconds(st.pacer->gap_us(bytes)), pace_atom::value);
}

// Sends the state blob to `targets` as STATE_CHUNKs of its stage (not theirs: that is how
// they tell a replica push from a download): at once, or paced (training.checkpoint_push_mb_s).
void push(writer_ptr self, const ctx_ptr& ctx, std::uint32_t stage, std::uint64_t iteration,
          std::vector<std::uint8_t>&& state, const std::vector<std::string>& targets) {
  auto& st = self->state;
  auto rate = ctx->spec->training.checkpoint_push_mb_s;
  // The run's last checkpoint goes at once, and what is still paced with it: training is
  // over, nothing to make room for, and the host leaves soon.
  if (iteration >= ctx->spec->end_iteration()) {
    rate = 0;
    while (st.pacer && !st.pacer->empty()) {
      auto p = st.pacer->next();
      ctx->send(self, p->to, service::stage,
                wire::state_chunk{p->transfer, p->stage, p->offset, p->total, std::move(p->data)});
    }
  }
  std::shared_ptr<const std::vector<std::uint8_t>> shared;
  if (rate > 0) {
    if (!st.pacer)
      st.pacer = std::make_unique<push_pacer>(chunk_bytes(ctx), rate * 1e6);
    shared = std::make_shared<const std::vector<std::uint8_t>>(std::move(state));
  }
  for (auto& to : targets) {
    auto id = (static_cast<std::uint64_t>(std::hash<std::string>{}(ctx->host.name)) << 20) ^ (++st.transfers);
    if (shared)
      st.pacer->add(to, id, stage, iteration, shared);
    else
      send_chunks(self, ctx, to, id, stage, state);
  }
  if (shared && !st.pacing)
    pace(self, ctx);
}

// A peer resuming at `iteration` without a checkpoint of its own asks for the one of `stage`
// that this host keeps: its own file or a copy a peer pushed (under node.data_dir, newest
// valid first), sent as the STATE_CHUNKs of the peer's transfer; or one empty chunk: none
// here. A peer is served at most once per connection timeout, so that a peer asking again
// and again cannot make this host read and send its files without end.
void serve(writer_ptr self, const ctx_ptr& ctx, const std::string& to, std::uint64_t transfer, std::uint32_t stage,
           std::uint64_t iteration) {
  auto none = [&] { ctx->send(self, to, service::stage, wire::state_chunk{transfer, stage, 0, 0, {}}); };
  auto now = clock::now();
  auto& last = self->state.served[to];
  if (ctx->spec->data_dir.empty() || stage >= static_cast<std::uint32_t>(ctx->spec->model.stages)
      || (last != clock::time_point{} && now - last < std::chrono::milliseconds(ctx->spec->faults.connection_timeout_ms))) {
    none();
    return;
  }
  for (auto& root : checkpoint_roots(*ctx->spec, ctx->host.name)) {
    std::vector<std::string> skipped;
    auto c = model::load_checkpoint(root, stage, ctx->spec->checkpoint_hash, iteration, skipped);
    for (auto& s : skipped)
      report(self, ctx, "checkpoint " + s);
    if (auto* cp = std::get_if<model::checkpoint>(&c)) {
      last = now;
      send_chunks(self, ctx, to, transfer, stage, cp->state);
      tell(self, ctx->reporter, served_atom::value, ctx->host.name, to, stage, iteration,
           static_cast<std::uint64_t>(cp->state.size()), model::checkpoint_path(root, stage, iteration));
      return;
    }
  }
  none();
}

// A piece of a peer's checkpoint; a complete one is checked and stored.
void receive(writer_ptr self, const ctx_ptr& ctx, const std::string& from, wire::state_chunk& c) {
  auto& st = self->state;
  auto key = std::make_pair(from, c.transfer_id);
  auto limit = largest_state_bytes(*ctx->spec);
  auto it = st.incoming.find(key);
  if (it == st.incoming.end()) {
    if (c.offset != 0)
      return; // the start of this transfer was lost (dropped for a newer one): nothing to do
    if (c.total_bytes > limit || c.stage >= static_cast<std::uint32_t>(ctx->spec->model.stages)) {
      report(self, ctx, "checkpoint replica from " + from + " refused: stage " + std::to_string(c.stage) + ", "
                          + std::to_string(c.total_bytes) + " bytes (limit " + std::to_string(limit) + ")");
      return;
    }
    if (st.order.size() >= max_incoming) {
      st.incoming.erase(st.order.front());
      st.order.pop_front();
    }
    // No reserve: memory grows with what actually arrives, not with what a peer announces.
    it = st.incoming.emplace(key, assembly{c.stage, c.total_bytes, {}}).first;
    st.order.push_back(key);
  }
  auto& in = it->second;
  if (c.stage != in.stage || c.total_bytes != in.total || c.offset != in.bytes.size()) {
    report(self, ctx, "checkpoint replica from " + from + ": a piece out of order or of another transfer; dropped");
    st.incoming.erase(it);
    st.order.erase(std::find(st.order.begin(), st.order.end(), key));
    return;
  }
  in.bytes.insert(in.bytes.end(), c.data.begin(), c.data.end());
  if (in.bytes.size() < in.total)
    return;
  auto blob = std::move(in.bytes);
  auto stage = in.stage;
  st.incoming.erase(it);
  st.order.erase(std::find(st.order.begin(), st.order.end(), key));
  auto info = model::describe_state_blob(blob);
  if (auto* e = std::get_if<std::string>(&info)) {
    report(self, ctx, "checkpoint replica from " + from + " refused: " + *e);
    return;
  }
  auto& i = std::get<model::state_blob_info>(info);
  if (i.stage != stage) {
    report(self, ctx, "checkpoint replica from " + from + " refused: announced stage " + std::to_string(stage)
                        + ", holds stage " + std::to_string(i.stage));
    return;
  }
  auto root = checkpoint_root(*ctx->spec, ctx->host.name) + "/replicas/" + from;
  model::checkpoint_meta meta{stage, static_cast<std::uint32_t>(ctx->spec->model.stages), i.steps,
                              ctx->spec->checkpoint_hash, from};
  auto why = model::write_checkpoint(root, meta, blob, ctx->spec->training.checkpoint_keep);
  if (!why.empty()) {
    report(self, ctx, "checkpoint replica from " + from + " not stored: " + why);
    return;
  }
  tell(self, ctx->reporter, replica_atom::value, ctx->host.name, from, stage, i.steps,
       static_cast<std::uint64_t>(blob.size()), model::checkpoint_path(root, stage, i.steps));
}

// Writes what it is given, one file at a time, reports each to the host's reporter, and
// pushes it to the replica targets; keeps what peers push to it.
caf::behavior checkpoint_writer(writer_ptr self, ctx_ptr ctx, compute_actor owner) {
  return {
    [self, ctx, owner](write_atom, std::uint32_t stage, std::uint64_t iteration, std::vector<std::uint8_t>& state,
                       const std::vector<std::string>& targets) {
      auto start = clock::now();
      model::checkpoint_meta meta{stage, static_cast<std::uint32_t>(ctx->spec->model.stages), iteration,
                                  ctx->spec->checkpoint_hash, ctx->host.name};
      auto root = checkpoint_root(*ctx->spec, ctx->host.name);
      auto why = model::write_checkpoint(root, meta, state, ctx->spec->training.checkpoint_keep);
      if (!why.empty()) {
        report(self, ctx, "checkpoint of stage " + std::to_string(stage) + " at iteration " + std::to_string(iteration)
                            + " not written: " + why);
      } else {
        tell(self, ctx->reporter, checkpoint_atom::value, ctx->host.name, stage, iteration,
             static_cast<std::uint64_t>(state.size()), since(start) * 1000.0,
             model::checkpoint_path(root, stage, iteration));
        self->send(owner, checkpoint_atom::value, iteration);
      }
      push(self, ctx, stage, iteration, std::move(state), targets);
    },
    [self, ctx](pace_atom) { pace(self, ctx); },
    [self, ctx](piece_atom, const std::string& from, std::uint64_t transfer, std::uint32_t stage, std::uint64_t offset,
                std::uint64_t total, std::vector<std::uint8_t>& data) {
      wire::state_chunk c{transfer, stage, offset, total, std::move(data)};
      receive(self, ctx, from, c);
    },
    [self, ctx](serve_atom, const std::string& to, std::uint64_t transfer, std::uint32_t stage, std::uint64_t iteration) {
      serve(self, ctx, to, transfer, stage, iteration);
    },
  };
}

caf::actor writer_of(self_ptr self) {
  auto& st = self->state;
  if (!st.ckpt.checkpoint_writer)
    st.ckpt.checkpoint_writer = self->spawn<caf::detached + caf::linked>(checkpoint_writer, st.ctx, compute_actor{self});
  return st.ckpt.checkpoint_writer;
}

// Up to `n` live hosts of other stages: those in another region than this host (when the
// declared hosts say) first, then by a rendezvous hash of (owner, stage, peer), so that the
// replicas of different stages and owners spread over the cluster.
std::vector<std::string> replica_targets(const compute_state& st, int n) {
  std::map<std::string, std::string> region;
  for (auto& h : st.ctx->spec->hosts)
    region[h.name] = h.region;
  auto mine = region.count(me(st)) ? region[me(st)] : std::string{};
  std::vector<std::tuple<bool, std::uint64_t, std::string>> ranked;
  for (auto& [id, stage] : st.peers)
    if (stage >= 0 && stage != st.ctx->stage && st.gone.count(id) == 0) {
      bool same_region = !mine.empty() && region.count(id) && region[id] == mine;
      auto h = model::mix64(std::hash<std::string>{}(me(st) + "/" + std::to_string(st.ctx->stage) + "/" + id));
      ranked.emplace_back(same_region, ~h, id);
    }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (auto& [same, h, id] : ranked)
    if (static_cast<int>(out.size()) < n)
      out.push_back(id);
  return out;
}

} // namespace

std::vector<std::string> checkpoint_roots(const cluster_spec& spec, const std::string& me) {
  std::vector<std::string> out;
  if (spec.data_dir.empty())
    return out;
  out.push_back(checkpoint_root(spec, me));
  std::error_code ec;
  std::vector<std::string> hosts;
  for (auto& e : std::filesystem::directory_iterator(spec.data_dir, ec))
    if (e.is_directory(ec))
      hosts.push_back(e.path().string());
  std::sort(hosts.begin(), hosts.end());
  for (auto& h : hosts) {
    if (h != out.front())
      out.push_back(h);
    std::vector<std::string> replicas;
    for (auto& r : std::filesystem::directory_iterator(h + "/replicas", ec))
      if (r.is_directory(ec))
        replicas.push_back(r.path().string());
    std::sort(replicas.begin(), replicas.end());
    out.insert(out.end(), replicas.begin(), replicas.end());
  }
  return out;
}

} // namespace compute

std::vector<wire::held_checkpoint> checkpoint_inventory(const cluster_spec& spec, const std::string& host) {
  std::set<std::pair<std::uint32_t, std::uint64_t>> held;
  for (auto& root : compute::checkpoint_roots(spec, host))
    for (int s = 0; s < spec.model.stages; ++s) {
      auto its = model::checkpoint_iterations(root, static_cast<std::uint32_t>(s));
      for (auto i : its)
        held.emplace(static_cast<std::uint32_t>(s), i);
    }
  // The newest 8 per stage: a restore needs the newest iterations every stage shares.
  std::vector<wire::held_checkpoint> out;
  std::map<std::uint32_t, int> per_stage;
  for (auto it = held.rbegin(); it != held.rend(); ++it)
    if (per_stage[it->first]++ < 8)
      out.push_back({it->first, it->second});
  std::reverse(out.begin(), out.end());
  return out;
}

namespace compute {

void resume_from_checkpoint(self_ptr self) {
  auto& st = self->state;
  auto stage = static_cast<std::uint32_t>(st.ctx->stage);
  // Its own files first; then whatever else lies under node.data_dir: other hosts' directories
  // (the embedded cluster and launch share one) and the replicas peers pushed here.
  std::string why = st.ctx->spec->data_dir.empty() ? "node.data_dir is not set" : "";
  std::optional<model::checkpoint> found;
  std::optional<model::pending_update> found_pending; // overlap: the step its state carries
  std::string path;
  for (auto& root : checkpoint_roots(*st.ctx->spec, me(st))) {
    std::vector<std::string> skipped;
    auto c = model::load_checkpoint(root, stage, st.ctx->spec->checkpoint_hash, st.ctx->spec->resume_at, skipped);
    for (auto& s : skipped)
      report_failure(self, "checkpoint " + s);
    if (auto* cp = std::get_if<model::checkpoint>(&c)) {
      std::optional<model::pending_update> pending;
      auto r = st.model->import_state(cp->state.data(), cp->state.size(), &pending);
      path = model::checkpoint_path(root, stage, cp->meta.iteration);
      if (auto* e = std::get_if<std::string>(&r)) {
        report_failure(self, "checkpoint " + path + ": " + *e);
      } else if (static_cast<std::uint64_t>(st.model->steps()) + (pending ? 1 : 0) != cp->meta.iteration) {
        report_failure(self, "checkpoint " + path + ": its state holds " + std::to_string(st.model->steps()) + " steps");
      } else if (pending && !overlapped(st)) {
        // (Without a pending step an overlapped run starts its one-iteration delay again: a
        // checkpoint written at the end of a run, --until's too, or by a sync run.)
        report_failure(self, "checkpoint " + path + ": it carries a pending step (written with training.averaging "
                             "overlap); this run averages sync");
      } else {
        found = std::move(*cp);
        found_pending = std::move(pending);
        break;
      }
    } else if (root == checkpoint_root(*st.ctx->spec, me(st))) {
      why = std::get<std::string>(c); // what its own directory lacks: the reason, if nothing else has it
      report_failure(self, "checkpoint: " + why + "; looking for another copy under " + st.ctx->spec->data_dir);
    }
  }
  if (!found) {
    // The stage's state comes from a live replica instead, as for any joiner; resuming at a
    // given iteration, also from the checkpoint of it that another host keeps (a whole stage
    // lost: its hosts' disks are gone, the copies on hosts of other stages are not).
    if (st.ctx->spec->resume_at) {
      st.fetch.copy_iteration = *st.ctx->spec->resume_at;
      report_failure(self, "cannot resume: " + why + "; downloading the stage state from a live replica, or the "
                             "checkpoint of iteration " + std::to_string(*st.fetch.copy_iteration) + " another host keeps");
    } else {
      report_failure(self, "cannot resume: " + why + "; joining to download the stage state (give --resume-at N "
                             "to fetch the checkpoint of iteration N another host keeps)");
    }
    st.ready = false;
    if (!is_holder(st))
      self->send(st.supervisor, stage_atom::value, std::int32_t{-1});
    return;
  }
  st.current = found->meta.iteration;
  install_pending(st, std::move(found_pending)); // overlap: the iteration after its pending step (the same)
  st.first_iteration = st.current;
  st.ckpt.last_checkpoint = found->meta.iteration;
  tell(self, st.ctx->reporter, loaded_atom::value, me(st), stage, found->meta.iteration, st.model->weights_hash(),
       path);
}

void maybe_checkpoint(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  auto& training = st.ctx->spec->training;
  auto steps = i + 1;
  if (training.checkpoint_every <= 0 || st.ctx->spec->data_dir.empty())
    return;
  if (steps % static_cast<std::uint64_t>(training.checkpoint_every) != 0 && steps != st.ctx->spec->end_iteration())
    return;
  if (overlapped(st) && steps < st.ctx->spec->end_iteration()) {
    // A state with overlap is its weights and the pending step, which is averaged still:
    // written once that is complete (write_due_checkpoint), so that a resume takes it.
    st.ckpt.due = i;
    pending_complete(self);
    return;
  }
  tell(self, writer_of(self), write_atom::value, static_cast<std::uint32_t>(st.ctx->stage), steps,
       st.model->export_state(), replica_targets(st, training.checkpoint_replicas));
}

void write_due_checkpoint(self_ptr self, const model::pending_update& p) {
  auto& st = self->state;
  if (!st.ckpt.due || static_cast<std::int64_t>(*st.ckpt.due) + 1 != p.iteration)
    return;
  // Named by the iteration it resumes at: after its pending step (the state at the start of
  // that iteration, as a sync checkpoint's name says too).
  auto resumes_at = *st.ckpt.due + 2;
  st.ckpt.due.reset();
  if (resumes_at >= st.ctx->spec->end_iteration())
    return; // the run's last checkpoint (after its last step, nothing pending) has that name
  tell(self, writer_of(self), write_atom::value, static_cast<std::uint32_t>(st.ctx->stage), resumes_at,
       st.model->export_state(&p), replica_targets(st, st.ctx->spec->training.checkpoint_replicas));
}

void serve_checkpoint(self_ptr self, const std::string& from, const wire::state_request& r) {
  tell(self, writer_of(self), serve_atom::value, from, r.transfer_id, r.stage, r.iteration);
}

void on_replica_chunk(self_ptr self, const std::string& from, wire::state_chunk& chunk) {
  auto& st = self->state;
  if (chunk.total_bytes == 0)
    return; // a "none here" answer to a fetch this host no longer makes (its stage changed)
  if (st.ctx->spec->data_dir.empty() || st.ctx->spec->training.checkpoint_every <= 0) {
    if (chunk.offset == 0) // once per replica, not per piece
      report_failure(self, "checkpoint replica from " + from + " refused: this host keeps no checkpoints");
    return;
  }
  tell(self, writer_of(self), piece_atom::value, from, chunk.transfer_id, chunk.stage, chunk.offset, chunk.total_bytes,
       std::move(chunk.data));
}

} // namespace compute
} // namespace gwtf::actors
