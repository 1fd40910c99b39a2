// The emulated geo network of the embedded local cluster as a pure calculation: every
// directed link between two virtual hosts has a latency, a bandwidth and a send queue, so
// concurrent transfers on one link wait for each other; a host may have a network card
// (hosts[].uplink_mbit, downlink_mbit), a queue of its own shared by everything it sends
// (receives), as in the simulator (docs/simulator.md, "per-host limits"). Each queue has the
// two lanes of node mode's connections (actors/net/peer_framing.hpp): a control frame
// (heartbeat, probe, flow, gossip) waits for the control frames before it and for at most one
// bulk fragment in transmission, never for the gradient shares queued behind it, and the bulk
// queued yields the link for its bytes. No clock, no CAF: the link-layer actor asks it when a
// message of n bytes sent now arrives.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "actors/net/peer_framing.hpp"
#include "routing/network.hpp"

namespace gwtf::actors {

/// Delivery times over an emulated network, in emulated seconds.
class link_emulator {
public:
  /// `matrix` gives latency and bandwidth between regions.
  explicit link_emulator(routing::network_matrix matrix);
  /// Places a host in a region; false if the region is not in the matrix.
  bool place(const std::string& host, const std::string& region);
  /// Gives `host` a network card of `uplink_mbit` / `downlink_mbit` (0: no limit).
  void limit(const std::string& host, double uplink_mbit, double downlink_mbit);
  /// Multiplies latency and transfer time of from -> to (and to -> from) by `factor` >= 1.
  void slow_down(const std::string& a, const std::string& b, double factor);
  /// When `bytes` sent from -> to at emulated time `now` on `lane` arrive: the link and each
  /// card limited carry them in turn after what is queued on them in that lane (bytes/bandwidth
  /// each; control: after at most one bulk fragment); the transfer ends when all have, then
  /// the latency. Unknown hosts: nullopt.
  std::optional<double> deliver_at(const std::string& from, const std::string& to, std::size_t bytes,
                                   double now, peer_framing::lane lane = peer_framing::bulk);
  /// Node mode, where each host emulates its own cards: when `bytes` that reached `host` at
  /// emulated time `now` (the sender emulated the link and its uplink) have come through
  /// `host`'s downlink, after what is queued on it in `lane`. `now` when it has no downlink
  /// limit.
  double receive_at(const std::string& host, std::size_t bytes, double now,
                    peer_framing::lane lane = peer_framing::bulk);
  /// One-way latency and bandwidth of from -> to as emulated (slowdowns and cards applied).
  std::optional<routing::link_params> link(const std::string& from, const std::string& to) const;

private:
  routing::network_matrix matrix_;
  std::map<std::string, std::size_t> region_of_;
  /// One queue (a link, a card's direction) with its two lanes, in emulated seconds.
  struct queue {
    double bulk_until = 0;    ///< when the bulk queued so far has gone through
    double control_until = 0; ///< when the control frames queued so far have
    /// When `bits` on `lane` entering at `now` have gone through at `mbps` (> 0).
    double carry(double bits, double mbps, double now, peer_framing::lane lane);
  };
  std::map<std::pair<std::string, std::string>, queue> links_;
  std::map<std::pair<std::string, std::string>, double> slowdown_;
  struct card {
    double uplink_mbps = 0, downlink_mbps = 0; // 0: no limit
    queue up, down;
  };
  std::map<std::string, card> cards_;
  std::optional<routing::link_params> path(const std::string& from, const std::string& to) const; // the link alone
};

} // namespace gwtf::actors
