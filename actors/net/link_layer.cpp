// The emulated network of the embedded cluster: every inter-host frame waits for its link
// (actors/net/link_emulator.hpp) in its lane (peer_framing::lane_of: the stages' frames bulk,
// heartbeats, probes and flows control, as node mode's connections carry them), scaled by
// emulation.time_scale, then reaches the registered actor of its destination. Frames to hosts that are gone are dropped, as TCP would.
#include <chrono>
#include <map>

#include <caf/all.hpp>

#include "actors/net/link_layer.hpp"
#include "actors/interfaces.hpp"
#include "actors/net/link_emulator.hpp"
#include "actors/net/wire_frame.hpp"

namespace gwtf::actors {

namespace {

struct link_state {
  std::unique_ptr<link_emulator> emu;
  double time_scale = 1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::map<std::pair<std::string, std::int32_t>, frame_sink_actor> endpoints;
  std::map<caf::actor_addr, std::pair<std::string, std::int32_t>> by_addr;
};

link_actor::behavior_type link_layer(link_actor::stateful_pointer<link_state> self, routing::network_matrix net,
                         std::vector<host_config> hosts, double time_scale) {
  auto& st = self->state;
  st.emu = std::make_unique<link_emulator>(std::move(net));
  st.time_scale = time_scale;
  for (auto& h : hosts) {
    st.emu->place(h.name, h.region);
    st.emu->limit(h.name, h.uplink_mbit, h.downlink_mbit);
  }
  self->set_down_handler([self](caf::down_msg& m) {
    auto it = self->state.by_addr.find(m.source);
    if (it == self->state.by_addr.end())
      return;
    auto ep = self->state.endpoints.find(it->second);
    if (ep != self->state.endpoints.end() && ep->second.address() == m.source)
      self->state.endpoints.erase(ep);
    self->state.by_addr.erase(it);
  });
  return {
    [self](register_atom, const std::string& host, std::int32_t svc, frame_sink_actor a) {
      self->monitor(a);
      self->state.by_addr[a.address()] = {host, svc};
      self->state.endpoints[{host, svc}] = std::move(a);
    },
    [self](send_atom, const std::string& from, const std::string& to, std::int32_t svc,
           wire_frame& frame) {
      auto& st = self->state;
      auto it = st.endpoints.find({to, svc});
      if (it == st.endpoints.end())
        return; // host down or not yet up: the frame is lost, as on a real network
      if (st.time_scale <= 0) {
        self->send(it->second, deliver_atom::value, from, std::move(frame));
        return;
      }
      double now_emu = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.start).count()
                       / st.time_scale;
      auto lane = lane_of(svc, frame);
      auto at = st.emu->deliver_at(from, to, frame.bytes.size(), now_emu, lane);
      if (!at) {
        self->send(it->second, deliver_atom::value, from, std::move(frame));
        return;
      }
      auto delay = std::chrono::duration<double>((*at - now_emu) * st.time_scale);
      self->delayed_send(it->second, std::chrono::duration_cast<std::chrono::microseconds>(delay),
                         deliver_atom::value, from, std::move(frame));
    },
    [self](slow_atom, const std::string& a, const std::string& b, double factor) {
      self->state.emu->slow_down(a, b, factor);
    },
    [](restart_atom, std::uint64_t) {
      // Embedded hosts share one link that knows them by name only: nothing to re-introduce.
    },
    [](subscribe_atom, const peer_finder_actor&) {
      // Every host of an embedded cluster is declared in the config: nothing to discover.
    },
    [](slow_atom, caf::get_atom, const std::string&, double) -> std::string {
      // Hosts share this link; the embedded shell's front slows a link between two of them.
      return "the embedded cluster's links are slowed by its shell's front (slow-link PEER FACTOR there)";
    },
  };
}

} // namespace

link_actor spawn_link_layer(caf::actor_system& sys, routing::network_matrix net,
                            std::vector<host_config> hosts, double time_scale) {
  // On a thread of its own: the hosts' computes share the scheduler's threads, and frames
  // (heartbeats first of all) must not wait for a pass of seconds to end.
  return sys.spawn<caf::detached>(link_layer, std::move(net), std::move(hosts), time_scale);
}

} // namespace gwtf::actors
