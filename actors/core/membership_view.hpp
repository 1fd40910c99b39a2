// A host's view of its peers, fed by heartbeats (HELLO) and clean departures (LEAVE), with
// failure suspicion by silence: a pure state machine with time passed in, no CAF.
// Suspicion adapts to what it sees (phi accrual, Hayashibara et al. 2004, with a normal model
// of the gaps between a peer's heartbeats): a peer is suspected once
// phi(t) = -log10 P(gap > t) reaches 8, i.e. after mean + 5.61 standard deviations of its last
// 64 gaps (the deviation at least a quarter of the mean), but never before the connection
// timeout (the floor) and always by 4 times it (the cap): a quiet LAN is as fast as before,
// a peer whose heartbeats arrive in bursts under load gets the slack its bursts show.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// The gaps between one peer's heartbeats, the last `window` of them.
class arrival_window {
public:
  static constexpr std::size_t window = 64;
  void add(std::int64_t gap_ms);
  std::size_t size() const { return gaps_.size(); }
  double mean() const;
  double stddev() const;

private:
  std::vector<std::int64_t> gaps_; // a ring of `window`
  std::size_t next_ = 0;
  double sum_ = 0, sum_sq_ = 0;
};

/// One peer as seen from here.
struct peer_state {
  wire::hello hello;           ///< its last introduction (stage, role, capacity, incarnation)
  std::int64_t last_heard_ms = 0;
  bool alive = true;
  arrival_window gaps;         ///< between its heartbeats while alive, this incarnation
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
  /// Suspects peers silent for longer than their suspicion time.
  std::vector<view_change> tick(std::int64_t now_ms);
  /// How long `p` may be silent before it is suspected (see the top of this file).
  std::int64_t suspect_after_ms(const peer_state& p) const;
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
