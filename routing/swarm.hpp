// The SWARM baseline router (../shared/design/gwtf.md, "SWARM"), as a pure state machine
// owned by one data holder: per stage a priority queue of interchangeable peers keyed by
// projected finish time, throughput learnt as an EMA, a periodic peer-list refresh, bans on
// errors, and a whole-microbatch restart when a backward pass is lost. No clocks, no
// threads: the caller passes `now` (seconds) and reports outcomes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "routing/routing_config.hpp"

namespace gwtf::routing {

/// A peer as the refresh sees it.
struct swarm_peer {
  std::string id;
  int stage = 0; ///< 1..S-1
};

/// The work a hop asks for.
enum class swarm_task { forward, backward };

/// What to do after a hop was lost.
enum class swarm_recovery {
  retry_hop,         ///< forward lost: send the hop to another peer of the stage
  restart_microbatch ///< backward lost: run the whole microbatch again from the data holder
};

/// SWARM's routing state at one data holder.
class swarm_router {
public:
  /// `stages` is S (relay stages are 1..S-1).
  swarm_router(const swarm_config& cfg, int stages);

  /// Whether the periodic peer-list refresh is due at `now_s`.
  bool refresh_due(double now_s) const;

  /// Replaces the peer list with `live` (the membership view). New peers enter each stage's
  /// queue at its current minimum key, so they are probed next; peers missing from `live`
  /// are forgotten; bans that expired are lifted.
  void refresh(double now_s, const std::vector<swarm_peer>& live);

  /// The peer of `stage` with the earliest projected finish time (ties: smallest id); its
  /// key grows by task size / EMA throughput. nullopt when the stage has no usable peer.
  std::optional<std::string> choose(int stage, swarm_task task, double now_s);

  /// A hop finished after `seconds`: updates the peer's throughput EMA.
  void completed(const std::string& peer, swarm_task task, double seconds);

  /// A hop timed out: SWARM moves it to another peer (call choose again); the peer's key
  /// already carries the task, so it is naturally deprioritised.
  swarm_recovery timed_out(const std::string& peer, swarm_task task);

  /// A hop failed with an error: the peer is banned until the refresh after `now_s` +
  /// refresh period.
  swarm_recovery failed(const std::string& peer, swarm_task task, double now_s);

  /// Learnt throughput of a peer in task units per second (nullopt if unknown).
  std::optional<double> throughput(const std::string& peer) const;

  /// Whether a peer is banned.
  bool banned(const std::string& peer) const;

private:
  struct entry {
    int stage = 0;
    double key = 0;        ///< projected finish time, seconds
    double ema = 0;        ///< throughput, task units per second
    bool measured = false; ///< ema from samples, not from the stage's average
  };

  double task_size(swarm_task t) const;
  double stage_average_ema(int stage) const;
  double stage_min_key(int stage, double now_s) const;
  static swarm_recovery recovery_for(swarm_task t);

  swarm_config cfg_;
  int stages_;
  double next_refresh_s_ = 0;
  std::map<std::string, entry> peers_;         // ordered: deterministic iteration
  std::map<std::string, double> banned_until_; // peer -> time the ban ends
};

} // namespace gwtf::routing
