// A host's view of its peers, fed by heartbeats (HELLO) and clean departures (LEAVE), with
// failure suspicion by silence: a pure state machine with time passed in, no CAF.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// One peer as seen from here.
struct peer_state {
  wire::hello hello;           ///< its last introduction (stage, role, capacity, incarnation)
  std::int64_t last_heard_ms = 0;
  bool alive = true;
};

/// Changes the view reports to its subscribers.
struct view_change {
  std::string peer;
  bool up = false; ///< true: new or back; false: suspected dead or left
};

/// Peers by id, with liveness.
class membership_view {
public:
  /// `timeout_ms`: a peer silent this long is considered down.
  membership_view(std::string self, std::int64_t timeout_ms);
  /// A heartbeat/introduction arrived. Reports the peer as up when new, back, moved to
  /// another stage, or restarted with a higher incarnation (the old incarnation is reported
  /// down first).
  std::vector<view_change> heard(const wire::hello& h, std::int64_t now_ms);
  /// A clean departure.
  std::vector<view_change> left(const wire::leave& l);
  /// Suspects peers silent for longer than the timeout.
  std::vector<view_change> tick(std::int64_t now_ms);
  /// Live peers (not self), sorted by id.
  std::vector<std::string> live() const;
  /// Live peers of one stage, sorted by id (data holders are stage 0).
  std::vector<std::string> live_at(int stage) const;
  bool alive(const std::string& peer) const;
  const std::map<std::string, peer_state>& peers() const { return peers_; }

private:
  std::string self_;
  std::int64_t timeout_ms_;
  std::map<std::string, peer_state> peers_;
  std::map<std::string, std::uint64_t> departed_; ///< incarnations that said LEAVE
};

} // namespace gwtf::actors
