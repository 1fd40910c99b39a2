// A host's membership: heartbeats, suspicion, joins and leaves, the resume cut and restores
// (membership_view and stage_restore decide; this actor sends).
#include <chrono>
#include <csignal>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/host/host_internal.hpp"
#include "actors/core/membership_view.hpp"
#include "actors/core/stage_restore.hpp"
#include "actors/host/host_actors.hpp"

namespace gwtf::actors {

namespace {

struct membership_state {
  std::unique_ptr<membership_view> view;
  std::vector<peer_listener_actor> subscribers;
  wire::hello me;
  std::set<std::string> known; // peers the link found (node mode), besides the declared hosts
  std::int64_t last_tick_ms = 0; // when this host last beat: a long gap means it was frozen
  bool frozen = false;
  bool restoring = false;        // it follows a RESTORE: the process starts again in a moment
  std::string restore_problem;   // the last reason a restore could not be planned (said once)
  bool awaiting_cut = false;     // started with plain --resume, no weights until the cut is agreed
  std::vector<std::string> resume_view; // the live hosts when the resume plan last changed
  std::int64_t resume_view_since = 0;
};

membership_actor::behavior_type membership(metered_ptr<membership_actor, membership_state> self, ctx_ptr ctx,
                                           supervisor_actor supervisor) {
  ctx->meter(self, "membership");
  auto& st = self->state;
  st.view = std::make_unique<membership_view>(ctx->host.name, ctx->spec->faults.connection_timeout_ms);
  st.me.peer_id = ctx->host.name;
  st.me.address = ctx->spec->advertise.empty() ? "embedded" : ctx->spec->advertise;
  st.me.region = ctx->host.region;
  st.me.role = ctx->host.role == host_role::data_holder ? wire::peer_role::data_holder
                                                        : wire::peer_role::relay;
  st.me.stage = ctx->joining ? -1 : ctx->stage;
  st.me.capacity = static_cast<std::uint32_t>(ctx->host.capacity);
  st.awaiting_cut = ctx->awaits_cut();
  if (ctx->spec->self_restore)
    st.me.checkpoints = checkpoint_inventory(*ctx->spec, ctx->host.name);
  st.me.incarnation = ctx->incarnation;
  auto notify = [self](const std::vector<view_change>& changes) {
    for (auto& c : changes)
      for (auto& s : self->state.subscribers) {
        if (c.up)
          self->send(s, peer_up_atom::value, c.peer,
                     static_cast<std::int32_t>(self->state.view->peers().at(c.peer).hello.stage));
        else
          self->send(s, peer_down_atom::value, c.peer);
      }
  };
  auto beat = [self, ctx] {
    for (auto& h : ctx->spec->hosts)
      if (h.name != ctx->host.name && self->state.known.count(h.name) == 0)
        ctx->send(self, h.name, service::membership, self->state.me);
    for (auto& name : self->state.known)
      ctx->send(self, name, service::membership, self->state.me);
  };
  // A host whose own heartbeats stopped for longer than the connection timeout (SIGSTOP, a
  // swapped-out process) has been declared dead by its peers: it must not speak for its old
  // incarnation again. The supervisor restarts it as a new replica that downloads its state.
  auto frozen = [self, ctx, supervisor] {
    auto& st = self->state;
    auto now = now_ms();
    if (st.frozen)
      return true;
    auto gap = st.last_tick_ms > 0 ? now - st.last_tick_ms : 0;
    if (ctx->frozen()) // the process's watch saw the gap first (node mode)
      gap = std::max(gap, ctx->watch->longest_gap_ms());
    else if (gap <= ctx->spec->faults.connection_timeout_ms)
      return false;
    st.frozen = true;
    self->send(supervisor, restart_atom::value,
               "no heartbeat sent for " + std::to_string(gap)
                 + " ms: declared dead by the peers, rejoining as a new replica");
    return st.frozen;
  };
  // Node mode's self-restore (docs/checkpoints.md): the live hosts as their heartbeats
  // describe them, this one first.
  auto live_hosts = [self] {
    auto& st = self->state;
    std::vector<restore_host> out{
      {st.me.peer_id, st.me.role == wire::peer_role::data_holder, st.me.stage, st.me.checkpoints}};
    for (auto& id : st.view->live()) {
      auto& h = st.view->peers().at(id).hello;
      out.push_back({id, h.role == wire::peer_role::data_holder, h.stage, h.checkpoints});
    }
    return out;
  };
  // Follows a restore: RESTORE to every live peer but the one it came from (each host
  // forwards it once, so a peer the decider could not reach still hears it), then the
  // process falls silent and its reporter starts it again at the cut.
  auto follow = [self, ctx](const wire::restore& r, const std::string& from) {
    auto& st = self->state;
    st.restoring = true;
    for (auto& id : st.view->live())
      if (id != from && id != r.decided_by)
        ctx->send(self, id, service::membership, r);
    std::int32_t next = -1;
    if (st.me.role == wire::peer_role::relay)
      next = r.restorer == ctx->host.name ? static_cast<std::int32_t>(r.stage)
             : st.me.stage >= 1           ? st.me.stage
                                          : (ctx->stage >= 1 ? ctx->stage : -1);
    tell(self, ctx->reporter, restore_atom::value, ctx->host.name, r.stage, r.iteration, r.restorer, r.from_stage,
         r.decided_by, next);
    if (ctx->watch)
      ctx->watch->silence();
  };
  // Plain --resume in node mode: the deciding data holder orders the cut once every data
  // holder and every relay stage is there and the live hosts stayed the same for a
  // connection timeout (their heartbeats, with what they keep, have arrived).
  auto agree_on_cut = [self, ctx, live_hosts, follow] {
    auto& st = self->state;
    if (!st.awaiting_cut || st.restoring)
      return;
    auto live = live_hosts();
    if (!decides_restore(ctx->host.name, live))
      return;
    std::vector<std::string> names;
    for (auto& h : live)
      names.push_back(h.name);
    auto now = now_ms();
    if (names != st.resume_view) {
      st.resume_view = names;
      st.resume_view_since = now;
    }
    if (now - st.resume_view_since < ctx->spec->faults.connection_timeout_ms)
      return;
    auto plan = plan_resume(ctx->spec->model.stages, ctx->spec->holders, ctx->host.name, live);
    if (auto* why = std::get_if<std::string>(&plan)) {
      if (*why != st.restore_problem)
        tell(self, ctx->reporter, failure_atom::value, ctx->host.name,
             "resuming: no cut agreed yet: " + *why);
      st.restore_problem = *why;
      return;
    }
    follow(std::get<wire::restore>(plan), ctx->host.name);
  };
  self->send(self, tick_atom::value);
  return {
    [self, ctx, notify, beat, frozen, agree_on_cut](tick_atom) {
      if (frozen())
        return;
      // What it can serve for a restore goes out with every heartbeat.
      if (ctx->spec->self_restore)
        self->state.me.checkpoints = checkpoint_inventory(*ctx->spec, ctx->host.name);
      agree_on_cut();
      self->state.last_tick_ms = now_ms();
      beat();
      auto changes = self->state.view->tick(now_ms());
      for (auto& c : changes)
        if (!c.up) // silent past the connection timeout (a LEAVE is not a death)
          tell(self, ctx->reporter, peer_down_atom::value, ctx->host.name, c.peer);
      notify(changes);
      self->delayed_send(self, std::chrono::milliseconds(ctx->spec->faults.heartbeat_interval_ms),
                         tick_atom::value);
    },
    [self, ctx, notify, follow](deliver_atom, const std::string& from, wire_frame& frame) {
      auto msg = ctx->open(self, from, std::move(frame));
      if (!msg)
        return;
      if (auto* r = std::get_if<wire::restore>(&*msg)) {
        auto& st = self->state;
        if (st.restoring)
          return; // it follows one already (this is a forwarded copy)
        std::optional<std::string> why;
        if (!ctx->spec->self_restore)
          why = std::string{"this host does not restore stages by itself (no checkpoints, or its launcher does)"};
        else if (!st.view->alive(from))
          why = from + " is not a live peer";
        else
          why = check_restore(*r, ctx->spec->model.stages, ctx->host.name, st.me.stage, st.awaiting_cut);
        if (why) {
          tell(self, ctx->reporter, failure_atom::value, ctx->host.name,
               "RESTORE of stage " + std::to_string(r->stage) + " from " + from + " refused: " + *why);
          return;
        }
        follow(*r, from);
        return;
      }
      if (auto* h = std::get_if<wire::hello>(&*msg)) {
        if (h->peer_id != from) {
          tell(self, ctx->reporter, failure_atom::value, ctx->host.name,
               "hello from " + from + " names " + h->peer_id);
          return;
        }
        notify(self->state.view->heard(*h, now_ms()));
      } else if (auto* l = std::get_if<wire::leave>(&*msg)) {
        if (l->peer_id != from)
          return;
        auto changes = self->state.view->left(*l);
        // A drained leave: what the peer shared stays valid.
        for (auto& c : changes)
          if (!c.up && l->drained)
            for (auto& s : self->state.subscribers)
              self->send(s, left_atom::value, c.peer);
        notify(changes);
      }
    },
    [self](place_atom) {
      // For a host placing itself: the placed live peers as (stage, capacity) pairs, and
      // the relays without a stage, which may be placing themselves at the same time.
      std::vector<std::int32_t> placed, unplaced_capacity;
      std::vector<std::string> unplaced, placed_names, placed_regions, unplaced_regions;
      for (auto& id : self->state.view->live()) {
        auto& h = self->state.view->peers().at(id).hello;
        if (h.stage < 0 && h.role == wire::peer_role::relay) {
          unplaced.push_back(id);
          unplaced_capacity.push_back(static_cast<std::int32_t>(h.capacity));
          unplaced_regions.push_back(h.region);
        } else {
          placed.push_back(h.stage);
          placed.push_back(static_cast<std::int32_t>(h.capacity));
          placed_names.push_back(id);
          placed_regions.push_back(h.region);
        }
      }
      return caf::make_result(placed, unplaced, unplaced_capacity, placed_names, placed_regions, unplaced_regions);
    },
    [self, ctx, frozen](known_atom, const std::string& name) {
      if (frozen())
        return;
      if (name != ctx->host.name && self->state.known.insert(name).second)
        ctx->send(self, name, service::membership, self->state.me);
    },
    [self](subscribe_atom, peer_listener_actor a) {
      for (auto& id : self->state.view->live())
        self->send(a, peer_up_atom::value, id,
                   static_cast<std::int32_t>(self->state.view->peers().at(id).hello.stage));
      self->state.subscribers.push_back(std::move(a));
    },
    [self, beat, frozen](stage_atom, std::int32_t stage) {
      if (frozen())
        return;
      if (stage >= 0) // it holds weights now (a host that came after the cut downloaded them)
        self->state.awaiting_cut = false;
      self->state.me.stage = stage;
      beat();
    },
    [self, ctx](stop_atom, bool drained) {
      for (auto& id : self->state.view->live())
        ctx->send(self, id, service::membership, wire::leave{ctx->host.name, ctx->incarnation, drained});
    },
    [self, ctx, live_hosts, follow](restore_atom, std::uint32_t stage, std::uint64_t iteration) {
      // A data holder's compute: `stage` lost while `iteration` stalls. The live data holder
      // with the lowest name decides; the others' computes ask too, and are ignored here.
      auto& st = self->state;
      if (!ctx->spec->self_restore || st.restoring || st.awaiting_cut)
        return;
      auto live = live_hosts();
      if (!decides_restore(ctx->host.name, live))
        return;
      auto plan = plan_restore(ctx->spec->model.stages, stage, ctx->host.name, live, ctx->spec->holders);
      if (auto* why = std::get_if<std::string>(&plan)) {
        if (*why != st.restore_problem) // said once; asked again every restore delay
          tell(self, ctx->reporter, failure_atom::value, ctx->host.name,
               "cannot restore stage " + std::to_string(stage) + " (iteration " + std::to_string(iteration)
                 + " stalls): " + *why);
        st.restore_problem = *why;
        return;
      }
      follow(std::get<wire::restore>(plan), ctx->host.name);
    },
    [self](inspect_atom) -> std::string {
      auto& st = self->state;
      auto now = now_ms();
      nlohmann::ordered_json peers = nlohmann::ordered_json::array();
      for (auto& [id, p] : st.view->peers())
        peers.push_back({{"name", id},
                         {"address", p.hello.address},
                         {"region", p.hello.region},
                         {"role", p.hello.role == wire::peer_role::data_holder ? "data holder" : "relay"},
                         {"stage", p.hello.stage},
                         {"capacity", p.hello.capacity},
                         {"state", p.alive ? "alive" : "down"},
                         {"last_heard_ms", now - p.last_heard_ms},
                         {"suspect_after_ms", st.view->suspect_after_ms(p)},
                         {"incarnation", p.hello.incarnation}});
      return nlohmann::ordered_json{{"mailbox", self->mailbox().size()},
                            {"self",
                             {{"name", st.me.peer_id},
                              {"address", st.me.address},
                              {"region", st.me.region},
                              {"stage", st.me.stage},
                              {"capacity", st.me.capacity},
                              {"incarnation", st.me.incarnation}}},
                            {"peers", peers}}
        .dump();
    },
  };
}

} // namespace

membership_actor spawn_membership(caf::local_actor* parent, ctx_ptr ctx, supervisor_actor supervisor) {
  // Heartbeats on time: on a thread of its own (mostly asleep), never behind a scheduler
  // worker that is busy with another actor (in the embedded cluster the hosts' computes share
  // the scheduler's threads; in node mode the link, balancer and probe do).
  return parent->spawn<caf::linked + caf::detached>(membership, std::move(ctx), std::move(supervisor));
}

} // namespace gwtf::actors
