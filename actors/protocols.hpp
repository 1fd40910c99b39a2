// The link and reporter protocols as typed interfaces: the compiler checks every send to a
// link layer, to a reporter and to whatever the link hands frames to (docs/runtime.md).
// The actors of one host and their interfaces: actors/interfaces.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/typed_actor.hpp>

#include "actors/atoms.hpp"
#include "actors/net/wire_frame.hpp"

namespace gwtf::actors {

// --- what the link hands frames to -------------------------------------------------------
/// A host's actor for one service (membership, probe, balancer, stage, inspect): the link
/// delivers it the frames addressed to (its host, its service).
using frame_sink_actor = caf::typed_actor<
    /// a frame from peer `from`
    caf::reacts_to<deliver_atom, std::string, wire_frame>>;

/// Who learns of the peers a node-mode link finds (membership).
using peer_finder_actor = caf::typed_actor<
    /// the link found a peer by this name (introduce ourselves to it)
    caf::reacts_to<known_atom, std::string>>;

// --- link layer (one per process: actors/net/link_layer.hpp, net_link.hpp) ----------------
/// What every link takes from the hosts of its process and from app/.
using link_actor = caf::typed_actor<
    /// (host, service, actor): a host's actor for a service; monitored
    caf::reacts_to<register_atom, std::string, std::int32_t, frame_sink_actor>,
    /// (from, to, service, frame): carry a frame from -> to, delayed by the emulated link;
    /// dropped if `to` is gone
    caf::reacts_to<send_atom, std::string, std::string, std::int32_t, wire_frame>,
    /// (host a, host b, factor): the link a <-> b turns `factor` x slower
    caf::reacts_to<slow_atom, std::string, std::string, double>,
    /// the host restarted as a new incarnation (embedded: nothing to do)
    caf::reacts_to<restart_atom, std::uint64_t>,
    /// tell this actor of every peer the link finds (node mode; embedded: none are found)
    caf::reacts_to<subscribe_atom, peer_finder_actor>,
    /// the shell's slow-link control from this process's host: the link to `peer` turns
    /// `factor` x slower; answers empty when done, else why not (the embedded link says why
    /// not: the embedded shell's front slows its links itself)
    caf::replies_to<slow_atom, caf::get_atom, std::string, double>::with<std::string>>;

/// The TCP link of node mode (actors/net/net_link.hpp): one host per process.
using net_link_actor = link_actor::extend<
    /// (advertise, transport): spawned before it listens; starts it with the address peers
    /// dial and the transport that owns its connections (actors/net/peer_transport.hpp)
    caf::reacts_to<start_atom, std::string, caf::actor>,
    /// from the transport: (connection, service, introduction, frame) arrived; service::link
    /// carries GOSSIP (discovery), an introduction is the first one of a dialling peer
    caf::reacts_to<net_atom, std::uint64_t, std::int32_t, bool, wire_frame>,
    /// from the transport: (connection, why) ended
    caf::reacts_to<closed_atom, std::uint64_t, std::string>,
    /// from the transport, with TLS: (connection, the host names its certificate carries),
    /// before the connection's first frame
    caf::reacts_to<certified_atom, std::uint64_t, std::vector<std::string>>,
    /// internal: gossip to a few peers, redial lost ones
    caf::reacts_to<tick_atom>>;

// --- reporter (app/: the driver of the embedded cluster and launch; the node reporter) ----
/// Who takes the reports of refused input (net guard, inspection and metrics servers).
using failure_sink_actor = caf::typed_actor<
    /// (host, what): an error a peer caused, handled and reported
    caf::reacts_to<failure_atom, std::string, std::string>>;

/// What a host reports. Never answers.
using reporter_actor = failure_sink_actor::extend<
    /// (holder, iteration, microbatches, loss sum, flows)
    caf::reacts_to<iteration_atom, std::string, std::uint64_t, std::uint32_t, double, std::uint32_t>,
    /// (host, stage, iteration, keys): the microbatch keys in its share
    caf::reacts_to<share_atom, std::string, std::uint32_t, std::uint64_t, std::vector<std::uint64_t>>,
    /// (host, stage, iteration, contributors, digests): the replicas whose (non-empty) shares
    /// the average used, may be empty; each one's share key digest (actors/core/key_digest)
    caf::reacts_to<averaged_atom, std::string, std::uint32_t, std::uint64_t, std::vector<std::string>,
                   std::vector<std::uint64_t>>,
    /// (host, stage, iteration, hash): a step applied, the weights hash after it
    caf::reacts_to<applied_atom, std::string, std::uint32_t, std::uint64_t, std::uint64_t>,
    /// (host, iteration, seconds, wasted seconds)
    caf::reacts_to<compute_atom, std::string, std::uint64_t, double, double>,
    /// (host, steps, bytes): a joiner or repaired replica loaded a state
    caf::reacts_to<joined_atom, std::string, std::uint64_t, std::uint64_t>,
    /// (host, stage, why): a relay without a declared stage placed itself
    caf::reacts_to<placed_atom, std::string, std::int32_t, std::string>,
    /// (host, peer): a peer silent past the connection timeout
    caf::reacts_to<peer_down_atom, std::string, std::string>,
    /// (host, child): a local actor was restarted
    caf::reacts_to<restart_atom, std::string, std::string>,
    /// (host, why): the host left (restart budget spent, or asked)
    caf::reacts_to<left_atom, std::string, std::string>,
    /// (host, why): a replica loads its stage state again by design (it fell behind its
    /// replicas): not an error
    caf::reacts_to<reload_atom, std::string, std::string>,
    /// (host, what): a replica shares again without the microbatches of holders that stage 0
    /// did not count (a dead holder's)
    caf::reacts_to<verdict_atom, std::string, std::string>,
    /// (host, stage, iteration, bytes, ms, path): a checkpoint written (iteration: steps applied)
    caf::reacts_to<checkpoint_atom, std::string, std::uint32_t, std::uint64_t, std::uint64_t, double, std::string>,
    /// (host, stage, iteration, weights hash, path): resumed from a checkpoint
    caf::reacts_to<loaded_atom, std::string, std::uint32_t, std::uint64_t, std::uint64_t, std::string>,
    /// (host, owner, stage, iteration, bytes, path): stored a copy of `owner`'s checkpoint
    caf::reacts_to<replica_atom, std::string, std::string, std::uint32_t, std::uint64_t, std::uint64_t, std::string>,
    /// (host, peer, stage, iteration, bytes, path): sent a peer that resumes the checkpoint it
    /// asked for
    caf::reacts_to<served_atom, std::string, std::string, std::uint32_t, std::uint64_t, std::uint64_t, std::string>,
    /// (host, stage, iteration, restorer, from stage, decided by, next stage): node mode, a
    /// lost stage is restored; this process starts again at `iteration`, at `next_stage` (-1:
    /// a data holder); `decided_by` empty: decided here
    caf::reacts_to<restore_atom, std::string, std::uint32_t, std::uint64_t, std::string, std::int32_t, std::string,
                   std::int32_t>>;

} // namespace gwtf::actors
