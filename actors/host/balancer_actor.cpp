// A host's flow balancer: routing::flow_balancer wrapped unchanged, ticked and wired to the link.
#include <chrono>
#include <map>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/host/host_internal.hpp"
#include "actors/core/stage_restore.hpp"
#include "routing/balancer.hpp"
#include "routing/cost_model.hpp"
#include "actors/host/host_actors.hpp"

namespace gwtf::actors {

namespace {

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
      // SWARM routes per call at the data holders (compute_swarm.cpp): no flows to build.
      if (st.ready && ctx->spec->routing.router == routing::router_kind::gwtf)
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

} // namespace

balancer_actor spawn_balancer(caf::local_actor* parent, ctx_ptr ctx, compute_actor compute) {
  return parent->spawn<caf::linked>(balancer, std::move(ctx), std::move(compute));
}

} // namespace gwtf::actors
