// Plain configuration of the routers (GWTF flow balancer and the SWARM baseline). No CAF.
#pragma once

#include "common/validation.hpp"

#include <array>
#include <functional>
#include <string>
#include <utility>

namespace gwtf::routing {

/// Which algorithm routes microbatches.
enum class router_kind {
  gwtf,  ///< decentralized flow balancers (the paper)
  swarm, ///< SWARM's earliest-projected-finish routing (baseline)
};

/// Names of `router_kind` values as they appear in YAML.
constexpr std::array<std::pair<router_kind, const char*>, 2> enum_names(router_kind) {
  return {{{router_kind::gwtf, "gwtf"}, {router_kind::swarm, "swarm"}}};
}

/// What a GWTF relay keeps of a microbatch between its forward and its backward.
enum class gwtf_backward {
  stash,         ///< every activation of its blocks (the paper): a capacity slot = one stash
  rematerialize, ///< only the stage's input; the backward recomputes the forward (1/3 more
                 ///< compute), so one stash's memory holds many microbatches
  automatic,     ///< "auto": rematerialize where that lets a relay hold more microbatches, else stash
};

constexpr std::array<std::pair<gwtf_backward, const char*>, 3> enum_names(gwtf_backward) {
  return {{{gwtf_backward::stash, "stash"},
           {gwtf_backward::rematerialize, "rematerialize"},
           {gwtf_backward::automatic, "auto"}}};
}

/// Whether relays rematerialise under `b`. `gains_slots`: rematerialising lets a relay hold
/// more microbatches in the memory its capacity stands for (the simulator: a stash holds at
/// least two stage inputs and some relay has room for two stashes). The runtime's capacity
/// counts microbatches, so there it never gains and `auto` stashes (no compute for nothing).
constexpr bool rematerialises(gwtf_backward b, bool gains_slots) {
  return b == gwtf_backward::rematerialize || (b == gwtf_backward::automatic && gains_slots);
}

/// What the annealing moves (REDIRECT, SWAP) minimise (docs/routing.md, "The move objective").
enum class move_objective {
  completion, ///< the affected data holders' iteration time: ceil(microbatches / flows) x slowest ring
  ring,       ///< the largest ring cost of the affected flows (the paper's min-max)
};

constexpr std::array<std::pair<move_objective, const char*>, 2> enum_names(move_objective) {
  return {{{move_objective::completion, "completion"}, {move_objective::ring, "ring"}}};
}

/// Constants of the GWTF flow protocol (docs/design.md).
struct gwtf_config {
  int tick_ms = 2000;                 ///< period of re-introductions, adverts and anti-entropy
  double initial_temperature = 1.7;   ///< simulated-annealing start temperature
  double cooling = 0.95;              ///< temperature factor after each executed move
  double min_temperature = 0.01;      ///< temperature floor; below it only improving moves pass
  double swap_probability = 0.5;      ///< chance that a move attempt is a SWAP (else REDIRECT)
  double min_gain = 0.002;            ///< a move improves when it lowers the max cost by this fraction
  int half_built_ttl_ticks = 5;       ///< ticks a half-built flow may wait before it is dropped
  int anti_entropy_ticks = 3;         ///< ticks between CHECKs of the flows one holds
  /// A cost advert or flow listing equal to the last one sent to that peer goes again only
  /// after this many ticks (a peer that lost it, or restarted, is refreshed then); a changed
  /// one goes at the next tick. 1: every tick.
  int refresh_ticks = 5;
  int request_timeout_ms = 1000;      ///< a FLOW_REQUEST without answer counts as rejected
  gwtf_backward backward = gwtf_backward::automatic; ///< what relays keep from forward to backward
  bool link_load = true;              ///< a link's cost grows with the flows already sent over it
  double reroute_gain = 0.3;          ///< a built flow moves to another next hop that costs this fraction less; 0: never
  /// Re-routes, annealing hand-overs and fair-share hand-overs leave a flow alone while a
  /// microbatch this host sent on it has not had its backward here yet; false (the default:
  /// waiting cost 0-1.5% of throughput in the simulator, docs/routing.md): they act at once and
  /// such microbatches go on through the holder's other flows or a fallback hop.
  bool idle_moves = false;
  /// What the annealing moves minimise; `completion` measured 0-2.4% slower (docs/routing.md).
  move_objective objective = move_objective::ring;

  /// Reports every field that is out of range or inconsistent.
  void validate(const issue_sink& report) const;
};

/// Where SWARM runs a backward call.
enum class swarm_backward {
  rematerialize, ///< any peer of the stage, recomputing the forward from the saved inputs (SWARM's servers)
  stash,         ///< the peer that ran the forward, from the activations it kept
};

constexpr std::array<std::pair<swarm_backward, const char*>, 2> enum_names(swarm_backward) {
  return {{{swarm_backward::rematerialize, "rematerialize"}, {swarm_backward::stash, "stash"}}};
}

/// How a SWARM trainer learns that a peer it called is gone.
enum class swarm_detection {
  timeout, ///< as SWARM's code: when the call times out (no ban on a timeout; the peer-list refresh drops it)
  oracle,  ///< after the cluster's failure detection delay, like every other router (an error: banned)
};

constexpr std::array<std::pair<swarm_detection, const char*>, 2> enum_names(swarm_detection) {
  return {{{swarm_detection::timeout, "timeout"}, {swarm_detection::oracle, "oracle"}}};
}

/// Constants of the SWARM baseline (defaults: SWARM's code; docs/routing.md).
struct swarm_config {
  int refresh_ms = 30000;                  ///< period of the peer-list refresh (update_period)
  double ema_alpha = 0.1;                  ///< weight of the newest sample in the throughput EMA
  double backward_factor = 2.5;            ///< backward task size relative to forward
  double initial_seconds_per_task = 1.0;   ///< expected seconds per task unit of an unmeasured peer
  swarm_backward backward = swarm_backward::rematerialize; ///< where a backward call runs
  int rebalance_ms = 300000;               ///< period of moving a peer to the slowest stage; 0: never
  swarm_detection detection = swarm_detection::timeout; ///< how a trainer learns of a dead peer
  /// Call timeouts (swarm/train_pipeline.py: TIMEOUT = 30 s, BACKWARD_TIMEOUT = 2.5 x that).
  int forward_timeout_ms = 30000;
  int backward_timeout_ms = 75000;

  /// Reports every field that is out of range or inconsistent.
  void validate(const issue_sink& report) const;
};

/// The routing section.
struct routing_config {
  router_kind router = router_kind::gwtf; ///< algorithm used by every host of the cluster
  gwtf_config gwtf;                       ///< GWTF protocol constants
  swarm_config swarm;                     ///< SWARM baseline constants

  /// Reports every invalid field, with keys relative to the section.
  void validate(const issue_sink& report) const;
};

template <class F>
void visit_fields(F& f, gwtf_config& x) {
  f("tick_ms", x.tick_ms);
  f("initial_temperature", x.initial_temperature);
  f("cooling", x.cooling);
  f("min_temperature", x.min_temperature);
  f("swap_probability", x.swap_probability);
  f("min_gain", x.min_gain);
  f("half_built_ttl_ticks", x.half_built_ttl_ticks);
  f("anti_entropy_ticks", x.anti_entropy_ticks);
  f("refresh_ticks", x.refresh_ticks);
  f("request_timeout_ms", x.request_timeout_ms);
  f("backward", x.backward);
  f("link_load", x.link_load);
  f("reroute_gain", x.reroute_gain);
  f("idle_moves", x.idle_moves);
  f("move_objective", x.objective);
}

template <class F>
void visit_fields(F& f, swarm_config& x) {
  f("refresh_ms", x.refresh_ms);
  f("ema_alpha", x.ema_alpha);
  f("backward_factor", x.backward_factor);
  f("initial_seconds_per_task", x.initial_seconds_per_task);
  f("backward", x.backward);
  f("rebalance_ms", x.rebalance_ms);
  f("detection", x.detection);
  f("forward_timeout_ms", x.forward_timeout_ms);
  f("backward_timeout_ms", x.backward_timeout_ms);
}

template <class F>
void visit_fields(F& f, routing_config& x) {
  f("router", x.router);
  f("gwtf", x.gwtf);
  f("swarm", x.swarm);
}

} // namespace gwtf::routing
