// The SWARM baseline router as its authors run it (yandex-research/swarm,
// src/moe/client/balancer.py and src/optim/performance_ema.py; docs/routing.md lists each
// choice): one router per trainer (data holder); per stage a queue of interchangeable peers
// keyed by their accumulated expected work, throughput learnt from the wall time of each
// call (a bias-corrected EMA of seconds per task unit), a periodic peer-list refresh, bans on
// errors. A pure state machine: no clocks, no threads; the caller passes `now` (seconds) and
// reports outcomes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "routing/routing_config.hpp"

namespace gwtf::routing {

/// A peer as the refresh sees it.
struct swarm_peer {
  std::string id;
  int stage = 0; ///< 1..S-1
};

/// The work a call asks for.
enum class swarm_task { forward, backward };

/// What to do after a call was lost.
enum class swarm_recovery {
  retry_call,        ///< call another peer of the stage with the saved inputs (SWARM's code)
  restart_microbatch ///< run the whole microbatch again (the GWTF paper's account of SWARM)
};

/// How a lost backward is recovered.
enum class swarm_policy {
  stage_retry, ///< as SWARM's code: only the lost stage, on another peer, from saved inputs
  restart,     ///< as the GWTF paper characterises SWARM: the whole microbatch again
};

/// One relay as SWARM's rebalancing sees it.
struct swarm_load {
  std::string id;
  int stage = 0;         ///< 1..S-1 (others are ignored)
  double throughput = 0; ///< task units per second the trainers measured (0: not measured yet)
};

/// A peer SWARM's rebalancing moves: `peer` indexes the loads it was given.
struct swarm_move {
  std::size_t peer = 0;
  int from = 0, to = 0;
};

/// SWARM's adaptive rebalancing (its paper, "adaptive swarm rebalancing"), one decision over
/// the live relays `relays`: the slowest stage by total measured throughput (ties: the lower
/// stage; `empty` >= 1: that stage, which has no peer left) gets one peer of the fastest
/// stage with at least two peers (ties: the lower stage), the one that leaves the slower of
/// the two stages fastest (ties: the first given). The move must raise the slower of the two
/// (always, into an empty stage). nullopt: no move.
std::optional<swarm_move> swarm_rebalance(const std::vector<swarm_load>& relays, int stages, int empty = -1);

/// SWARM's routing state at one trainer.
class swarm_router {
public:
  /// `stages` is S (relay stages are 1..S-1).
  swarm_router(const swarm_config& cfg, int stages, swarm_policy policy = swarm_policy::stage_retry);

  /// Whether the periodic peer-list refresh is due at `now_s`.
  bool refresh_due(double now_s) const;

  /// Replaces the peer list with `live` (the membership view). A new peer enters its stage's
  /// queue at the current least key, so it is called next, with no measurement; peers
  /// missing from `live` are forgotten; bans that expired are lifted (a banned peer comes back
  /// as a new one).
  void refresh(double now_s, const std::vector<swarm_peer>& live);

  /// The peer of `stage` with the least accumulated expected work (ties: smallest id); its
  /// key grows by the task's expected time (task size / learnt throughput, or
  /// `initial_seconds_per_task` x size before any measurement). nullopt: no usable peer.
  std::optional<std::string> choose(int stage, swarm_task task);

  /// Charges a task to a given peer's key without choosing it (a backward that must run where
  /// its forward stashed the activations).
  void charge(const std::string& peer, swarm_task task);

  /// A call finished `wall_s` seconds after it was made (transfer, queueing and compute):
  /// one sample of the peer's throughput.
  void completed(const std::string& peer, swarm_task task, double wall_s);

  /// A call timed out: the caller calls another peer (no ban).
  swarm_recovery timed_out(const std::string& peer, swarm_task task) const;

  /// A call failed with an error: the peer is banned until a refresh after `now_s` + one
  /// refresh period, and forgotten (a peer that comes back starts unmeasured).
  swarm_recovery failed(const std::string& peer, swarm_task task, double now_s);

  /// Learnt throughput of a peer in task units per second (nullopt if not measured).
  std::optional<double> throughput(const std::string& peer) const;

  /// Whether a peer is banned.
  bool banned(const std::string& peer) const;

  /// One peer as the trainer sees it (the shell's `flows`).
  struct peer_view {
    std::string id;
    int stage = 0;
    double key = 0;                   ///< accumulated expected seconds of work given to it
    std::int64_t samples = 0;         ///< calls that finished and taught its throughput
    std::optional<double> throughput; ///< learnt task units per second (nullopt: not measured)
  };
  /// Every peer, by stage, each stage's in queue order (the next call's peer first).
  std::vector<peer_view> queue() const;
  /// The banned peers, by id.
  std::vector<std::string> banned_peers() const;

private:
  struct entry {
    int stage = 0;
    double key = 0;           ///< accumulated expected seconds of work given to it
    double ema_spt = 0;       ///< EMA of seconds per task unit (before bias correction)
    std::int64_t samples = 0; ///< EMA updates so far
  };

  double task_size(swarm_task t) const;
  double expected_s(const entry& e, swarm_task t) const;
  double throughput_of(const entry& e) const;
  double stage_min_key(int stage) const;
  swarm_recovery recovery_for(swarm_task t) const;

  swarm_config cfg_;
  int stages_;
  swarm_policy policy_;
  double next_refresh_s_ = 0;
  /// Moves a peer's key (its place in its stage's queue).
  void set_key(const std::string& id, entry& e, double key);
  std::map<std::string, entry> peers_;         // ordered: deterministic iteration
  std::map<std::string, double> banned_until_; // peer -> time the ban ends (never in peers_)
  /// Per stage, its peers by (key, id): the head is the least key, ties by the smallest id.
  std::vector<std::set<std::pair<double, std::string>>> queue_;
};

} // namespace gwtf::routing
