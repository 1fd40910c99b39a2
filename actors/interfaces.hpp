// The actors of one virtual host and their message interfaces (docs/runtime.md).
//
// Hosts talk only through wire messages (messages/types.hpp) that the link layer carries
// as encoded frames; inside a host, actors talk with the local messages listed here. Every
// actor is a thin shell: the decisions live in pure cores (hop_ledger, membership_view,
// iteration_barrier, link_emulator, routing::flow_balancer, model::stage).
//
// The actors of a host have typed interfaces (supervisor_actor, membership_actor,
// probe_actor, balancer_actor, compute_actor, carrier_actor below: CAF checks every send to
// them at compile time), and so do the link layers and the reporter, which actors/net/ and
// app/ provide (actors/protocols.hpp). Atoms: actors/atoms.hpp. The run's spec: actors/cluster_spec.hpp. The link layers, guard,
// inspection and metrics servers each have their header in actors/net/ and actors/inspect/.
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

#include "actors/atoms.hpp"
#include "actors/cluster_spec.hpp"
#include "actors/protocols.hpp"
#include "actors/net/wire_frame.hpp"

namespace gwtf::actors {

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

/// A host's supervisor (actors/host/supervisor.cpp): spawns, restarts and stops the host's actors.
using supervisor_actor = caf::typed_actor<
    /// fault injection: "any" kills the host now; "forward"/"backward" arm a crash in the
    /// stage's next such computation; "actor" fails the stage actor (supervision restarts);
    /// "process" kills the whole process with SIGKILL (the shell's `crash`, node mode)
    caf::reacts_to<crash_atom, std::string>,
    /// leave gracefully: the stage drains, then LEAVE (after a hop timeout, leave anyway)
    caf::reacts_to<stop_atom>,
    /// the stage drained (true), or the drain timed out (false, internal)
    caf::reacts_to<drained_atom, bool>,
    /// the compute (a relay, routing.router swarm): SWARM's rebalancing moves this host to
    /// stage S (why): it drains, leaves its stage and starts again at S, downloading its state
    caf::reacts_to<move_atom, std::int32_t, std::string>,
    /// internal: the drain before move N took a hop timeout: it moves anyway
    caf::reacts_to<move_atom, std::uint64_t>,
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

/// Membership of a host (actors/host/membership.cpp): HELLO heartbeats, failure suspicion by silence.
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

/// The flow balancer of a host (actors/host/balancer_actor.cpp around routing::flow_balancer): pushes its
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

/// The link probe of a host (actors/host/probe.cpp): PING/PONG to live peers, measurements to the
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

/// The compute of a host (actors/compute/stage_actor.cpp): a relay stage, or a data holder (stage 0,
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
    caf::reacts_to<peer_speed_atom, std::string, double, double>,
    /// supervisor: the host's link probe, to be told this stage's compute per microbatch
    caf::reacts_to<probe_atom, probe_actor>,
    /// supervisor: the host's balancer, to be told the flows with microbatches in flight
    caf::reacts_to<balancer_handle_atom, balancer_actor>,
    /// its checkpoint writer: the checkpoint of this iteration is on disk
    caf::reacts_to<checkpoint_atom, std::uint64_t>,
    /// internal (data holder, self-restore): is relay stage S still lost and iteration I stalled?
    caf::reacts_to<lost_stage_atom, std::uint32_t, std::uint64_t>,
    /// internal (data holder, routing.router swarm): the timeout of call N of microbatch KEY
    caf::reacts_to<call_atom, std::uint64_t, std::uint32_t>>;

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

class freeze_watch; // actors/core/freeze_watch.hpp

/// A host: its supervisor (crash_atom and stop_atom are app/'s controls).
/// `watch` (node mode): the process's freeze watch, which silences the host after a freeze.
supervisor_actor spawn_host(caf::actor_system& sys, std::shared_ptr<const cluster_spec> spec,
                      host_config host, link_actor link_layer, reporter_actor reporter,
                      bool joining, std::shared_ptr<freeze_watch> watch = nullptr);

} // namespace gwtf::actors
