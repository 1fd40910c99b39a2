// A host's supervisor: starts its actors, places a relay without a declared stage, restarts
// them as a new incarnation after a crash, drains on SIGTERM and answers the shell
// (host_inspect.cpp).
#include <chrono>
#include <csignal>
#include <map>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/inspect/inspect_view.hpp"
#include "actors/host/host_internal.hpp"
#include "routing/placement.hpp"
#include "actors/host/supervisor_state.hpp"

namespace gwtf::actors {

namespace {

// The host's actors, as untyped handles (for links and exits).
std::vector<caf::actor> children(const supervisor_state& st) {
  return {caf::actor_cast<caf::actor>(st.membership), caf::actor_cast<caf::actor>(st.probe),
          caf::actor_cast<caf::actor>(st.balancer), caf::actor_cast<caf::actor>(st.compute)};
}

void register_service(supervisor_ptr self, service s, const frame_sink_actor& a) {
  auto& ctx = self->state.ctx;
  tell(self, ctx->link, register_atom::value, ctx->host.name, static_cast<std::int32_t>(s), a);
}

// The actors that need the host's stage: balancer, link probe and the stage itself.
void start_stage_children(supervisor_ptr self) {
  auto& st = self->state;
  auto& ctx = st.ctx;
  st.compute = spawn_compute(self, supervisor_actor{self}, ctx);
  st.balancer = spawn_balancer(self, ctx, st.compute);
  st.probe = spawn_probe(self, ctx, st.balancer, st.compute);
  self->send(st.compute, probe_atom::value, st.probe);
  self->send(st.compute, balancer_handle_atom::value, st.balancer);
  register_service(self, service::probe, st.probe);
  register_service(self, service::balancer, st.balancer);
  register_service(self, service::stage, st.compute);
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
  st.membership = spawn_membership(self, ctx, supervisor_actor{self});
  register_service(self, service::membership, st.membership);
  tell(self, ctx->link, subscribe_atom::value, peer_finder_actor{st.membership}); // peers found (node mode)
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
  auto stages = routing::dtfm_founding_stages(*ctx.spec->dtfm_network, std::move(req), relays);
  return stages.empty() ? -1 : stages.front(); // relays.front() is this host
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
// incarnation at the stage st.ctx names: it downloads that stage's weights like a joiner.
void respawn_children(supervisor_ptr self, const caf::actor_addr& failed) {
  auto& st = self->state;
  ++st.generation;
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

// A restart after a failure: the stage lost its weights.
void restart_children(supervisor_ptr self, const std::string& why, const caf::actor_addr& failed) {
  tell(self, self->state.ctx->reporter, restart_atom::value, self->state.ctx->host.name, why);
  respawn_children(self, failed);
}

// SWARM's rebalancing, once the stage drained (or the drain timed out): LEAVE (a drained
// leave: what it shared stays counted; else its part of the iteration is redone), then the
// host's actors start again as a new incarnation at the new stage and download its state.
void finish_move(supervisor_ptr self, bool drained) {
  auto& st = self->state;
  if (!st.moving_to || st.leaving)
    return;
  auto to = *st.moving_to;
  st.moving_to.reset();
  self->send(st.membership, stop_atom::value, drained);
  auto from = st.ctx->stage;
  auto ctx = std::make_shared<host_context>(*st.ctx);
  ctx->stage = to;
  ctx->host.stage = to;
  st.ctx = ctx;
  tell(self, ctx->reporter, placed_atom::value, ctx->host.name, to,
       "moved from stage " + std::to_string(from) + " by SWARM's rebalancing: " + st.move_why
         + (drained ? "" : "; its drain took a hop timeout: its part of the iteration is redone")
         + "; downloading the stage state");
  respawn_children(self, caf::actor_addr{});
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
  register_service(self, service::inspect, frame_sink_actor{supervisor_actor{self}});
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
      if (st.moving_to && !st.leaving) {
        finish_move(self, drained);
        return;
      }
      if (st.left || !st.leaving) // (a late word of a compute that drained for a move)
        return;
      st.left = true;
      self->send(st.membership, stop_atom::value, drained);
      tell(self, st.ctx->reporter, left_atom::value, st.ctx->host.name, std::string{"asked to leave"});
      self->delayed_send(self, std::chrono::milliseconds(1), done_atom::value);
    },
    [self](done_atom) { self->quit(caf::exit_reason::user_shutdown); },
    [self](move_atom, std::int32_t stage, const std::string& why) {
      auto& st = self->state;
      if (st.leaving || st.moving_to || st.ctx->stage < 1 || stage < 1 || stage == st.ctx->stage
          || stage >= st.ctx->spec->model.stages || !st.compute)
        return;
      st.moving_to = stage;
      st.move_why = why;
      ++st.moves;
      self->send(st.compute, stop_atom::value);
      self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.hop_timeout_ms), move_atom::value,
                         st.moves);
    },
    [self](move_atom, std::uint64_t move) {
      if (move == self->state.moves)
        finish_move(self, false);
    },
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
      // Node mode: the whole process starts again (app/run/node.cpp re-executes it as a
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

supervisor_actor spawn_host(caf::actor_system& sys, std::shared_ptr<const cluster_spec> spec,
                      host_config host, link_actor link_layer, reporter_actor reporter, bool joining,
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
  return sys.spawn(supervisor, ctx);
}

} // namespace gwtf::actors
