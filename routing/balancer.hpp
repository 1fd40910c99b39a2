// The GWTF flow balancer of one node (../shared/design/gwtf.md, docs/routing.md) as a pure
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
// stays missing.
// Not yet: annealing moves (REDIRECT/SWAP): see docs/routing.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/types.hpp"
#include "routing/routing_config.hpp"

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
};

/// The balancer of one node.
class flow_balancer {
public:
  /// `stage` 0 = data holder, 1..stages-1 = relay; `capacity` = flows it may hold (a data
  /// holder: flows it originates).
  flow_balancer(std::string self, int stage, int stages, int capacity, const gwtf_config& cfg);

  /// Declares a neighbour: a node of the previous, same or next stage. `edge_cost` is d(self,
  /// peer) for next-stage peers (for the last relay stage: the data holders), else ignored.
  void add_peer(const std::string& id, int stage, double edge_cost);

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

  /// Flows this node can still take.
  int spare() const { return capacity_ - static_cast<int>(flows_.size()); }

  const std::string& id() const { return self_; }
  int stage() const { return stage_; }

private:
  struct peer {
    int stage = 0;
    double edge = 0;                     ///< d(self, peer) when it is a next hop
    std::map<std::string, double> costs; ///< its advertised cost per data holder
    int demand = 0;                      ///< < 0: it can take -demand more flows
    bool heard = false;                  ///< an advert or introduction arrived
  };

  bool holder() const { return stage_ == 0; }
  int next_stage() const { return (stage_ + 1) % stages_; }
  int prev_stage() const { return (stage_ + stages_ - 1) % stages_; }
  std::optional<std::pair<std::string, double>> best_next(const std::string& target,
                                                         const std::set<std::string>& exclude) const;
  std::vector<wire::target_cost> advert() const;
  void forward_request(held_flow& f, std::vector<outgoing>& out);
  void release(std::uint64_t id, std::vector<outgoing>& out, wire::reject_reason why);
  wire::flow_response response(std::uint64_t id, bool accepted, wire::reject_reason why,
                               const std::string& target) const;
  std::vector<outgoing> on_request(const std::string& from, const wire::flow_request& r, std::int64_t now);
  std::vector<outgoing> on_response(const std::string& from, const wire::flow_response& r, std::int64_t now);

  std::string self_;
  int stage_;
  int stages_;
  int capacity_;
  gwtf_config cfg_;
  std::map<std::string, peer> peers_;
  std::map<std::uint64_t, held_flow> flows_;
  std::uint64_t next_flow_ = 0;
  bool introduced_ = false;
};

} // namespace gwtf::routing
