// Internal to sim/: the discrete-event engine that sim/simulator.cpp's simulate() runs. Hosts,
// links with per-link send queues (link_clock.hpp), compute and capacity, churn, failure
// detection and stage aggregation are common to every router; what differs between the
// routers is behind engine::router, one file per router in sim/routers/. Model and decisions:
// docs/simulator.md.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "common/seeded.hpp"
#include "routing/balancer.hpp"
#include "routing/bound.hpp"
#include "routing/cost_model.hpp"
#include "routing/optimum.hpp"
#include "routing/swarm.hpp"
#include "sim/link_clock.hpp"
#include "sim/simulator.hpp"

namespace gwtf::sim {

using namespace gwtf::routing;

inline constexpr double inf = std::numeric_limits<double>::infinity();

struct microbatch {
  std::size_t holder = 0;
  int index = 0;
  std::vector<std::size_t> path; // host per stage; path[0] = the holder
  std::vector<bool> holds;       // a capacity slot held on path[s]
  std::vector<bool> bwd_done;    // stage s finished its backward
  std::vector<bool> remat;       // SWARM: stage s's backward runs at bwd_host[s], forward recomputed
  std::vector<std::size_t> bwd_host; // SWARM: where stage s's backward call went
  std::vector<double> call_start;    // SWARM: when the call of stage s was made (wall-time samples)
  std::vector<double> work;      // compute seconds per stage spent on this microbatch
  std::uint64_t epoch = 0;       // bumped on re-route/restart: older events are stale
  bool done = false;
  bool launched = false;
  std::size_t flow_slot = 0;     // which of the holder's routes it follows
};

class engine {
public:
  engine(const sim_scenario& s, sim_router r);

  sim_result run();

private:
  static constexpr double stall_s = 3600; // no progress and no work due for this long: a stall
  struct waiter {
    microbatch* m;                  // null: a job of its own (a repair)
    std::uint64_t epoch;
    bool backward;
    std::function<void()> then;
    std::function<void()> job_lost; // a job: what to do when the host dies first
  };
  struct event {
    double t;
    std::uint64_t seq;
    std::function<void()> fn;
  };
  struct later {
    bool operator()(const event& a, const event& b) const {
      return a.t > b.t || (a.t == b.t && a.seq > b.seq);
    }
  };

  // GWTF_SIM_DEBUG=1: the unfinished microbatches, for a stalled run.
  void dump() const;

  void at(double t, std::function<void()> fn) { pq_.push({t, seq_++, std::move(fn)}); }

  int stage_of(std::size_t h) const { return hosts_[h].stage; }
  int S() const { return s_.stages; }

  link_estimate est(std::size_t a, std::size_t b) const;

  double cost(std::size_t a, std::size_t b) const;

  // How long one microbatch occupies the link a <-> b (the balancer's load term).
  double link_s(std::size_t a, std::size_t b) const;

  // A transfer of `bytes` a -> b that starts at `ready` (default: now): FIFO per directed link.
  double transfer(std::size_t a, std::size_t b, double bytes, std::optional<double> ready = std::nullopt);

  // One activation or activation gradient a -> b. With adaptive compression the link carries
  // what routing/compression.hpp plans for it (its bandwidth, b's compute per call), and a
  // sparse tensor first costs a its top-k and b the scatter back (compress_s_per_value per
  // value of the dense tensor): a computes it right after the output it compresses (now),
  // the transfer starts when it is done, and a's queued work waits that much longer.
  double transfer_activation(std::size_t a, std::size_t b);
  double send_activation(std::size_t a, std::size_t b); // the transfer itself (the above also tells the watchdog)

  // --- compute and capacity ---------------------------------------------------------

  // Runs `seconds` of compute on h (FIFO), then `then` if h is still alive; a crash in the
  // middle wastes the part done (counted at the crash).
  // `on_crash`: what the microbatch does when h dies before it finished.
  void compute(std::size_t h, microbatch& mb, int stage, double seconds, std::function<void()> then,
               std::function<void()> on_crash, bool check_epoch = true);

  // Takes a capacity slot on h for mb, now or when one frees.
  // `backward`: the slot is for recomputing a lost stash (a crash re-routes it as such).
  void admit(std::size_t h, microbatch& mb, bool backward, std::function<void()> then);

  void release(microbatch& mb, int stage);

  // Hands freed slots of h to the queue.
  void drain(std::size_t h);

  // A slot for a job of its own (a repair recomputes a stage: it needs the activations).
  void admit_job(std::size_t h, std::function<void()> then, std::function<void()> lost);

  void free_job(std::size_t h);

  // What a host's peers believe: entered, and not yet known dead (a crash is learnt
  // detect_s after it happens).
  bool believed_alive(std::size_t h) const;

  // --- the microbatch pipeline ------------------------------------------------------

  void launch(microbatch& mb);

  void retry_later(microbatch& mb, std::function<void()> fn);

  // Forward to stage s (s == S: back to the holder for head and loss).
  void send_forward(microbatch& mb, int s);

  // Who sends stage s its input: the stage s-1 host that computed it. SWARM's trainer keeps
  // every stage's inputs (its code saves them for backward), so when that host is gone SWARM
  // sends them from the data holder; GWTF relies on the predecessor's buffer. With
  // swarm_via_trainer every call's input comes from the trainer (the data holder).
  std::size_t input_source(const microbatch& mb, int s) const;

  // Who sends stage s its output gradient: the host that ran stage s+1's backward (the data
  // holder for the last stage); SWARM's trainer again keeps a copy (with swarm_via_trainer:
  // it sends every one).
  std::size_t gradient_source(const microbatch& mb, int s) const;

  // SWARM's calls go through its trainer (sim_scenario::swarm_via_trainer).
  bool via_trainer() const;
  // A call's answer from `from` back to mb's trainer, then `then` (unless re-routed
  // meanwhile); at once when calls do not go through the trainer.
  void answer_to_trainer(microbatch& mb, std::size_t from, std::function<void()> then);

  std::size_t backward_host(const microbatch& mb, int s) const;

  // One activation (or its gradient) from -> to, then `arrive(mb, s)` unless re-routed meanwhile.
  void ship(microbatch& mb, std::size_t from, std::size_t to, void (engine::*arrive)(microbatch&, int), int s);

  void arrive_forward(microbatch& mb, int s);

  void reroute_next(microbatch& mb, int s);

  // Backward into stage s (s == 0: the gradient reaches the holder: done).
  void send_backward(microbatch& mb, int s);

  // SWARM's backward call: a peer of stage s chosen by the queue gets the stage's saved input
  // and the output gradient, recomputes the forward and runs the backward.
  void swarm_backward_call(microbatch& mb, int s);

  void arrive_backward(microbatch& mb, int s);

  void finish(microbatch& mb);

  // mb needs dead stage-s host path[s] (forward: to compute; backward: its stash).
  void lost(microbatch& mb, int s, bool backward);

  // Forward: the live stage s-1 host re-sends its output to a stage-s host again.
  void retry_forward(microbatch& mb, int s);

  // Backward broke at stage `to`: GWTF's predecessor re-sends its buffered output; a
  // replacement recomputes stage j's forward (j = the first stage whose host is gone) and
  // passes it on until stage `to`, whose successor then re-sends the gradient it kept.
  // Nothing else reruns.
  void repair(microbatch& mb, int j, int to);

  // SWARM: the whole microbatch again from its data holder; all its work is wasted.
  void restart(microbatch& mb);

  // A crash (peers learn of it `detect` seconds later) or a leave (detect = 0).
  // `churn`: false for a SWARM peer that leaves its stage to serve another (not a crash).
  void crash(std::size_t h, double detect, bool churn = true);

  void apply(const sim_event& e);

  // The joiner (its stage chosen by the trace: the bottleneck stage, the same for every
  // router) downloads the weights from the replica with the fastest link, then enters.
  void join(std::size_t j);

  // `to` downloads a stage's weights (and optimizer state) from the live replica with the
  // fastest link, over the link queues; returns when it has them.
  double download(int stage, std::size_t to);

  void enter(std::size_t j);

  void degrade(const sim_event& e);

  // Failure detection fired: routers learn of it; microbatches whose gradients at h were
  // already accumulated are repaired (GWTF, optimal) or restarted (SWARM).
  void detected(std::size_t h);

  // The stage-s work of an already finished backward is redone at a replacement from the
  // buffered input and gradient (forward + backward of that stage only).
  void repair(microbatch& mb, int s);

  // --- iterations --------------------------------------------------------------------

  void try_start_iteration();

  // Keeps as many of the holder's microbatches in flight as it has routes; with none (all
  // lost to crashes), looks again after a tick.
  void launch_more(std::size_t holder);

  void maybe_end_iteration();

  // Starts this iteration's averaging once its microbatches are done and no averaging runs;
  // ends the iteration then (overlap) or when the averaging ends (sync, the last iteration).
  void advance();
  // `waited`: it waited for its own averaging to end (sync, the last iteration).
  void end_iteration(bool waited);

  // Starts the stages' averaging of the iteration whose microbatches are done.
  void average_stages();
  // When the running averaging ends with the cards' busy time known now; it ends there if
  // nothing took its cards' time meanwhile, else it looks again then.
  void check_averaging();

  // The proven lower bound on this iteration's time (routing/bound.hpp) from every host
  // that could work in it, on the links as they were when it started (links only degrade).
  void record_bound();

  // --- routers -------------------------------------------------------------------------
  //
  // What differs between the routers is behind one interface; everything else above (hosts,
  // links, compute, capacity, churn, detection, aggregation, the bound) is common to all.
  // A router sees the engine's state only through what its hosts could know (believed
  // liveness, measured links after the detection delay).

  /// What the pipeline does after a call on a dead host failed.
  enum class recovery {
    resend,      ///< the last live hop before it re-sends (GWTF, centralized; SWARM's forward)
    retry_stage, ///< SWARM's stage-level retry of a backward on another peer
    restart,     ///< the whole microbatch again from its data holder (swarm-restart)
  };

  class router {
  public:
    explicit router(engine& e) : e_(e) {}
    virtual ~router() = default;
    virtual sim_router kind() const = 0;

    /// Relays keep only a microbatch's stage input and recompute the forward for the backward.
    virtual bool rematerialises() const { return false; }
    /// The routes exist before the first iteration (index_ is filled).
    virtual void start() = 0;
    /// Microbatches a data holder may have in flight (its routes).
    virtual int concurrency(std::size_t holder) const = 0;
    /// False: no routes to wait for or count (SWARM chooses a peer per call).
    virtual bool has_routes() const { return true; }
    /// The host of stage s for mb, arriving from `from`; nullopt: none now (retried later).
    virtual std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) = 0;
    /// Hosts `from` knows, offered to `consider` for a hop without a route (default: all).
    /// `consider` says whether it took the host as a candidate.
    virtual void fallback_candidates(const microbatch&, std::size_t, const std::function<bool(std::size_t)>& consider) {
      for (std::size_t h = 0; h < e_.hosts_.size(); ++h)
        consider(h);
    }
    /// A joiner finished its download and entered.
    virtual void entered(std::size_t) {}
    /// The links between regions a and b degraded (routers learn it by measuring).
    virtual void links_degraded(std::size_t, std::size_t) {}
    /// The peers learnt that h is gone (crash or leave).
    virtual void detected(std::size_t) {}
    /// An iteration is about to start (its microbatches are not made yet).
    virtual void before_iteration() {}
    /// An iteration's microbatches are made and its route count recorded.
    virtual void iteration_started() {}
    /// The run ended: router-specific counters into `res`.
    virtual void finish(sim_result&) {}

    // SWARM's trainer: a trainer per data holder calls peers and keeps every stage's input
    // and output gradient, so a stage's input comes from the holder when its sender is gone,
    // and a lost accumulated gradient restarts the microbatch. Off for the others.
    virtual bool trainer() const { return false; }
    /// Backward calls go to any peer of the stage, which recomputes the forward.
    virtual bool backward_calls() const { return false; }
    virtual std::optional<std::size_t> backward_peer(microbatch&, int) { return std::nullopt; }
    /// A backward is sent to stage s > 0 (stash mode: the forward's host).
    virtual void backward_sent(microbatch&, int) {}
    /// Host h finished mb's call of stage s.
    virtual void call_done(const microbatch&, std::size_t, int, swarm_task) {}
    /// mb's call on `dead` failed (its sender knows it now).
    virtual recovery call_failed(const microbatch&, std::size_t, bool) { return recovery::resend; }
    /// When the sender of mb's stage-s call learns that `dead` is gone (default: the
    /// cluster's failure detection).
    virtual double learns_of_loss(const microbatch&, std::size_t dead, int /*s*/, bool /*backward*/) const {
      return e_.detect_at_[dead];
    }

  protected:
    engine& e_;
  };

  class gwtf_router;
  class centralized_router;
  class swarm_sim_router;
  // One factory per router, each in its file of sim/routers/.
  static std::unique_ptr<router> make_gwtf_router(engine& e);
  static std::unique_ptr<router> make_centralized_router(engine& e);
  static std::unique_ptr<router> make_swarm_router(engine& e, swarm_policy policy);

  std::unique_ptr<router> make_router(sim_router r);

  bool routes_ready() const;

  int route_count() const;

  // A hop without a route: a host of stage s that `from` knows and believes alive (GWTF: its
  // introduced peers; when `from` is gone, the peers of the microbatch's other hosts; the
  // centralized router knows every host), the cheapest by the cost model, spread over the
  // candidates by microbatch index. Nobody knows other hosts' queues. Counted in
  // fallback_hops.
  std::optional<std::size_t> fallback(const microbatch& mb, int s, std::size_t from);

  std::optional<std::size_t> route(microbatch& mb, int s, std::size_t from) { return router_->route(mb, s, from); }

  const sim_scenario& s_;
  sim_result res_;
  std::priority_queue<event, std::vector<event>, later> pq_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  bool finished_ = false, ending_ = false;
  bool remat_ = false; // GWTF/centralized relays keep inputs only and recompute (gwtf.backward)
  std::vector<int> stash_capacity_; // per host: stashes its memory holds (the scenario's capacity)
  int iteration_ = 0;
  double iter_start_ = 0;
  int outstanding_ = 0, pending_repairs_ = 0;
  std::vector<std::size_t> holders_;
  std::vector<bool> alive_;
  std::vector<double> busy_until_, iter_work_, crash_time_;
  std::vector<int> inflight_;
  std::vector<std::uint64_t> life_; // bumped when a host dies or moves: its running work is void
  std::vector<std::deque<waiter>> waiting_;
  double last_progress_ = 0;
  // When the last work scheduled so far (a compute, an activation, a download, an all-reduce)
  // ends: the stall watchdog counts from here too, so one long transfer is not a stall.
  // Control messages do not count: a deadlocked run's balancers go on talking.
  double work_due_ = 0;
  // Whether rematerialising lets some relay hold more microbatches (gwtf.backward: auto).
  bool remat_gains_slots() const {
    if (!(s_.activation_bytes > 0) || std::floor(s_.stash_bytes / s_.activation_bytes) < 2)
      return false;
    for (auto& h : s_.hosts)
      if (h.stage > 0 && h.capacity >= 2)
        return true;
    return false;
  }
  double expect(double end) {
    work_due_ = std::max(work_due_, end);
    return end;
  }
  std::map<std::size_t, std::vector<std::pair<double, double>>> running_;
  link_clock link_free_; // (from << 32 | to) -> when the link is free
  // Per host with a network card limit: when its card has sent (received) every transfer
  // queued so far, and when it was busy with them (sorted, disjoint). Each card is a FIFO
  // pipe of its own; a transfer ends when its link and both cards have carried it. The
  // averaging yields to them: it uses the cards' idle time (docs/simulator.md, "per-host
  // limits").
  std::vector<double> up_free_, down_free_;
  std::vector<std::deque<std::pair<double, double>>> up_busy_, down_busy_;
  static void busy(std::deque<std::pair<double, double>>& b, double from, double to);
  // When `need` seconds of a card's idle time from `from` on have passed.
  static double idle_end(const std::deque<std::pair<double, double>>& b, double from, double need);
  // The averaging in progress (one at a time, as a replica runs them).
  struct averaging_round {
    int iteration = 0; // whose gradients
    double at = 0, pair_end = 0, least = 0;
    double protocol_s = 0; // sim_scenario::protocol_latency: the messages' latencies it adds
    struct card {
      std::size_t host;
      double up_s, down_s, latency_s; // card time it needs; the stage's shortest latency
    };
    std::vector<card> cards;
  };
  std::optional<averaging_round> averaging_; // running
  double protocol_latency_s() const;         // what sim_scenario::protocol_latency adds to a round
  double round_least_ = 0; // the last started round's least possible time (the bound)
  bool phase_done_ = false; // this iteration's microbatches are done
  int averaged_upto_ = 0;   // iterations whose averaging has started
  double done_at_ = 0;      // when they were (its averaging started then or later)
  std::vector<sim_host> hosts_; // the scenario's, then the joiners (stage set when they join)
  network_matrix net_;          // degrades as links do
  std::vector<sim_event> trace_;
  std::multimap<int, sim_event> events_by_iteration_;
  std::vector<double> detect_at_; // when peers learn of a crash or leave
  std::vector<bool> entered_;     // joiners: download done
  std::set<std::size_t> left_before_entering_;
  std::vector<std::unique_ptr<microbatch>> all_; // stable addresses for pending events
  std::vector<microbatch*> mbs_;                 // this iteration's
  std::unordered_map<std::string, std::size_t> index_;
  std::unique_ptr<router> router_; // what differs between the routers
  std::map<std::size_t, int> moving_;            // SWARM: peers downloading their new stage's weights
  std::set<std::pair<std::size_t, int>> bound_hosts_; // (host, stage) that could work this iteration
  network_matrix iter_net_;                      // the links when this iteration started
};

} // namespace gwtf::sim
