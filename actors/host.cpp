// One virtual host: supervisor, membership, link probe, flow balancer and microbatch
// carriers (the stage / data holder lives in stage_actor.cpp, with LibTorch).
#include <chrono>
#include <csignal>
#include <deque>
#include <map>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "actors/inspect_view.hpp"
#include "actors/link_estimator.hpp"
#include "actors/host_internal.hpp"
#include "actors/membership_view.hpp"
#include "actors/stage_restore.hpp"
#include "routing/balancer.hpp"
#include "routing/cost_model.hpp"
#include "routing/placement.hpp"

namespace gwtf::actors {

namespace {

using ctx_ptr = std::shared_ptr<const host_context>;
using clock = std::chrono::steady_clock;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch()).count();
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

// --- membership ----------------------------------------------------------------------

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

// --- link probe ----------------------------------------------------------------------

struct probe_state {
  std::map<std::string, std::int32_t> peers;
  std::map<std::string, double> small_rtt;        // the latest small round trip (the shell shows it)
  std::map<std::string, link_estimator> estimates; // robust latency and bandwidth per peer
  std::uint64_t next_id = 1;
  balancer_actor balancer;
  compute_actor compute;
  double compute_s = 0; // this host's compute per microbatch (the compute tells it), told in PONGs
};

constexpr std::size_t bulk_probe_bytes = 64 * 1024;

probe_actor::behavior_type probe(metered_ptr<probe_actor, probe_state> self, ctx_ptr ctx, balancer_actor balancer,
                                 compute_actor compute) {
  ctx->meter(self, "probe");
  self->state.balancer = std::move(balancer);
  self->state.compute = std::move(compute);
  self->send(self, tick_atom::value);
  return {
    [self, ctx](tick_atom) {
      for (auto& [id, stage] : self->state.peers) {
        ctx->send(self, id, service::probe, wire::ping{self->state.next_id++, now_ns(), {}});
        ctx->send(self, id, service::probe,
                  wire::ping{self->state.next_id++, now_ns(), std::vector<std::uint8_t>(bulk_probe_bytes)});
      }
      auto period = std::max(1000, ctx->spec->routing.gwtf.tick_ms * 2);
      self->delayed_send(self, std::chrono::milliseconds(period), tick_atom::value);
    },
    [self, ctx](deliver_atom, const std::string& from, wire_frame& frame) {
      auto msg = ctx->open(self, from, std::move(frame));
      if (!msg)
        return;
      if (auto* p = std::get_if<wire::ping>(&*msg)) {
        ctx->send(self, from, service::probe,
                  wire::pong{p->probe_id, p->sent_nanos, p->padding.size(), self->state.compute_s});
      } else if (auto* p = std::get_if<wire::pong>(&*msg)) {
        double rtt = static_cast<double>(now_ns() - p->sent_nanos) / 1e9;
        if (rtt < 0)
          return;
        auto& est = self->state.estimates[from];
        if (p->received_bytes == 0) {
          self->state.small_rtt[from] = rtt;
          est.small(rtt);
        } else if (auto e = est.bulk(rtt, p->received_bytes)) {
          // Emulated time runs time_scale x faster: report the emulated network's figures.
          double scale = ctx->spec->time_scale > 0 ? ctx->spec->time_scale : 1.0;
          self->send(self->state.balancer, latency_atom::value, from, e->latency_s / scale,
                     e->bandwidth_bytes_s * scale);
          // Adaptive compression weighs wall seconds of transfer against wall seconds of compute.
          if (ctx->spec->adaptive)
            self->send(self->state.compute, latency_atom::value, from, e->bandwidth_bytes_s, p->compute_seconds);
        }
      }
    },
    [self](compute_atom, double seconds) { self->state.compute_s = seconds; },
    [self](peer_up_atom, const std::string& id, std::int32_t stage) { self->state.peers[id] = stage; },
    [self](peer_down_atom, const std::string& id) {
      self->state.peers.erase(id);
      self->state.small_rtt.erase(id);
      self->state.estimates.erase(id); // a peer back up is measured afresh
    },
    [](left_atom, const std::string&) {}, // a peer_down follows
    [self](inspect_atom) -> std::string {
      nlohmann::ordered_json rtts = nlohmann::ordered_json::object();
      for (auto& [id, rtt] : self->state.small_rtt)
        rtts[id] = rtt * 1000;
      return nlohmann::ordered_json{{"mailbox", self->mailbox().size()}, {"rtt_ms", rtts}}.dump();
    },
  };
}

// --- flow balancer ---------------------------------------------------------------------

struct balancer_state {
  std::unique_ptr<routing::flow_balancer> core;
  std::map<std::string, std::int32_t> stage_of;
  std::map<std::string, routing::link_estimate> links;
  bool ready = false;
  std::int64_t ticks = 0;
  compute_actor compute;
  std::vector<std::string> last_targets, last_prevs, last_nexts;
  /// (data holder, next hop) of the microbatches in flight through this host, as the
  /// compute last told (routing.gwtf.idle_moves)
  std::set<std::pair<std::string, std::string>> in_flight;
};

balancer_actor::behavior_type balancer(metered_ptr<balancer_actor, balancer_state> self, ctx_ptr ctx,
                                       compute_actor compute) {
  ctx->meter(self, "balancer");
  auto& st = self->state;
  st.compute = std::move(compute);
  int stages = ctx->spec->model.stages;
  st.core = std::make_unique<routing::flow_balancer>(ctx->host.name, ctx->stage, stages,
                                                     ctx->host.capacity, ctx->spec->routing.gwtf);
  st.core->set_microbatches(static_cast<std::uint32_t>(ctx->spec->training.microbatches_per_holder));
  st.core->set_in_flight([&in_flight = st.in_flight](const std::string& target, const std::string& next) {
    return in_flight.count({target, next}) > 0;
  });
  st.ready = !ctx->joining;
  // Tells the balancer what it knows of a peer: its edge cost and the link's occupancy per
  // microbatch, from the probes (an unprobed link: 50 ms, 50 MB/s).
  auto add_peer = [self, ctx, stages](const std::string& id, std::int32_t stage) {
    auto& st = self->state;
    int next = (ctx->stage + 1) % stages, prev = (ctx->stage + stages - 1) % stages;
    if (stage != next && stage != prev) {
      st.core->add_peer(id, stage, 0.0);
      return;
    }
    routing::link_estimate est{0.05, 50e6};
    if (auto l = st.links.find(id); l != st.links.end())
      est = l->second;
    st.core->add_peer(id, stage, routing::edge_cost(0, 0, est, est, ctx->spec->activation_bytes),
                      routing::link_occupancy_s(est, est, ctx->spec->activation_bytes));
  };
  auto flush = [self, ctx](std::vector<routing::outgoing> out) {
    for (auto& o : out)
      ctx->send(self, o.to, service::balancer, o.msg);
    auto& st = self->state;
    std::vector<std::string> t, p, n;
    for (auto& [id, f] : st.core->flows())
      if (f.built) {
        t.push_back(f.target);
        p.push_back(f.prev);
        n.push_back(f.next);
      }
    if (t != st.last_targets || p != st.last_prevs || n != st.last_nexts) {
      st.last_targets = t;
      st.last_prevs = p;
      st.last_nexts = n;
      if (st.compute)
        self->send(st.compute, flows_atom::value, t, p, n);
    }
  };
  self->send(self, tick_atom::value);
  return {
    [self, ctx, flush](tick_atom) {
      auto& st = self->state;
      if (st.ready)
        flush(st.core->tick(st.ticks));
      ++st.ticks;
      self->delayed_send(self, std::chrono::milliseconds(ctx->spec->routing.gwtf.tick_ms), tick_atom::value);
    },
    [self](ready_atom) { self->state.ready = true; },
    [self](inflight_atom, const std::vector<std::string>& targets, const std::vector<std::string>& nexts) {
      auto& st = self->state;
      st.in_flight.clear();
      for (std::size_t i = 0; i < targets.size() && i < nexts.size(); ++i)
        st.in_flight.emplace(targets[i], nexts[i]);
    },
    [self, ctx, flush](deliver_atom, const std::string& from, wire_frame& frame) {
      auto& st = self->state;
      if (!st.ready || st.stage_of.count(from) == 0)
        return; // not placed yet, or a stranger: ignore
      auto msg = ctx->open(self, from, std::move(frame));
      if (!msg)
        return;
      flush(st.core->handle(from, *msg, st.ticks));
    },
    [self, ctx, add_peer, flush](peer_up_atom, const std::string& id, std::int32_t stage) {
      auto& st = self->state;
      int stages = ctx->spec->model.stages;
      auto old = st.stage_of.find(id);
      if (old != st.stage_of.end() && old->second != stage) {
        flush(st.core->remove_peer(id, st.ticks));
        st.stage_of.erase(old);
      }
      if (stage < 0)
        return;
      bool neighbour = stage == ctx->stage || stage == (ctx->stage + 1) % stages
                       || stage == (ctx->stage + stages - 1) % stages;
      if (!neighbour)
        return;
      st.stage_of[id] = stage;
      add_peer(id, stage);
    },
    [](left_atom, const std::string&) {}, // a peer_down follows
    [self, flush](peer_down_atom, const std::string& id) {
      auto& st = self->state;
      if (st.stage_of.erase(id) > 0)
        flush(st.core->remove_peer(id, st.ticks));
    },
    [self, add_peer](latency_atom, const std::string& id, double one_way_s, double bytes_per_s) {
      auto& st = self->state;
      st.links[id] = routing::link_estimate{one_way_s, bytes_per_s};
      if (auto s = st.stage_of.find(id); s != st.stage_of.end())
        add_peer(id, s->second);
    },
    [self, ctx](inspect_atom) -> std::string {
      auto& st = self->state;
      nlohmann::ordered_json flows = nlohmann::ordered_json::array();
      for (auto& [id, f] : st.core->flows()) {
        nlohmann::ordered_json j{{"id", id}, {"holder", f.target}, {"prev", f.prev}, {"next", f.next}, {"built", f.built}};
        if (auto c = st.core->ring_cost(f))
          j["ring_cost_s"] = *c;
        if (ctx->spec->routing.gwtf.idle_moves) // a microbatch this host sent on it awaits its backward
          j["busy"] = st.core->busy(f);
        flows.push_back(std::move(j));
      }
      nlohmann::ordered_json links = nlohmann::ordered_json::array();
      for (auto& [id, l] : st.links) {
        auto stage = st.stage_of.find(id);
        links.push_back({{"peer", id},
                         {"stage", stage == st.stage_of.end() ? nlohmann::ordered_json(nullptr)
                                                              : nlohmann::ordered_json(stage->second)},
                         {"latency_ms", l.latency_s * 1000},
                         {"bandwidth_mbps", l.bandwidth_bytes_s * 8 / 1e6}});
      }
      auto& m = st.core->moves();
      return nlohmann::ordered_json{{"mailbox", self->mailbox().size()},
                            {"ready", st.ready},
                            {"spare", st.core->spare()},
                            {"temperature", st.core->temperature()},
                            {"moves", {{"proposed", m.proposed}, {"redirects", m.redirects}, {"swaps", m.swaps},
                                       {"reroutes", m.reroutes}, {"deferred", m.deferred}}},
                            {"flows", flows},
                            {"links", links}}
        .dump();
    },
  };
}

// --- supervisor --------------------------------------------------------------------

struct supervisor_state {
  ctx_ptr ctx;
  membership_actor membership;
  probe_actor probe;
  balancer_actor balancer;
  compute_actor compute;
  std::deque<std::int64_t> restarts; // times of the restarts inside the window
  std::uint64_t generation = 0;      // restarts so far: raises the incarnation
  bool leaving = false;
  bool left = false; // LEAVE sent
  // A relay without a declared stage: membership polls until its view settles.
  int place_polls = 0;
  std::size_t place_seen = 0;
  // The shell: traces running (by serial), queries relayed to peers (by request id), and
  // how many peers' queries this host is answering now.
  struct trace_run {
    caf::typed_response_promise<std::string> promise;
    trace_request request;
    std::shared_ptr<actor_meter> meter;
    std::uint64_t handled_before = 0;
  };
  struct relayed {
    caf::typed_response_promise<std::string> promise;
    std::string host;
  };
  std::map<std::uint64_t, trace_run> traces;
  std::map<std::uint64_t, relayed> relays;
  std::uint64_t next_serial = 0;
  int answering = 0;
};

using supervisor_ptr = metered_ptr<supervisor_actor, supervisor_state>;

// The host's actors, as untyped handles (for links and exits).
std::vector<caf::actor> children(const supervisor_state& st) {
  return {caf::actor_cast<caf::actor>(st.membership), caf::actor_cast<caf::actor>(st.probe),
          caf::actor_cast<caf::actor>(st.balancer), caf::actor_cast<caf::actor>(st.compute)};
}

void register_service(supervisor_ptr self, service s, const caf::actor& a) {
  auto& ctx = self->state.ctx;
  tell(self, ctx->link, register_atom::value, ctx->host.name, static_cast<std::int32_t>(s), a);
}

// The actors that need the host's stage: balancer, link probe and the stage itself.
void start_stage_children(supervisor_ptr self) {
  auto& st = self->state;
  auto& ctx = st.ctx;
  st.compute = spawn_compute(self, supervisor_actor{self}, ctx);
  st.balancer = self->spawn<caf::linked>(balancer, ctx, st.compute);
  st.probe = self->spawn<caf::linked>(probe, ctx, st.balancer, st.compute);
  self->send(st.compute, probe_atom::value, st.probe);
  self->send(st.compute, flows_atom::value, st.balancer);
  register_service(self, service::probe, caf::actor_cast<caf::actor>(st.probe));
  register_service(self, service::balancer, caf::actor_cast<caf::actor>(st.balancer));
  register_service(self, service::stage, caf::actor_cast<caf::actor>(st.compute));
  self->send(st.membership, subscribe_atom::value, peer_listener_actor{st.probe});
  self->send(st.membership, subscribe_atom::value, peer_listener_actor{st.balancer});
  self->send(st.membership, subscribe_atom::value, peer_listener_actor{st.compute});
}

void start_children(supervisor_ptr self, bool joining) {
  auto& st = self->state;
  auto ctx = std::make_shared<host_context>(*st.ctx);
  ctx->joining = joining;
  ctx->incarnation = st.ctx->incarnation + (joining && st.generation > 0 ? 1 : 0);
  st.ctx = ctx;
  st.membership = self->spawn<caf::linked>(membership, ctx, supervisor_actor{self});
  register_service(self, service::membership, caf::actor_cast<caf::actor>(st.membership));
  tell(self, ctx->link, subscribe_atom::value, caf::actor_cast<caf::actor>(st.membership)); // peers found (node mode)
  if (ctx->stage >= 0) {
    start_stage_children(self);
    return;
  }
  st.place_polls = 0;
  st.place_seen = 0;
  self->send(self, place_atom::value);
}

// What DT-FM reads of the membership view besides stages and capacities.
struct region_view {
  std::vector<std::string> placed_names, placed_regions, unplaced_regions;
};

// placement.policy dtfm: the stage DT-FM gives this host among every relay it sees, placed
// already or not (with dtfm no founding relay declares a stage, so each one computes the
// same partition from the same view: in name order), next to the data holders it sees; -1
// when DT-FM cannot place (a region outside the matrix, fewer relays than stages).
int dtfm_stage_of(const host_context& ctx, const std::vector<std::int32_t>& flat,
                  const std::vector<std::string>& unplaced, const region_view& regions) {
  auto req = *ctx.spec->dtfm;
  std::vector<std::pair<std::string, std::string>> relays{{ctx.host.name, ctx.host.region}};
  for (std::size_t i = 0; 2 * i < flat.size() && i < regions.placed_regions.size() && i < regions.placed_names.size(); ++i) {
    if (flat[2 * i] == 0)
      req.holder_regions.push_back(regions.placed_regions[i]);
    else
      relays.emplace_back(regions.placed_names[i], regions.placed_regions[i]);
  }
  for (std::size_t i = 0; i < unplaced.size() && i < regions.unplaced_regions.size(); ++i)
    relays.emplace_back(unplaced[i], regions.unplaced_regions[i]);
  std::sort(relays.begin(), relays.end());
  for (auto& r : relays)
    req.relay_regions.push_back(r.second);
  auto stages = routing::dtfm_stages(*ctx.spec->dtfm_network, req);
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (relays[i].first == ctx.host.name)
      return stages[i];
  return -1;
}

// A relay without a declared stage places itself once its membership view has settled
// (the same live peers at three heartbeats in a row, a data holder among them, or a
// connection timeout after it first saw a holder; a founding relay with placement.relays:
// once it sees that many relays and every roster data holder, or placement.wait_ms), at the stage routing/placement chooses
// (placement.policy gwtf) or DT-FM gives it (dtfm; joiners: the bottleneck rule).
void on_placement_view(supervisor_ptr self, const std::vector<std::int32_t>& flat,
                       const std::vector<std::string>& unplaced, const std::vector<std::int32_t>& unplaced_capacity,
                       const region_view& regions) {
  auto& st = self->state;
  if (st.ctx->stage >= 0 || st.leaving)
    return;
  auto& spec = *st.ctx->spec;
  std::vector<routing::flow_node> known;
  bool holder = false;
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) {
    known.push_back({flat[i], flat[i + 1]});
    holder = holder || flat[i] == 0;
  }
  std::string incomplete; // placement.relays: who was missing when the wait ran out
  if (spec.placement_relays > 0 && !st.ctx->joining) {
    // A founding relay waits for the cluster it founds: every relay that founds it and every
    // data holder of the roster, or placement.wait_ms from its first look.
    auto holders = static_cast<std::size_t>(std::count_if(known.begin(), known.end(), [](auto& n) { return n.stage == 0; }));
    auto relays = 1 + unplaced.size() + (known.size() - holders);
    auto want_holders = std::max<std::size_t>(1, spec.holders.size());
    auto want_relays = static_cast<std::size_t>(spec.placement_relays);
    ++st.place_polls;
    auto waited_ms = static_cast<std::int64_t>(st.place_polls) * spec.faults.heartbeat_interval_ms;
    bool complete = relays >= want_relays && holders >= want_holders;
    if (!complete && !(holder && waited_ms >= spec.placement_wait_ms)) {
      self->delayed_send(self, std::chrono::milliseconds(spec.faults.heartbeat_interval_ms), place_atom::value);
      return;
    }
    if (!complete)
      incomplete = "; after " + std::to_string(waited_ms / 1000) + " s (placement.wait_ms) it saw " + std::to_string(relays)
                   + " of " + std::to_string(want_relays) + " relays and " + std::to_string(holders) + " of "
                   + std::to_string(want_holders) + " data holders";
  } else {
    auto seen = known.size() + unplaced.size();
    bool settled = holder && seen == st.place_seen;
    st.place_seen = seen;
    if (holder)
      ++st.place_polls;
    auto waited_ms = static_cast<std::int64_t>(st.place_polls) * spec.faults.heartbeat_interval_ms;
    if (!(settled && st.place_polls >= 3) && !(holder && waited_ms >= spec.faults.connection_timeout_ms)) {
      self->delayed_send(self, std::chrono::milliseconds(spec.faults.heartbeat_interval_ms), place_atom::value);
      return;
    }
  }
  // Relays without a stage that see each other place themselves in name order, each counting
  // the ones before it: two joining at once do not both fill the same bottleneck. (A placed
  // relay downloading its state also announces no stage and is counted as one of them.)
  std::vector<routing::unplaced_relay> among{{st.ctx->host.name, st.ctx->host.capacity}};
  for (std::size_t i = 0; i < unplaced.size() && i < unplaced_capacity.size(); ++i)
    among.push_back({unplaced[i], unplaced_capacity[i]});
  int stage = -1;
  std::string policy = "the bottleneck rule";
  if (spec.dtfm && spec.dtfm_network && !st.ctx->joining) { // founding relays; joiners: the bottleneck
    stage = dtfm_stage_of(*st.ctx, flat, unplaced, regions);
    if (stage < 1)
      tell(self, st.ctx->reporter, failure_atom::value, st.ctx->host.name,
           std::string{"placement.policy dtfm cannot place this view (a region outside the matrix, or fewer "
                       "relays than stages): the bottleneck rule places it"});
    else
      policy = "DT-FM";
  }
  if (stage < 1)
    stage = routing::place_unstaged_among(known, among, st.ctx->host.name, spec.model.stages);
  if (stage < 1) {
    tell(self, st.ctx->reporter, failure_atom::value, st.ctx->host.name,
         std::string{"no relay stage to join (the model has one stage)"});
    return;
  }
  std::map<int, int> capacity;
  for (auto& n : known)
    capacity[n.stage] += n.capacity;
  std::string why = "by " + policy + " from " + std::to_string(known.size()) + " live peers; relay capacity per stage:";
  for (int s = 1; s < spec.model.stages; ++s)
    why += " " + std::to_string(capacity[s]);
  why += incomplete;
  auto ctx = std::make_shared<host_context>(*st.ctx);
  ctx->stage = stage;
  ctx->host.stage = stage;
  // A live replica of the stage holds its current weights: take them like a joiner, even
  // without --join (a restarted pod, a relay that met the cluster late). Seed weights would
  // carry microbatches of a running iteration with the wrong model.
  bool replica_alive = std::any_of(known.begin(), known.end(), [&](auto& n) { return n.stage == stage; });
  ctx->joining = ctx->joining || replica_alive;
  st.ctx = ctx;
  tell(self, ctx->reporter, placed_atom::value, ctx->host.name, static_cast<std::int32_t>(stage),
       why + (ctx->joining ? "; downloading the stage state" : "; the first replica: the seed's weights"));
  start_stage_children(self);
  // The first replica of its stage starts from the seed's weights like a declared relay and
  // holds its stage now: its peers must learn the stage (membership announced -1 while it was
  // unplaced). A joiner announces it when its download completes.
  if (!ctx->joining)
    self->send(self, stage_atom::value, static_cast<std::int32_t>(stage));
}

// Stops the host's actors (but `failed`, already gone) and starts them again as a new
// incarnation: the stage lost its weights, so it downloads them like a joiner.
void restart_children(supervisor_ptr self, const std::string& why,
                      const caf::actor_addr& failed) {
  auto& st = self->state;
  ++st.generation;
  tell(self, st.ctx->reporter, restart_atom::value, st.ctx->host.name, why);
  for (auto& a : children(st))
    if (a && a.address() != failed) {
      self->unlink_from(a);
      self->send_exit(a, caf::exit_reason::user_shutdown);
    }
  st.membership = membership_actor{};
  st.probe = probe_actor{};
  st.balancer = balancer_actor{};
  st.compute = compute_actor{};
  start_children(self, true);
  tell(self, st.ctx->link, restart_atom::value, st.ctx->incarnation);
}

// A plain query's budget: what the inspection server waits (deploy/node.cpp sets the same).
int answer_budget_ms(const host_context& ctx) {
  return std::max(1000, 2 * ctx.spec->faults.heartbeat_interval_ms);
}

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
  self->delayed_send(self, std::chrono::milliseconds(answer_budget_ms(*st.ctx) + extra_answer_ms(hop.query)),
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
    tell(self, st.ctx->reporter, failure_atom::value, st.ctx->host.name, std::string{"crash asked by the shell"});
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
  auto timeout = std::chrono::milliseconds(answer_budget_ms(*ctx) + extra_answer_ms(req->query));
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

supervisor_actor::behavior_type supervisor(supervisor_ptr self, ctx_ptr ctx) {
  ctx->meter(self, "supervisor");
  self->state.ctx = ctx;
  self->set_exit_handler([self](caf::exit_msg& m) {
    auto& st = self->state;
    if (m.reason == caf::exit_reason::kill || m.source == st.ctx->link.address()) {
      self->quit(m.reason);
      return;
    }
    if (st.leaving || !m.reason)
      return;
    // A local actor failed: restart the host's actors (they share state) per policy.
    auto now = now_ms();
    auto window = st.ctx->spec->faults.restart_window_ms;
    while (!st.restarts.empty() && now - st.restarts.front() > window)
      st.restarts.pop_front();
    if (static_cast<int>(st.restarts.size()) >= st.ctx->spec->faults.max_restarts) {
      st.leaving = true;
      tell(self, st.ctx->reporter, left_atom::value, st.ctx->host.name,
           "restart budget spent: " + self->system().render(m.reason));
      self->send(st.membership, stop_atom::value, false); // not drained: peers redo its work
      for (auto& a : children(st))
        if (a)
          self->send_exit(a, caf::exit_reason::user_shutdown);
      self->quit();
      return;
    }
    st.restarts.push_back(now);
    restart_children(self, self->system().render(m.reason), m.source);
  });
  start_children(self, ctx->joining);
  register_service(self, service::inspect, caf::actor_cast<caf::actor>(self));
  return {
    [self](crash_atom, const std::string& phase) {
      if (phase == "process") // the shell's lab control (node mode): die like a crashed host
        ::raise(SIGKILL);
      if (phase == "any")
        self->quit(caf::exit_reason::kill);
      else
        self->send(self->state.compute, crash_atom::value, phase);
    },
    [self](stop_atom) {
      // A graceful leave: the stage finishes its part of the iteration in progress first
      // (or, if that takes longer than a hop timeout, the host leaves anyway).
      auto& st = self->state;
      if (st.leaving)
        return;
      st.leaving = true;
      if (!st.compute) { // not placed yet: nothing to hand over
        self->send(self, drained_atom::value, true);
        return;
      }
      self->send(st.compute, stop_atom::value);
      self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.hop_timeout_ms), drained_atom::value,
                         false);
    },
    [self](drained_atom, bool drained) {
      auto& st = self->state;
      if (st.left)
        return;
      st.left = true;
      self->send(st.membership, stop_atom::value, drained);
      tell(self, st.ctx->reporter, left_atom::value, st.ctx->host.name, std::string{"asked to leave"});
      self->delayed_send(self, std::chrono::milliseconds(1), done_atom::value);
    },
    [self](done_atom) { self->quit(caf::exit_reason::user_shutdown); },
    [self](restart_atom, const std::string& why) {
      // Membership found this host frozen past the connection timeout (not a local
      // failure: the restart budget is not charged).
      auto& st = self->state;
      if (st.leaving || self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(st.membership))
        return;
      if (st.ctx->spec->advertise.empty()) {
        restart_children(self, why, caf::actor_addr{});
        return;
      }
      // Node mode: the whole process starts again (deploy/node.cpp re-executes it as a
      // joiner). CAF's connections of the frozen process are stale at both ends, and CAF
      // 0.17 routed messages of a restarted host through third processes to wrong actors;
      // a new process is a new CAF node with none of that state.
      st.leaving = true;
      tell(self, st.ctx->reporter, restart_atom::value, st.ctx->host.name, why);
      self->quit(make_error(ec::frozen, why));
    },
    [self](restore_atom, std::uint32_t stage, std::uint64_t iteration) {
      // The compute of a data holder: a relay stage is lost (node mode's self-restore).
      if (!self->state.leaving)
        self->send(self->state.membership, restore_atom::value, stage, iteration);
    },
    [self](place_atom) {
      auto& st = self->state;
      if (st.ctx->stage >= 0 || st.leaving)
        return;
      auto timeout = std::chrono::milliseconds(st.ctx->spec->faults.connection_timeout_ms);
      self->request(st.membership, timeout, place_atom::value)
        .then([self](const std::vector<std::int32_t>& flat, const std::vector<std::string>& unplaced,
                     const std::vector<std::int32_t>& capacity, const std::vector<std::string>& placed_names,
                     const std::vector<std::string>& placed_regions, const std::vector<std::string>& unplaced_regions) {
                on_placement_view(self, flat, unplaced, capacity, {placed_names, placed_regions, unplaced_regions});
              },
              [self](caf::error&) {
                // Membership restarting: ask again.
                self->delayed_send(self, std::chrono::milliseconds(self->state.ctx->spec->faults.heartbeat_interval_ms),
                                   place_atom::value);
              });
    },
    [self](stage_atom, std::int32_t stage) {
      // The stage holds valid weights (>= 0) or is downloading them (-1).
      self->send(self->state.membership, stage_atom::value, stage);
      if (stage >= 0)
        self->send(self->state.balancer, ready_atom::value);
    },
    [self](inspect_atom, const std::string& query) -> caf::result<std::string> {
      return inspect(self, query);
    },
    [self](deliver_atom, const std::string& from, wire_frame& frame) { on_inspect_frame(self, from, std::move(frame)); },
    [self](trace_atom, std::uint64_t serial) {
      auto& st = self->state;
      auto it = st.traces.find(serial);
      if (it == st.traces.end())
        return;
      auto run = std::move(it->second);
      st.traces.erase(it);
      std::uint64_t dropped = 0;
      auto handled = run.meter->handled() - run.handled_before;
      std::vector<traced_message> messages;
      for (auto& e : run.meter->stop_trace(dropped))
        messages.push_back({e.at_us, std::move(e.from), std::move(e.what)});
      run.promise.deliver(compose_trace(st.ctx->host.name, run.request, handled, messages, dropped));
    },
    [self](timeout_atom, std::uint64_t id) {
      auto& st = self->state;
      auto it = st.relays.find(id);
      if (it == st.relays.end())
        return;
      it->second.promise.deliver(make_error(
        ec::bad_query, it->second.host + " did not answer through the cluster in time (is it a live host? see: hosts)"));
      st.relays.erase(it);
    },
  };
}

} // namespace

caf::actor spawn_host(caf::actor_system& sys, std::shared_ptr<const cluster_spec> spec,
                      host_config host, caf::actor link_layer, caf::actor reporter, bool joining,
                      std::shared_ptr<freeze_watch> watch) {
  auto ctx = std::make_shared<host_context>();
  ctx->spec = std::move(spec);
  ctx->stage = host.role == host_role::data_holder ? 0 : host.stage;
  ctx->host = std::move(host);
  ctx->link = std::move(link_layer);
  ctx->reporter = std::move(reporter);
  ctx->joining = joining;
  ctx->incarnation = static_cast<std::uint64_t>(now_ms());
  ctx->watch = std::move(watch);
  std::map<std::uint64_t, std::string> others{{ctx->link.id(), "link"}};
  if (ctx->reporter)
    others[ctx->reporter.id()] = "reporter";
  ctx->meters = std::make_shared<host_meters>(std::move(others));
  return caf::actor_cast<caf::actor>(sys.spawn(supervisor, ctx));
}

} // namespace gwtf::actors
