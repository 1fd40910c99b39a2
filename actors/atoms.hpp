// The atoms of the messages between a host's actors, its link and the reporter, and the
// services a frame can be addressed to (actors/interfaces.hpp and actors/protocols.hpp say who
// sends what).
#pragma once

#include <cstdint>

#include <caf/atom.hpp>

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
using closed_atom = caf::atom_constant<caf::atom("closed")>;
using certified_atom = caf::atom_constant<caf::atom("certified")>;
using bulk_atom = caf::atom_constant<caf::atom("bulk")>;
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
// One meaning per atom: the link probe tells the compute a peer's speed (bandwidth, compute per
// microbatch) with peer_speed_atom, the balancer a link's estimate (latency, bandwidth) with
// latency_atom; the supervisor hands the compute its balancer with balancer_handle_atom (the
// balancer's routing table is flows_atom); the compute asks itself whether a stage is still lost
// with lost_stage_atom (restore_atom plans a restore at membership).
using peer_speed_atom = caf::atom_constant<caf::atom("peerspeed")>;
using balancer_handle_atom = caf::atom_constant<caf::atom("balhandle")>;
using lost_stage_atom = caf::atom_constant<caf::atom("loststage")>;
using call_atom = caf::atom_constant<caf::atom("swarmcall")>;
/// SWARM's rebalancing: a relay's compute asks its supervisor to move it to another stage.
using move_atom = caf::atom_constant<caf::atom("stagemove")>;

/// Where a frame goes inside its destination host.
/// `link` is the links' own traffic in node mode (GOSSIP: who is where).
enum class service : std::int32_t { membership = 0, probe = 1, balancer = 2, stage = 3, link = 4, inspect = 5 };

} // namespace gwtf::actors
