// Internal to actors/host/: the actors a host's supervisor starts (membership, link probe,
// flow balancer; the compute is actors/compute/), each behind a spawn function, and the
// clock they share. Not part of the public interface (actors/interfaces.hpp: spawn_host).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "actors/host/host_internal.hpp"

namespace gwtf::actors {

using ctx_ptr = std::shared_ptr<const host_context>;
using host_clock = std::chrono::steady_clock;

inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(host_clock::now().time_since_epoch()).count();
}

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(host_clock::now().time_since_epoch()).count();
}

/// The host's membership (actors/host/membership.cpp), linked to `parent`.
membership_actor spawn_membership(caf::local_actor* parent, ctx_ptr ctx, supervisor_actor supervisor);

/// The host's link probe (actors/host/probe.cpp), linked to `parent`.
probe_actor spawn_probe(caf::local_actor* parent, ctx_ptr ctx, balancer_actor balancer, compute_actor compute);

/// The host's flow balancer (actors/host/balancer_actor.cpp), linked to `parent`.
balancer_actor spawn_balancer(caf::local_actor* parent, ctx_ptr ctx, compute_actor compute);

} // namespace gwtf::actors
