// The GWTF flow balancer of one node (docs/design.md, docs/routing.md) as a pure
// state machine: a message or a tick goes in, messages to send come out. No clock, no
// threads, no CAF; the actor and the simulator wrap it unchanged.
//
// Implemented: introductions and cost adverts (distance-vector costs to each data holder,
// spare capacity as demand), flow building by request/accept with capacity reservation hop
// by hop, the ring closed at the originating data holder, stale-cost / over-capacity /
// no-path rejections that refresh the requester's view, time-to-live on half-built flows,
// disconnects (flows through a lost peer are released and rebuilt), and anti-entropy: every
// few ticks each hop CHECKs its upstream, which cancels flows it no longer feeds, so lost
// messages cannot leave orphan reservations; a data holder rebuilds a ring whose closing hop
// stays missing. Ring costs travel with the protocol (accepts and CHECKs carry the cost back
// to the data holder, CONFIRMs the cost from it), so every relay knows each flow's ring cost
// split around itself, and lists its flows to same-stage peers. Simulated annealing then
// moves flows between same-stage peers: REDIRECT (a peer hands me one of its flows) and SWAP
// (we exchange one flow each), judged on the holders' iteration time (or the min-max ring
// cost: `move_objective`), one outstanding proposal per node
// and the handover executed by the flow's upstream hop (docs/routing.md). Costs count the
// load of a host's own links (`link_load`), and a built flow moves to a clearly cheaper next
// hop (`reroute_gain`), so that rings rebuilt piecemeal after churn do not stay poor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "messages/types.hpp"
#include "routing/name_table.hpp"
#include "routing/routing_config.hpp"
#include "routing/view_graph.hpp"

namespace gwtf::routing {

/// A message the balancer wants sent to `to`.
struct outgoing {
  std::string to;
  wire::message msg;
};

/// One unit flow as a node holds it.
struct held_flow {
  std::uint64_t id = 0;
  std::string target;          ///< data holder the flow starts from and returns to
  std::string prev;            ///< upstream node (at a data holder: the last relay)
  std::string next;            ///< downstream node (at a data holder: the first relay)
  bool built = false;          ///< the whole ring is confirmed
  std::int64_t since_tick = 0; ///< when it was reserved (TTL of half-built flows)
  std::set<std::string> tried; ///< next hops that rejected it
  std::int64_t unclosed_since = -1; ///< data holder: when the ring lost its closing hop
  double head = 0;             ///< relay: cost data holder -> ... -> prev (from prev's CONFIRM)
  bool head_known = false;
  double tail = 0;             ///< cost next -> ... -> data holder (from next's accept / CHECK)
  bool tail_known = false;
  std::uint32_t holder_flows = 0; ///< relay: its data holder's built flows (CONFIRM; 0: unknown)
  double others = 0;              ///< relay: the holder's slowest other ring (CONFIRM; 0: none or unknown)
};

/// Counters of the annealing moves of one balancer.
struct move_stats {
  int proposed = 0;         ///< proposals sent
  int accepted = 0;         ///< proposals this node accepted as responder
  int redirects = 0;        ///< executed REDIRECTs (either side)
  int swaps = 0;            ///< executed SWAPs (either side)
  int worsening = 0;        ///< executed moves that the annealing let through
  int reroutes = 0;         ///< built flows this node moved to a cheaper next hop
  /// Moves left out because the flow's data holder had a microbatch in flight here (a
  /// re-route, a handover this node would give, a fair-share hand-over); tried again later.
  int deferred = 0;
};

/// The balancer of one node.
class flow_balancer {
public:
  /// `stage` 0 = data holder, 1..stages-1 = relay; `capacity` = flows it may hold (a data
  /// holder: flows it originates).
  /// `seed` drives the annealing draws (mixed with `self`, so every node draws differently).
  flow_balancer(std::string self, int stage, int stages, int capacity, const gwtf_config& cfg,
                std::uint64_t seed = 0);

  /// Declares a neighbour: a node of the previous, same or next stage. `edge_cost` is d(self,
  /// peer) for previous- and next-stage peers (for the last relay stage the next stage is the
  /// data holders, for the first the previous one), else ignored.
  /// `link_s`: how long one microbatch occupies the link to a next-stage peer (its transfer,
  /// forward and backward averaged; routing/cost_model.hpp). With `gwtf.link_load`, every
  /// flow this node already sends over that link adds `link_s` to the cost of the next one,
  /// so flows spread over parallel links instead of queueing on the cheapest.
  void add_peer(const std::string& id, int stage, double edge_cost, double link_s = 0);

  /// The peer is gone (crash, leave): flows through it are released and rebuilt.
  std::vector<outgoing> remove_peer(const std::string& id, std::int64_t now);

  /// Periodic work: introductions, cost adverts, new flows at data holders, TTLs.
  std::vector<outgoing> tick(std::int64_t now);

  /// One message from `from`.
  std::vector<outgoing> handle(const std::string& from, const wire::message& msg, std::int64_t now);

  /// Flows held, by id.
  const std::map<std::uint64_t, held_flow>& flows() const { return flows_; }

  /// Best known cost from here to data holder `target` over nodes with spare capacity.
  std::optional<double> cost_to(const std::string& target) const;

  /// Flows this node can still take (slots promised to agreed SWAPs count as taken).
  int spare() const;

  /// The cost of flow `f`'s whole ring as this node knows it (relays: head + in + out + tail;
  /// data holders: out + tail), once the protocol has delivered both halves.
  std::optional<double> ring_cost(const held_flow& f) const;

  /// Stops (false) or resumes proposing and accepting annealing moves, re-routes and
  /// fair-share handovers between data holders; handovers already agreed still complete. Lets a test take
  /// a quiescent snapshot.
  void set_moves(bool enabled) { moves_enabled_ = enabled; }

  /// Whether a microbatch of data holder `target` that this node sent to `next` has not had
  /// its backward here yet (at a data holder: one of its own, unfinished). With
  /// `gwtf.idle_moves`, moves leave such a flow alone until it has none: re-routes, the flows
  /// this node hands over in REDIRECTs and SWAPs, fair-share hand-overs (docs/routing.md,
  /// "Moves and microbatches in flight"). Crash repairs do not wait. Without it set, no
  /// microbatch is ever in flight.
  using in_flight_fn = std::function<bool(const std::string& target, const std::string& next)>;
  void set_in_flight(in_flight_fn in_flight) { in_flight_ = std::move(in_flight); }
  /// A microbatch is in flight on f from here (idle_moves): moves leave f alone.
  bool busy(const held_flow& f) const { return cfg_.idle_moves && in_flight_ && in_flight_(f.target, f.next); }

  /// Microbatches each data holder sends per iteration (`gwtf.move_objective: completion`
  /// counts a holder's rounds as ceil(microbatches / its flows)); 0: unknown, one round.
  void set_microbatches(std::uint32_t per_holder) { microbatches_ = per_holder; }

  /// The current annealing temperature (percent of the affected flows' max cost).
  double temperature() const { return temperature_; }
  const move_stats& moves() const { return stats_; }

  const std::string& id() const { return self_; }
  int stage() const { return stage_; }

private:
  /// What went to a peer last, and when: an unchanged advert or listing is not sent again
  /// before `refresh_ticks` have passed.
  /// The content is shared between the peers it went to (one copy per change, not per peer);
  /// the same pointer means the same content, so most checks compare no content at all.
  template <class T>
  struct sent {
    std::shared_ptr<const T> what; ///< null: nothing yet
    std::int64_t at = 0;
  };
  struct peer {
    int stage = 0;
    double edge = 0;                     ///< d(self, peer) when it is a next hop
    double link_s = 0;                   ///< one microbatch's occupancy of the link to it
    std::map<std::string, double> costs; ///< its advertised cost per data holder
    int demand = 0;                      ///< < 0: it can take -demand more flows
    bool heard = false;                  ///< an advert or introduction arrived
    sent<std::vector<wire::target_cost>> advert_sent;  ///< our last advert to it
    sent<std::vector<wire::flow_entry>> listing_sent;  ///< our last listing to it
    /// Annealing: its flows as it last listed them (a same-stage peer), if it did.
    std::optional<std::vector<wire::flow_entry>> listing;
    /// Per flow of `listing`, its in and out cost were it here (d(prev, me), d(me, next));
    /// none when its prev or next is not a peer of mine at the right stage, or it cannot move
    /// here. Worked out again when the listing or the roster changed (`ends_roster`).
    mutable std::vector<std::optional<std::pair<double, double>>> ends;
    mutable std::uint64_t ends_roster = 0;
    std::size_t view_slot = 0;           ///< its index in view().next, while it is there
  };

  /// A move this node proposed and awaits an answer to (at most one: the concurrency control).
  struct proposal {
    std::uint64_t id = 0;
    std::string peer;
    wire::move_kind kind = wire::move_kind::redirect;
    std::uint64_t gives = 0;                ///< swap: the flow this node hands over
    std::vector<std::uint64_t> candidates;  ///< the peer's flows it may hand to this node
    std::int64_t since = 0;
    bool worsening = false;                 ///< let through by the annealing
  };
  /// A flow a same-stage peer is handing over: its upstream hop will send it here.
  struct expectation {
    std::string target, prev, next;
    std::int64_t since = 0;
    bool agreed = false; ///< the move was accepted
    bool swap = false;   ///< part of a SWAP: once agreed it holds a slot of capacity
  };
  /// A move candidate as the proposer evaluates it (pointing into listings_: valid until
  /// a listing changes).
  struct candidate {
    const std::string* peer = nullptr;
    const wire::flow_entry* listed = nullptr; ///< the peer's flow as it listed it
    double in = 0, out = 0; ///< d(prev, me) and d(me, next): its in/out as they would be here
    double before = 0;      ///< max cost of the affected flows now
    double after = 0;       ///< and after the move (a swap: the part known here)
    /// The flow with in/out as they would be here.
    wire::flow_entry flow() const {
      auto f = *listed;
      f.in_cost = in;
      f.out_cost = out;
      return f;
    }
  };

  bool holder() const { return stage_ == 0; }
  double edge(const std::string& peer) const;
  bool is_peer(const std::string& id, int stage) const;
  std::optional<wire::flow_entry> entry(const held_flow& f) const;
  double down_cost(const held_flow& f) const;
  void send_down_cost(const held_flow& f, std::vector<outgoing>& out) const;
  void send_up_cost(const held_flow& f, std::vector<outgoing>& out) const;
  std::optional<double> up_cost(const held_flow& f) const;
  void confirm_to(const held_flow& f, const std::string& to, std::vector<outgoing>& out) const;
  void request_to(held_flow& f, const std::string& next, std::vector<outgoing>& out, std::uint64_t replaces = 0);
  void start_flow(std::int64_t now, const std::string& first, std::vector<outgoing>& out);
  std::uint32_t built_flows() const;
  held_flow& hold(const std::string& from, const wire::flow_request& r, std::int64_t now);
  bool preempt_for(const std::string& from, const wire::flow_request& r, std::int64_t now,
                   std::vector<outgoing>& out);
  bool take_freed_path(const std::string& from, const wire::flow_request& r, std::int64_t now,
                       std::vector<outgoing>& out);
  void hand_over(std::uint64_t id, const std::string& to, std::int64_t now, std::vector<outgoing>& out);
  bool anneal_accepts(double before, double after);
  /// The data holder's time for its microbatches if flow `f` had ring cost `ring` (the move
  /// objective): its rounds times its slowest ring; `alone`: leave its other rings out (they
  /// are the other flow of a SWAP within one holder).
  double completion(const wire::flow_entry& f, double ring, bool alone) const;
  /// A data holder's flow count and slowest ring other than flow `id`, as this node knows
  /// them: exact for its own flow (its CONFIRMs), else from its own flows of that holder.
  struct holder_figures {
    std::uint32_t flows = 0; ///< 0: unknown
    double others = 0;
  };
  holder_figures figures(const std::string& target, std::uint64_t id) const;
  /// What a move is judged on, from the affected flows' max ring cost before and after and
  /// (objective completion) their holders' completion time before and after: the completion
  /// time when it changes, else the ring cost (a move that no holder's time notices can still
  /// shorten a ring).
  std::pair<double, double> judged(double ring_before, double ring_after, double time_before,
                                   double time_after) const;
  /// The slowest ring among this data holder's built flows other than `id` (0: none known).
  double others_than(std::uint64_t id) const;
  void executed(wire::move_kind kind, bool worsening, std::int64_t now);
  void anneal_tick(std::int64_t now, std::vector<outgoing>& out);
  void reroute_tick(std::int64_t now, std::vector<outgoing>& out);
  std::vector<candidate> candidates(wire::move_kind kind, std::optional<wire::flow_entry>& gives) const;
  std::vector<outgoing> on_proposal(const std::string& from, const wire::move_proposal& p, std::int64_t now);
  std::vector<outgoing> on_move_response(const std::string& from, const wire::move_response& r, std::int64_t now);
  void conclude(bool accepted, std::uint64_t flow_id, std::int64_t now, std::vector<outgoing>& out);
  std::vector<outgoing> on_sync(const std::string& from, const wire::flow_sync& s, std::int64_t now);
  int next_stage() const { return (stage_ + 1) % stages_; }
  int prev_stage() const { return (stage_ + stages_ - 1) % stages_; }
  /// The cheapest next hop towards `target`; `loaded`: with the load of this node's own
  /// flows on each link (the cost of one more flow), else the bare path cost.
  std::optional<std::pair<std::string, double>> best_next(const std::string& target,
                                                         const std::set<std::string>& exclude,
                                                         bool loaded = true) const;
  /// Per target index of the view, the cheapest next hop (its index in view().next) and ring
  /// cost (one Dijkstra), with `load` per next hop (load_now(); empty: the bare path cost).
  std::vector<std::optional<view_graph::choice>> cheapest(const std::set<std::string>& exclude,
                                                          const std::vector<double>& load) const;
  /// With `gwtf.link_load`, the load of this node's flows on the link to each next hop of
  /// the view (its order): flows x link_s; empty without link load or when no flow has a next hop.
  std::vector<double> load_now() const;
  /// best_next with the load per next hop given (empty: the bare path cost).
  std::optional<std::pair<std::string, double>> pick_next(const std::string& target,
                                                         const std::set<std::string>& exclude,
                                                         const std::vector<double>& load) const;
  std::map<std::string, int> flows_by_next() const;
  /// The cost advert with `load` on the links (load_now()).
  std::vector<wire::target_cost> advert(const std::vector<double>& load) const;
  /// advert(load_now()) as last_advert_, computed again only when what it depends on changed.
  const std::shared_ptr<const std::vector<wire::target_cost>>& current_advert();
  void forward_request(held_flow& f, std::vector<outgoing>& out);
  void release(std::uint64_t id, std::vector<outgoing>& out, wire::reject_reason why);
  wire::flow_response response(std::uint64_t id, bool accepted, wire::reject_reason why,
                               const std::string& target) const;
  std::vector<outgoing> on_request(const std::string& from, const wire::flow_request& r, std::int64_t now);
  std::vector<outgoing> on_response(const std::string& from, const wire::flow_response& r, std::int64_t now);

  /// peers_[id], noting a new entry (the view must be rebuilt).
  peer& peer_at(const std::string& id);
  /// The local view as a graph: built again after peers_ or a peer's costs changed.
  struct view_cache;
  const view_cache& view() const;
  void view_changed() { view_.stale = true; }
  /// Peer `p`'s advertised costs changed, its targets and room not: update the view's
  /// paths in place; false if the view must be built again instead.
  bool view_costs_changed(const peer& p);

  std::string self_;
  int stage_;
  int stages_;
  int capacity_;
  gwtf_config cfg_;
  /// The peers, by name (hashed: looked up for every message and flow), and the same in
  /// name order for everything that walks them (the order of the messages sent).
  name_table<peer> peers_;
  /// Whether a periodic send (adverts, listings) can be skipped without looking at each
  /// receiver: every one of them got `sent` (this very content), none is due before `next`.
  struct broadcast {
    const void* sent = nullptr;
    std::int64_t next = 0;
  };
  struct roster_cache {
    std::vector<std::pair<const std::string*, peer*>> peers; ///< pointers into peers_
    std::vector<std::pair<const std::string*, peer*>> prev;  ///< the previous stage's
    std::vector<std::pair<const std::string*, peer*>> same;  ///< this stage's
    std::vector<std::pair<const std::string*, peer*>> listed; ///< those with a listing
    broadcast adverts, listings;  ///< reset whenever a peer is added, re-added or removed
    bool stale = true;            ///< peers to be rebuilt (and sorted)
    bool lists_stale = true;      ///< prev, same and listed to be taken from peers again
  };
  /// A cache of pointers into its own balancer: a copy, or an assignment, starts empty.
  template <class T>
  struct fresh_on_copy : T {
    fresh_on_copy() = default;
    fresh_on_copy(const fresh_on_copy&) : T() {}
    fresh_on_copy& operator=(const fresh_on_copy&) {
      static_cast<T&>(*this) = T();
      return *this;
    }
  };
  mutable fresh_on_copy<roster_cache> roster_;
  std::size_t listed_flows_ = 0; ///< flows in the peers' listings, all together
  std::uint64_t roster_gen_ = 1; ///< counts roster_changed(): peers added, removed, re-added
  /// The peers in name order (rebuilt after one was added or removed).
  const roster_cache& roster() const;
  /// A peer was added, removed, or added again (what went to it forgotten).
  void roster_changed() {
    ++roster_gen_;
    roster_.lists_stale = true;
    roster_.adverts = {};
    roster_.listings = {};
  }
  /// Sends `what` to each of `to` that is due (due()), as make(content); skipped at once
  /// when `b` says none is.
  template <class T, class Make>
  void send_due(const std::vector<std::pair<const std::string*, peer*>>& to, sent<T> peer::*log,
                const std::shared_ptr<const T>& what, broadcast& b, std::int64_t now, std::vector<outgoing>& out,
                Make make);
  /// This node's view for choosing next hops (docs/routing.md, "The local view"): the
  /// next-stage peers in name order with the data holders they reach, as a view_graph.
  /// Pointers into peers_: a copied balancer starts with a stale view.
  struct view_cache {
    view_graph graph;
    std::vector<const std::string*> next;    ///< next hop n's name
    std::vector<const peer*> next_peer;      ///< and its entry
    std::vector<double> link_s;              ///< next hop n's link occupancy per microbatch
    std::map<std::string, std::size_t> target; ///< a data holder's target index
    std::vector<std::vector<std::size_t>> paths; ///< next hop n's paths, in its costs' order
    bool stale = true;
  };
  mutable fresh_on_copy<view_cache> view_;
  /// What the last advert was computed from (a copy starts afresh, as its view does).
  struct advert_key {
    std::uint64_t version = 0; ///< the view graph's
    int spare = 0;
    std::vector<double> load;  ///< load_now()
  };
  fresh_on_copy<advert_key> advert_key_;
  std::map<std::uint64_t, held_flow> flows_;
  std::uint64_t next_flow_ = 0;
  bool introduced_ = false;

  // Fair shares between data holders (docs/routing.md, "Fair shares").
  std::map<std::string, std::uint32_t> holder_flows_; ///< first-stage relay: each holder's flows, as it last said
  std::map<std::uint64_t, std::uint32_t> reported_;   ///< first-stage relay: a request's count, until built
  struct freed {
    std::string next;          ///< where the given-up flow went on from here
    std::string prev;          ///< the hop that cancelled it: only it may send the replacement
    std::int64_t since = 0;
  };
  std::map<std::uint64_t, freed> freed_; ///< flows just given up for another: their path is its to take
  std::uint64_t probe_ = 0;              ///< data holder: round-robin over first-stage relays

  // Annealing (the same-stage peers' listings are in peers_).
  std::shared_ptr<const std::vector<wire::target_cost>> last_advert_;  ///< the latest advert computed
  std::shared_ptr<const std::vector<wire::flow_entry>> last_listing_;  ///< the latest listing computed
  /// Whether `what` is to go out now by `log` (changed, or refresh_ticks old); notes it if so.
  template <class T>
  bool due(sent<T>& log, const std::shared_ptr<const T>& what, std::int64_t now);
  /// `latest` again when `fresh` has its content, else `fresh` (and `latest` becomes it).
  template <class T>
  static const std::shared_ptr<const T>& remember(std::shared_ptr<const T>& latest, T&& fresh);
  std::optional<proposal> proposal_;
  std::map<std::uint64_t, expectation> expected_;
  /// A flow this node handed to a same-stage peer, remembered for a TTL.
  struct handed {
    std::string old_next; ///< its CHECKs get no CANCEL meanwhile: the new hop splices in
    std::string to;       ///< the peer that carries it now: requests for it are sent there
    std::int64_t since = 0;
  };
  std::map<std::uint64_t, handed> handed_;
  double temperature_;
  std::mt19937_64 rng_;
  std::uint64_t next_proposal_ = 0;
  std::int64_t quiet_until_ = 0; ///< no proposals before this tick (back-off after a refusal)
  bool moves_enabled_ = true;
  in_flight_fn in_flight_;
  std::uint32_t microbatches_ = 0;
  bool reroute_waits_ = false; ///< a re-route was put off for a microbatch in flight: try every tick
  move_stats stats_;
};

} // namespace gwtf::routing
