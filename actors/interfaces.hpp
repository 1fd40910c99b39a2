// The actors of one virtual host and their message interfaces (docs/runtime.md).
//
// Hosts talk only through wire messages (messages/types.hpp) that the link layer carries
// as encoded frames; inside a host, actors talk with the local messages listed here. Every
// actor is a thin shell: the decisions live in pure cores (hop_ledger, membership_view,
// iteration_barrier, link_emulator, routing::flow_balancer, model::stage).
//
// The actors of a host have typed interfaces (supervisor_actor, membership_actor,
// probe_actor, balancer_actor, compute_actor, carrier_actor below: CAF checks every send to
// them at compile time). The link layers and the reporter, which the deploy layer provides,
// are dynamically typed; their interfaces are written out below, one line per handler.
#pragma once

#include <cstdint>
#include <memory>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include "actors/node_config.hpp"
#include "actors/tls_session.hpp"
#include "actors/wire_frame.hpp"
#include "model/model_config.hpp"
#include "routing/network.hpp"
#include "routing/dtfm.hpp"
#include "routing/compression.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::actors {

// --- atoms -----------------------------------------------------------------------------
using send_atom = caf::atom_constant<caf::atom("send")>;
using deliver_atom = caf::atom_constant<caf::atom("deliver")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using slow_atom = caf::atom_constant<caf::atom("slow")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using peer_up_atom = caf::atom_constant<caf::atom("peerup")>;
using peer_down_atom = caf::atom_constant<caf::atom("peerdown")>;
using stage_atom = caf::atom_constant<caf::atom("stage")>;
using latency_atom = caf::atom_constant<caf::atom("latency")>;
using flows_atom = caf::atom_constant<caf::atom("flows")>;
using ready_atom = caf::atom_constant<caf::atom("ready")>;
using crash_atom = caf::atom_constant<caf::atom("crash")>;
using resend_atom = caf::atom_constant<caf::atom("resend")>;
using progress_atom = caf::atom_constant<caf::atom("progress")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using net_atom = caf::atom_constant<caf::atom("net")>;
using drained_atom = caf::atom_constant<caf::atom("drained")>;
using known_atom = caf::atom_constant<caf::atom("known")>;
using place_atom = caf::atom_constant<caf::atom("place")>;
using inspect_atom = caf::atom_constant<caf::atom("inspect")>;
using trace_atom = caf::atom_constant<caf::atom("trace")>;
// reporter events
using iteration_atom = caf::atom_constant<caf::atom("iteration")>;
using applied_atom = caf::atom_constant<caf::atom("applied")>;
using averaged_atom = caf::atom_constant<caf::atom("averaged")>;
using share_atom = caf::atom_constant<caf::atom("share")>;
using compute_atom = caf::atom_constant<caf::atom("compute")>;
using joined_atom = caf::atom_constant<caf::atom("joined")>;
using restart_atom = caf::atom_constant<caf::atom("restart")>;
using left_atom = caf::atom_constant<caf::atom("left")>;
using failure_atom = caf::atom_constant<caf::atom("failure")>;
using reload_atom = caf::atom_constant<caf::atom("reload")>;
using verdict_atom = caf::atom_constant<caf::atom("verdict")>;
using placed_atom = caf::atom_constant<caf::atom("placed")>;
using checkpoint_atom = caf::atom_constant<caf::atom("checkpoint")>;
using loaded_atom = caf::atom_constant<caf::atom("loaded")>;
using replica_atom = caf::atom_constant<caf::atom("replica")>;
using served_atom = caf::atom_constant<caf::atom("served")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;
using restore_atom = caf::atom_constant<caf::atom("restore")>;
using inflight_atom = caf::atom_constant<caf::atom("inflight")>;

/// Where a frame goes inside its destination host.
/// `link` is the links' own traffic in node mode (GOSSIP: who is where).
enum class service : std::int32_t { membership = 0, probe = 1, balancer = 2, stage = 3, link = 4, inspect = 5 };

/// Everything every host of a run knows before it starts (from cluster.yaml). Immutable,
/// shared by the hosts of one process.
struct cluster_spec {
  model::model_config model;
  model::training_config training;
  model::data_config data;
  routing::routing_config routing;
  fault_config faults;
  std::vector<host_config> hosts;     ///< every declared host (bootstrap list)
  std::vector<std::string> holders;   ///< data holders in config order (holder index)
  double time_scale = 1.0;            ///< emulated delays x this; 0 = no emulated delay
  std::int64_t max_message_bytes = 64 << 20;
  double activation_bytes = 0;        ///< one microbatch's activation, for edge costs
  std::string advertise;              ///< node mode: the address peers dial; empty: embedded
  /// Checkpoints (docs/checkpoints.md) go to data_dir/HOST/stage-S/; empty: none written.
  std::string data_dir;
  std::uint64_t checkpoint_hash = 0;  ///< deploy's checkpoint_hash of the config
  /// Founding hosts load a checkpoint at start: the one of `resume_at` when set, else
  /// their newest valid one. A host without a usable one joins and downloads the state.
  bool resume = false;
  std::optional<std::uint64_t> resume_at;
  /// --until N: stop after N iterations applied; the schedule stays training.iterations'.
  std::optional<std::uint64_t> until;
  /// Node mode with checkpoints and no launcher: a relay stage whose every replica is gone is
  /// restored by the hosts themselves (docs/checkpoints.md; launch restores it itself).
  bool self_restore = false;
  /// compression.mode: the type activations and their gradients travel in (float32: as
  /// computed; float16 / bfloat16: rounded for the wire, fp32 again at the receiver).
  wire::dtype activation_wire_type = wire::dtype::float32;
  /// compression.mode adaptive: when a link carries only the top-k values (with
  /// activation_wire_type float16); unset: every tensor travels whole.
  std::optional<routing::compression_policy> adaptive;
  /// placement.policy dtfm: what DT-FM reads (hosts' regions come from the membership view)
  /// and its region matrix; unset: the bottleneck rule.
  std::optional<routing::dtfm_request> dtfm;
  std::shared_ptr<const routing::network_matrix> dtfm_network;
  /// placement.relays / wait_ms: a founding stage-less relay places itself once it sees this
  /// many relays and every data holder of `holders` (or after wait_ms); 0: once its view settles.
  int placement_relays = 0;
  int placement_wait_ms = 60000;
  /// Iterations this run applies before it ends: training.iterations, or --until's N.
  std::uint64_t end_iteration() const {
    auto planned = static_cast<std::uint64_t>(training.iterations);
    return until ? std::min(*until, planned) : planned;
  }
};

/// Where `host` keeps its checkpoints (model/checkpoint.hpp's root).
std::string checkpoint_root(const cluster_spec& spec, const std::string& host);

/// The checkpoints `host` can serve from node.data_dir (its own and the copies peers pushed),
/// by file name (each is verified when it is served), the newest 8 per stage: what its
/// heartbeats tell peers for a restore of a lost stage.
std::vector<wire::held_checkpoint> checkpoint_inventory(const cluster_spec& spec, const std::string& host);

// --- link layer (one per process) ------------------------------------------------------
// (register_atom, host, int32 service, actor)   a host's actor for a service; monitored
// (send_atom, from, to, int32 service, frame)   carry a frame from -> to, delayed by the
//                                               emulated link; dropped if `to` is gone
// (slow_atom, host a, host b, double factor)    the link a <-> b turns `factor` x slower
// delivers: (deliver_atom, from, frame) to the registered actor of (to, service)
caf::actor spawn_link_layer(caf::actor_system& sys, routing::network_matrix net,
                            std::vector<host_config> hosts, double time_scale);

// --- TCP link (node mode: one host per process) -------------------------------------------
// The same handlers as the link layer above, for this process's one host, plus
// (subscribe_atom, actor)   sends it (known_atom, name) for every peer it finds (membership)
// and between the links of two processes, over CAF's middleman:
// (net_atom, from, to, int32 service, frame)   service::link carries GOSSIP (discovery)
struct net_link_options {
  host_config self;                         ///< this process's host
  std::string advertise;                    ///< "host:port" peers dial
  std::vector<std::string> bootstrap;       ///< dialled while no peer is connected
  std::uint64_t cluster = 0;                ///< hash every peer must share
  std::uint64_t incarnation = 0;            ///< raises on every start of the process
  std::optional<routing::network_matrix> network; ///< emulated delays, if any
  double time_scale = 1.0;                  ///< emulated delays x this
  std::int64_t max_message_bytes = 64 << 20;
  int connect_timeout_ms = 2000;            ///< a dial that takes longer fails
  int gossip_interval_ms = 500;             ///< gossip to a few peers, redial lost ones
  caf::actor reporter;                      ///< (failure_atom, host, what) for refused input
};
caf::actor spawn_net_link(caf::actor_system& sys, net_link_options opts);

// --- TCP guard (node mode) -------------------------------------------------------------
// Listens on node.listen and relays every connection to the middleman's private loopback
// port, closing one whose BASP frame header announces more than `max_payload` bytes
// (actors/frame_guard.hpp). (caf::get_atom) -> uint16 port it listens on, or the error.
// Dials the same way: (caf::connect_atom, host, uint16 port) connects to the peer (within
// `dial_timeout_ms`) and answers a one-time loopback port for the middleman to connect to;
// the peer's bytes are checked like an inbound connection's. Or the error, naming the peer.
struct net_guard_options {
  std::string host;               ///< address to bind
  /// node.tls: every inbound connection must complete mutual TLS with a certificate of the
  /// cluster CA before any byte reaches the middleman; null: plain TCP.
  std::shared_ptr<const tls_context> tls;
  /// node.tls, the client side: every dialled peer must present a certificate of the cluster
  /// CA, and is shown this host's. Null: dials are plain TCP.
  std::shared_ptr<const tls_context> tls_client;
  int dial_timeout_ms = 2000;     ///< a peer that does not accept the connection by then: failed
  int handshake_timeout_ms = 10000; ///< a TLS peer that has not finished its handshake by then is dropped
  std::uint16_t port = 0;         ///< 0 = any
  std::uint16_t inner_port = 0;   ///< the middleman's port on 127.0.0.1
  std::uint64_t max_payload = 0;  ///< largest frame payload accepted
  std::string host_name;          ///< this host, for reports
  caf::actor reporter;            ///< (failure_atom, host, what) per closed connection
};
caf::actor spawn_net_guard(caf::actor_system& sys, net_guard_options opts);

// --- inspection server (node mode) ---------------------------------------------------------
// Listens on node.inspect for the shell (`caf-gwtf shell`): frames of a 4-byte big-endian
// length and an encoded wire message; an INSPECT_REQUEST is answered with an INSPECT_REPLY
// from the host's supervisor. A frame above `max_frame` bytes, a bad frame or another message
// kind is logged with its address and closes that connection; the host goes on.
// (caf::get_atom) -> uint16 port it listens on, or the error.
struct inspect_server_options {
  std::string host;               ///< address to bind
  std::uint16_t port = 0;         ///< 0 = any
  caf::actor supervisor;          ///< the host's supervisor (supervisor_actor)
  std::string host_name;          ///< this host, for reports
  caf::actor reporter;            ///< (failure_atom, host, what) per refused connection
  int timeout_ms = 2000;          ///< the supervisor's answer must come within this
  bool control = false;           ///< node.inspect_control: obey `drain` and `crash`
  /// node.tls: the shell must complete mutual TLS with a certificate of the cluster CA first
  /// (`caf-gwtf shell --cert --key --ca`); null: plain TCP.
  std::shared_ptr<const tls_context> tls;
  int handshake_timeout_ms = 10000; ///< a TLS client that has not finished its handshake by then is dropped
};
caf::actor spawn_inspect_server(caf::actor_system& sys, inspect_server_options opts);

// --- metrics server (node mode, node.metrics) -------------------------------------------
// HTTP/1.x on node.metrics: GET /metrics (Prometheus text format, the supervisor's "metrics"
// view), /healthz (200 while the host's actors answer), /readyz (200 once the host holds
// valid weights of its stage, else 503). One request per connection; a request head above
// 8 KiB, or anything that is not a request line, gets 400 and the connection is closed.
// Options as for the inspection server. (caf::get_atom) -> uint16 port, or the error.
caf::actor spawn_metrics_server(caf::actor_system& sys, inspect_server_options opts);

// --- reporter (deploy/: the embedded cluster's driver) -----------------------------------
// receives, never answers:
// (iteration_atom, holder, u64 iteration, u32 microbatches, double loss_sum, u32 flows)
// (share_atom, host, u32 stage, u64 iteration, std::vector<u64> keys)  keys in its share
// (averaged_atom, host, u32 stage, u64 iteration, strvec contributors)  the replicas whose
//                                         (non-empty) shares the average used; may be empty
// (applied_atom, host, u32 stage, u64 iteration, u64 hash)  a step applied: weights hash after it
// (compute_atom, host, u64 iteration, double seconds, double wasted_seconds)
// (joined_atom, host, u64 steps, u64 bytes) a joiner or repaired replica loaded a state
// (placed_atom, host, i32 stage, std::string why)  a relay without a declared stage placed itself
// (peer_down_atom, host, peer)            a peer silent past the connection timeout
// (restart_atom, host, std::string child) a local actor was restarted
// (left_atom, host, std::string why)      the host left (restart budget spent, or asked)
// (failure_atom, host, std::string what)  an error a peer caused, handled and reported
// (reload_atom, host, std::string why)    a replica loads its stage state again by design
//                                         (it fell behind its replicas): not an error
// (verdict_atom, host, std::string what)  a replica shares again without the microbatches of
//                                         holders that stage 0 did not count (a dead holder's)
// (checkpoint_atom, host, u32 stage, u64 iteration, u64 bytes, double ms, std::string path)
//                                         a checkpoint written (iteration: steps applied)
// (loaded_atom, host, u32 stage, u64 iteration, u64 weights hash, std::string path)  resumed from a checkpoint
// (replica_atom, host, std::string owner, u32 stage, u64 iteration, u64 bytes, std::string path)
//                                         stored a copy of `owner`'s checkpoint
// (served_atom, host, std::string peer, u32 stage, u64 iteration, u64 bytes, std::string path)
//                                         sent a peer that resumes the checkpoint it asked for
// (restore_atom, host, u32 stage, u64 iteration, std::string restorer, i32 from_stage,
//  std::string decided_by, i32 next_stage)  node mode: a lost stage is restored; this process
//                                         starts again at `iteration`, at `next_stage` (-1: a
//                                         data holder); `decided_by` empty: decided here

// --- one host ------------------------------------------------------------------------
// The supervisor of a host spawns its membership, link probe, flow balancer and stage (or
// data holder) actors, restarts a failed one at most faults.max_restarts times within
// faults.restart_window_ms, and otherwise leaves cleanly. Their typed interfaces follow.
/// What membership tells its subscribers (link probe, balancer, compute).
using peer_listener_actor = caf::typed_actor<
    /// a peer is up at a stage (new, back, moved; -1: it withdrew while downloading a state)
    caf::reacts_to<peer_up_atom, std::string, std::int32_t>,
    /// a peer is down (silent past the connection timeout, or it left)
    caf::reacts_to<peer_down_atom, std::string>,
    /// the peer drained and left (its peer_down follows): its shares stay counted
    caf::reacts_to<left_atom, std::string>>;

/// A host's supervisor (actors/host.cpp): spawns, restarts and stops the host's actors.
using supervisor_actor = caf::typed_actor<
    /// fault injection: "any" kills the host now; "forward"/"backward" arm a crash in the
    /// stage's next such computation; "actor" fails the stage actor (supervision restarts);
    /// "process" kills the whole process with SIGKILL (the shell's `crash`, node mode)
    caf::reacts_to<crash_atom, std::string>,
    /// leave gracefully: the stage drains, then LEAVE (after a hop timeout, leave anyway)
    caf::reacts_to<stop_atom>,
    /// the stage drained (true), or the drain timed out (false, internal)
    caf::reacts_to<drained_atom, bool>,
    /// membership: this host was frozen past the connection timeout; restart as a new replica
    caf::reacts_to<restart_atom, std::string>,
    /// the compute (a data holder): relay stage S has had no live replica for the restore
    /// delay while iteration I could not finish; to membership (node mode's self-restore)
    caf::reacts_to<restore_atom, std::uint32_t, std::uint64_t>,
    /// the stage holds valid weights (>= 0) or downloads them (-1)
    caf::reacts_to<stage_atom, std::int32_t>,
    /// internal: poll membership until the view settles, then place this stage-less relay
    caf::reacts_to<place_atom>,
    /// the inspection shell: answers a query (status, hosts, flows, ...) with a JSON document
    /// gathered from the host's actors, or an error naming what is wrong (docs/shell.md)
    caf::replies_to<inspect_atom, std::string>::with<std::string>,
    /// INSPECT frames from peers: a shell attached to a peer asks this host (`use HOST`), or
    /// this host's answer from a peer comes back
    caf::reacts_to<deliver_atom, std::string, wire_frame>,
    /// internal: the trace with this serial ends
    caf::reacts_to<trace_atom, std::uint64_t>,
    /// internal: the query relayed to a peer with this id is past its time
    caf::reacts_to<timeout_atom, std::uint64_t>,
    /// internal: LEAVE went out, quit
    caf::reacts_to<done_atom>>;

/// Membership of a host (actors/host.cpp): HELLO heartbeats, failure suspicion by silence.
using membership_actor = caf::typed_actor<
    /// MEMBERSHIP frames from the link: HELLO, LEAVE
    caf::reacts_to<deliver_atom, std::string, wire_frame>,
    /// for a relay placing itself: the live placed peers as flat (stage, capacity) pairs, the
    /// live relays without a stage (names, capacities), and for DT-FM the placed peers' names
    /// and regions and the stage-less relays' regions
    caf::replies_to<place_atom>::with<std::vector<std::int32_t>, std::vector<std::string>, std::vector<std::int32_t>,
                                      std::vector<std::string>, std::vector<std::string>, std::vector<std::string>>,
    /// node mode: the link found a peer by this name (introduce ourselves to it)
    caf::reacts_to<known_atom, std::string>,
    /// tell this actor of every peer up/down/left from now on (and the live ones now)
    caf::reacts_to<subscribe_atom, peer_listener_actor>,
    /// announce a new stage (-1 while a state download runs)
    caf::reacts_to<stage_atom, std::int32_t>,
    /// send LEAVE (drained or not) to every live peer
    caf::reacts_to<stop_atom, bool>,
    /// a data holder's compute: relay stage S is lost while iteration I stalls; the deciding
    /// holder plans the restore and sends RESTORE to every live peer (docs/checkpoints.md)
    caf::reacts_to<restore_atom, std::uint32_t, std::uint64_t>,
    /// the inspection shell: this actor's state as a JSON object (docs/shell.md)
    caf::replies_to<inspect_atom>::with<std::string>,
    /// internal: heartbeat, suspicion, frozen check
    caf::reacts_to<tick_atom>>;

/// The flow balancer of a host (actors/host.cpp around routing::flow_balancer): pushes its
/// routing table to the stage (flows_atom).
using balancer_actor = peer_listener_actor::extend<
    /// BALANCER frames from the link: the flow protocol
    caf::reacts_to<deliver_atom, std::string, wire_frame>,
    /// link probe: one-way latency (s) and bandwidth (bytes/s) to a peer
    caf::reacts_to<latency_atom, std::string, double, double>,
    /// the stage holds valid weights: start balancing
    caf::reacts_to<ready_atom>,
    /// the compute: (data holders, next hops) of the microbatches it sent on and has not had
    /// the backward of (routing.gwtf.idle_moves: moves leave those flows alone meanwhile)
    caf::reacts_to<inflight_atom, std::vector<std::string>, std::vector<std::string>>,
    /// the inspection shell: flows, ring costs and measured links as a JSON object
    caf::replies_to<inspect_atom>::with<std::string>,
    /// internal: the balancer tick
    caf::reacts_to<tick_atom>>;

/// The link probe of a host (actors/host.cpp): PING/PONG to live peers, measurements to the
/// balancer.
using probe_actor = peer_listener_actor::extend<
    /// PROBE frames from the link: PING, PONG
    caf::reacts_to<deliver_atom, std::string, wire_frame>,
    /// the compute: its seconds per microbatch (forward + backward), told to peers in PONGs
    caf::reacts_to<compute_atom, double>,
    /// the inspection shell: round trips per peer as a JSON object
    caf::replies_to<inspect_atom>::with<std::string>,
    /// internal: probe every live peer
    caf::reacts_to<tick_atom>>;

/// The compute of a host (actors/stage_actor.cpp): a relay stage, or a data holder (stage 0,
/// the iteration loop). Drains on stop_atom, then sends (drained_atom, true) to the supervisor.
using compute_actor = peer_listener_actor::extend<
    /// STAGE frames from the link: ACTIVATION, HOP_PROGRESS, ITERATION_DONE, GRADIENT_CHUNK,
    /// NORM_SHARE, REPLICA_HASH, STATE_REQUEST, STATE_CHUNK (anything else is reported)
    caf::reacts_to<deliver_atom, std::string, wire_frame>,
    /// balancer: its routing table, built flows as (targets, prevs, nexts)
    caf::reacts_to<flows_atom, std::vector<std::string>, std::vector<std::string>, std::vector<std::string>>,
    /// supervisor: "forward"/"backward" arm an injected crash, "actor" fails this actor
    caf::reacts_to<crash_atom, std::string>,
    /// supervisor: drain (finish and share its part of the iteration in progress, start none)
    caf::reacts_to<stop_atom>,
    /// a carrier: send origin `key` again to `to` as attempt `attempt`, with a next-next hint
    caf::reacts_to<resend_atom, std::uint64_t, std::string, std::uint32_t, std::string>,
    /// internal (data holder): begin the next iteration once a flow exists
    caf::reacts_to<start_atom>,
    /// the inspection shell: stage, iteration, replicas and microbatches as a JSON object
    caf::replies_to<inspect_atom>::with<std::string>,
    /// internal: the stall watch of an iteration
    caf::reacts_to<tick_atom, std::uint64_t>,
    /// internal: the state download watchdog (transfer id, bytes had at arming)
    caf::reacts_to<timeout_atom, std::uint64_t, std::uint64_t>,
    /// internal: every source was asked for the stage state once and none had it: a new round
    caf::reacts_to<fetch_atom>,
    /// link probe: a peer's bandwidth (bytes per wall second) and its compute seconds per
    /// microbatch (0: unknown), for adaptive compression
    caf::reacts_to<latency_atom, std::string, double, double>,
    /// supervisor: the host's link probe, to be told this stage's compute per microbatch
    caf::reacts_to<probe_atom, probe_actor>,
    /// supervisor: the host's balancer, to be told the flows with microbatches in flight
    caf::reacts_to<flows_atom, balancer_actor>,
    /// its checkpoint writer: the checkpoint of this iteration is on disk
    caf::reacts_to<checkpoint_atom, std::uint64_t>,
    /// internal (data holder, self-restore): is relay stage S still lost and iteration I stalled?
    caf::reacts_to<restore_atom, std::uint32_t, std::uint64_t>>;

/// One in-flight microbatch of a data holder: owns its first hop, attempt and timeout, and
/// asks the holder (resend_atom) to send it again.
using carrier_actor = caf::typed_actor<
    /// a host died; the live stage-1 hosts to choose a replacement first hop from
    caf::reacts_to<peer_down_atom, std::string, std::vector<std::string>>,
    /// HOP_PROGRESS: where the first hop sent it (the re-send hint)
    caf::reacts_to<progress_atom, std::string>,
    /// the microbatch finished: the carrier quits
    caf::reacts_to<done_atom>,
    /// internal: the hop timeout of attempt n
    caf::reacts_to<timeout_atom, std::uint32_t>>;

class freeze_watch; // actors/freeze_watch.hpp

/// A host: its supervisor (crash_atom and stop_atom are the deploy layer's controls).
/// `watch` (node mode): the process's freeze watch, which silences the host after a freeze.
caf::actor spawn_host(caf::actor_system& sys, std::shared_ptr<const cluster_spec> spec,
                      host_config host, caf::actor link_layer, caf::actor reporter,
                      bool joining, std::shared_ptr<freeze_watch> watch = nullptr);

} // namespace gwtf::actors
