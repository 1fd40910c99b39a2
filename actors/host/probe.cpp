// A host's link probe: small and bulk round trips to every peer (link_estimator decides).
#include <chrono>
#include <map>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/core/link_estimator.hpp"
#include "actors/host/host_internal.hpp"
#include "actors/host/host_actors.hpp"

namespace gwtf::actors {

namespace {

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
            self->send(self->state.compute, peer_speed_atom::value, from, e->bandwidth_bytes_s, p->compute_seconds);
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

} // namespace

probe_actor spawn_probe(caf::local_actor* parent, ctx_ptr ctx, balancer_actor balancer, compute_actor compute) {
  return parent->spawn<caf::linked>(probe, std::move(ctx), std::move(balancer), std::move(compute));
}

} // namespace gwtf::actors
