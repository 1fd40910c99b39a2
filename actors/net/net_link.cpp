// The link of one host in node mode: the same interface as the embedded link layer
// (register / send / slow), but frames go to the peer's process over the transport's TCP
// connections (actors/net/peer_transport.hpp). Discovery and authentication of peers live in
// peer_directory (pure); this actor dials, routes frames and keeps every remote input at
// arm's length: a frame is delivered only once its connection introduced itself as a peer of
// this cluster, and as that peer. Anything else is reported and dropped. With an emulated
// network the sender delays each frame like the embedded link.
#include <chrono>
#include <map>
#include <random>

#include <caf/all.hpp>

#include "actors/net/net_link.hpp"
#include "actors/interfaces.hpp"
#include "actors/net/link_emulator.hpp"
#include "actors/core/peer_directory.hpp"
#include "actors/net/wire_frame.hpp"
#include "common/wall_clock.hpp"

namespace gwtf::actors {

namespace {

using clock = std::chrono::steady_clock;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch()).count();
}

struct net_state {
  net_link_options opts;
  std::unique_ptr<peer_directory> dir;
  std::unique_ptr<link_emulator> emu;
  clock::time_point start = clock::now();
  std::map<std::int32_t, frame_sink_actor> endpoints; // local actors by service
  peer_finder_actor subscriber;                      // membership: told of new peer names
  // The host's transport: owns every connection (dials, TLS, framing). Null: not started.
  caf::actor transport;
  std::minstd_rand rng{42};
  std::uint64_t refused = 0;                         // frames dropped as hostile or unbound
};

using self_ptr = caf::stateful_actor<net_state>*;

void report(self_ptr self, const std::string& what) {
  auto& st = self->state;
  // Reporting is rate-limited per kind by the reporter; here, cap the flood of one peer.
  if (++st.refused <= 1000 || st.refused % 1000 == 0)
    self->send(st.opts.reporter, failure_atom::value, st.opts.self.name, what);
}

std::string describe(const caf::strong_actor_ptr& src) {
  return src ? "node " + caf::to_string(src->node()) : std::string{"an anonymous sender"};
}

wire_frame gossip_frame(const net_state& st) { return make_frame(st.dir->gossip()); }

void send_on(self_ptr self, std::uint64_t conn, std::int32_t svc, bool introduction, wire_frame frame) {
  self->send(self->state.transport, send_atom::value, conn, svc, introduction, std::move(frame));
}

void tell_subscriber(self_ptr self, const std::vector<std::string>& names) {
  auto& st = self->state;
  if (!st.subscriber)
    return;
  for (auto& n : names)
    self->send(st.subscriber, known_atom::value, n);
}

void dial_failed(self_ptr self, const std::string& address, const caf::error& err) {
  // Unreachable peers are normal under churn: retried with back-off.
  self->state.dir->dial_done(address, false, now_ms());
  caf::aout(self) << "[" << utc_stamp() << "] link: dial " << address << " failed: " << self->system().render(err) << std::endl;
}

void place(self_ptr self, const std::string& peer) {
  auto& st = self->state;
  if (!st.emu)
    return;
  if (auto* r = st.dir->record(peer); r && !r->region.empty())
    st.emu->place(peer, r->region);
}

void dial(self_ptr self, const std::string& address) {
  auto ep = parse_endpoint(address);
  if (!ep || ep->port == 0) {
    self->state.dir->dial_done(address, false, now_ms());
    return;
  }
  // The transport connects (TLS with node.tls) and answers once the peer said hello; this
  // host then introduces itself, and the peer binds it and answers with its own gossip.
  self->request(self->state.transport, std::chrono::milliseconds(self->state.opts.connect_timeout_ms * 2 + 2000),
                caf::connect_atom::value, ep->host, ep->port)
    .then(
      [self, address](std::uint64_t conn) {
        auto& st = self->state;
        st.dir->dial_done(address, true, now_ms());
        send_on(self, conn, static_cast<std::int32_t>(service::link), true, gossip_frame(st));
      },
      [self, address](caf::error& err) { dial_failed(self, address, err); });
}

// Who is behind a connection, for reports.
std::string describe(const net_state& st, std::uint64_t conn) {
  auto name = st.dir->bound_name(conn);
  return name ? "'" + *name + "' (connection " + std::to_string(conn) + ")"
              : "connection " + std::to_string(conn) + " (not introduced)";
}

// `introduction`: the first gossip of a peer that dialled this host.
void on_gossip(self_ptr self, std::uint64_t conn, wire_frame&& frame, bool introduction) {
  auto& st = self->state;
  wire::decode_limits limits;
  limits.max_bytes = static_cast<std::size_t>(st.opts.max_message_bytes);
  auto msg = open_frame(std::move(frame), limits);
  if (!msg) {
    report(self, "bad link frame from " + describe(st, conn) + ": " + self->system().render(msg.error()));
    return;
  }
  auto* g = std::get_if<wire::gossip>(&*msg);
  if (!g) {
    report(self, std::string{"link frame of kind "} + wire::kind_name(*msg) + " from " + describe(st, conn));
    return;
  }
  auto out = st.dir->on_gossip(conn, *g, now_ms());
  if (!out.error.empty()) {
    report(self, "refused " + describe(st, conn) + ": " + out.error);
    return;
  }
  place(self, out.peer);
  if (out.newly_bound)
    caf::aout(self) << "[" << utc_stamp() << "] link: connected to " << out.peer << " (" << g->peers.front().peer.address
                    << ", connection " << conn << ")" << std::endl;
  // Answer a new binding, so that both ends are bound, and every introduction: a peer dials
  // again when its end lost the binding (after a hang, a stale connection's teardown can
  // unbind a live peer at one end only) and binds again on this answer.
  if (out.newly_bound || introduction)
    send_on(self, conn, static_cast<std::int32_t>(service::link), false, gossip_frame(st));
  // Membership beats to every name it was told; a name learned by hearsay is told again
  // once connected, in case membership subscribed in between.
  auto tell = out.learned;
  if (out.newly_bound)
    tell.push_back(out.peer);
  tell_subscriber(self, tell);
  for (auto& a : st.dir->due(now_ms()))
    dial(self, a);
}

void forward(self_ptr self, const std::string& to, std::int32_t svc, wire_frame&& frame) {
  auto& st = self->state;
  auto conn = st.dir->connection(to);
  if (!conn)
    return; // not connected (down, or not yet found): lost, as on a real network
  auto& me = st.opts.self.name;
  auto lane = lane_of(svc, frame);
  bool behind_bulk = lane == peer_framing::bulk && peer_framing::lane_of(svc) == peer_framing::control; // a LEAVE, a RESTORE
  if (st.emu && st.opts.time_scale > 0) {
    double now = std::chrono::duration<double>(clock::now() - st.start).count() / st.opts.time_scale;
    if (auto at = st.emu->deliver_at(me, to, frame.bytes.size(), now, lane)) {
      auto delay = std::chrono::microseconds(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>((*at - now) * st.opts.time_scale)));
      if (behind_bulk)
        self->delayed_send(st.transport, delay, send_atom::value, *conn, svc, std::move(frame), bulk_atom::value);
      else
        self->delayed_send(st.transport, delay, send_atom::value, *conn, svc, false, std::move(frame));
      return;
    }
  }
  if (behind_bulk)
    self->send(st.transport, send_atom::value, *conn, svc, std::move(frame), bulk_atom::value);
  else
    send_on(self, *conn, svc, false, std::move(frame));
}

void start(self_ptr self) {
  auto& st = self->state;
  st.rng.seed(static_cast<unsigned>(std::hash<std::string>{}(st.opts.self.name)));
  wire::hello me;
  me.peer_id = st.opts.self.name;
  me.address = st.opts.advertise;
  me.role = st.opts.self.role == host_role::data_holder ? wire::peer_role::data_holder : wire::peer_role::relay;
  me.stage = st.opts.self.role == host_role::data_holder ? 0 : st.opts.self.stage;
  me.capacity = static_cast<std::uint32_t>(st.opts.self.capacity);
  me.incarnation = st.opts.incarnation;
  me.region = st.opts.self.region;
  me.cluster = st.opts.cluster;
  st.dir = std::make_unique<peer_directory>(me, st.opts.bootstrap, st.opts.gossip_interval_ms,
                                            std::max(st.opts.gossip_interval_ms * 8, 5000));
  if (st.opts.certified)
    st.dir->require_certificates();
  if (st.opts.network) {
    st.emu = std::make_unique<link_emulator>(*st.opts.network);
    st.emu->place(me.peer_id, me.region);
    // Its sends go through its uplink (forward); what it receives through its downlink.
    st.emu->limit(me.peer_id, st.opts.self.uplink_mbit, st.opts.self.downlink_mbit);
  }
  // A peer's process may send anything CAF can decode: never let it reach a handler.
  self->set_default_handler([self](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
    auto what = caf::to_string(x.content());
    if (what.size() > 200) // a peer chooses its size: log a prefix
      what = what.substr(0, 200) + "...";
    report(self, "unexpected message " + what + " from " + describe(self->current_sender()));
    return caf::drop(s, x);
  });
  self->set_down_handler([self](caf::down_msg& m) {
    auto& st = self->state;
    if (auto ep = std::find_if(st.endpoints.begin(), st.endpoints.end(),
                               [&](auto& kv) { return kv.second.address() == m.source; });
        ep != st.endpoints.end())
      st.endpoints.erase(ep);
  });
}

// Started: dials the bootstrap peers, gossips, carries frames. The handlers are checked against
// net_link_actor (actors/protocols.hpp) at compile time; the actor itself is dynamically
// typed for its start phase, which keeps (skips) what arrives before it knows its address.
net_link_actor::behavior_type running(self_ptr self) {
  self->send(self, tick_atom::value);
  return {
    [self](start_atom, const std::string&, const caf::actor&) {
      report(self, "start from " + describe(self->current_sender()) + " ignored: the link is running");
    },
    [self](register_atom, const std::string& host, std::int32_t svc, frame_sink_actor a) {
      if (host != self->state.opts.self.name)
        return;
      self->monitor(a);
      self->state.endpoints[svc] = std::move(a);
    },
    [self](subscribe_atom, peer_finder_actor a) {
      self->state.subscriber = std::move(a);
      tell_subscriber(self, self->state.dir->known());
    },
    [self](send_atom, const std::string& from, const std::string& to, std::int32_t svc, wire_frame& frame) {
      if (from == self->state.opts.self.name)
        forward(self, to, svc, std::move(frame));
    },
    [self](net_atom, std::uint64_t conn, std::int32_t svc, bool introduction, wire_frame& frame) {
      auto& st = self->state;
      if (caf::actor_cast<caf::actor_addr>(self->current_sender()) != st.transport.address())
        return report(self, "a peer frame not from this host's transport, from "
                              + describe(self->current_sender()) + ": dropped");
      if (svc == static_cast<std::int32_t>(service::link)) {
        on_gossip(self, conn, std::move(frame), introduction);
        return;
      }
      auto name = st.dir->bound_name(conn);
      if (!name) {
        report(self, "a frame on " + describe(st, conn) + ": dropped");
        return;
      }
      auto ep = st.endpoints.find(svc);
      if (ep == st.endpoints.end())
        return; // that service is restarting: lost, and recovered like any lost frame
      if (st.emu && st.opts.time_scale > 0) { // this host's emulated downlink (hosts[0].downlink_mbit)
        double now = std::chrono::duration<double>(clock::now() - st.start).count() / st.opts.time_scale;
        auto lane = lane_of(svc, frame);
        double at = st.emu->receive_at(st.opts.self.name, frame.bytes.size(), now, lane);
        if (at > now) {
          auto delay = std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::duration<double>((at - now) * st.opts.time_scale));
          self->delayed_send(ep->second, delay, deliver_atom::value, *name, std::move(frame));
          return;
        }
      }
      self->send(ep->second, deliver_atom::value, *name, std::move(frame));
    },
    [self](closed_atom, std::uint64_t conn, const std::string& why) {
      auto& st = self->state;
      if (caf::actor_cast<caf::actor_addr>(self->current_sender()) != st.transport.address())
        return;
      if (auto name = st.dir->connection_lost(conn, now_ms()))
        caf::aout(self) << "[" << utc_stamp() << "] link: lost the connection to " << *name << " (" << why << ")" << std::endl;
    },
    [self](certified_atom, std::uint64_t conn, std::vector<std::string>& names) {
      auto& st = self->state;
      if (caf::actor_cast<caf::actor_addr>(self->current_sender()) == st.transport.address())
        st.dir->certified(conn, std::move(names));
    },
    [self](slow_atom, const std::string& a, const std::string& b, double factor) {
      if (self->state.emu)
        self->state.emu->slow_down(a, b, factor);
    },
    // The shell's lab control (slow-link PEER FACTOR): empty when done, else why not.
    [self](slow_atom, caf::get_atom, const std::string& peer, double factor) -> std::string {
      auto& st = self->state;
      if (!st.emu)
        return "this host emulates no network (emulation.network is not set): there is no link delay to change";
      auto known = st.dir->known();
      if (std::find(known.begin(), known.end(), peer) == known.end())
        return "no peer named '" + peer + "' is known to this host (see: hosts)";
      st.emu->slow_down(st.opts.self.name, peer, factor);
      return {};
    },
    [self](restart_atom, std::uint64_t) {
      // The host restarted as a new incarnation (e.g. after a hang): introduce it again to
      // every peer, so that one holding a stale connection of ours takes the new one.
      auto& st = self->state;
      st.dir->set_incarnation(st.dir->self().incarnation + 1);
      auto frame = gossip_frame(st);
      for (auto& p : st.dir->bound())
        send_on(self, *st.dir->connection(p), static_cast<std::int32_t>(service::link), false, frame);
    },
    [self](tick_atom) {
      auto& st = self->state;
      for (auto& a : st.dir->due(now_ms()))
        dial(self, a);
      // Gossip to a few bound peers: what one host learns spreads in O(log n) rounds.
      auto peers = st.dir->bound();
      std::shuffle(peers.begin(), peers.end(), st.rng);
      if (peers.size() > 3)
        peers.resize(3);
      auto frame = gossip_frame(st);
      for (auto& p : peers)
        send_on(self, *st.dir->connection(p), static_cast<std::int32_t>(service::link), false, frame);
      self->delayed_send(self, std::chrono::milliseconds(st.opts.gossip_interval_ms), tick_atom::value);
    },
  };
}

// The link is spawned before peers can be told where it listens: it waits for
// (start_atom, advertised address, transport) and keeps what arrives meanwhile.
caf::behavior net_link(self_ptr self, net_link_options opts) {
  self->state.opts = std::move(opts);
  self->set_default_handler(caf::skip);
  return {
    [self](start_atom, const std::string& advertise, caf::actor transport) {
      self->state.opts.advertise = advertise;
      self->state.transport = std::move(transport);
      start(self);
      self->become(running(self).unbox());
    },
  };
}

} // namespace

net_link_actor spawn_net_link(caf::actor_system& sys, net_link_options opts) {
  // Its own thread: every frame of the host passes here, heartbeats included.
  return caf::actor_cast<net_link_actor>(sys.spawn<caf::detached>(net_link, std::move(opts)));
}

} // namespace gwtf::actors
