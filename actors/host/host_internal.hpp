// Shared by the actors of one host (not part of the public interface).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <caf/check_typed_input.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "actors/inspect/actor_meter.hpp"
#include "actors/core/fragments.hpp"
#include "actors/core/freeze_watch.hpp"
#include "actors/interfaces.hpp"
#include "actors/net/wire_frame.hpp"
#include "messages/codec.hpp"

namespace gwtf::actors {

/// What a host's actors share.
/// `self` tells the link or the reporter. A typed actor (compute_actor) sends anonymously, as
/// it would have to to a dynamically typed actor; nobody reads the sender of these messages.
/// Either way CAF checks the message against `dest`'s interface (actors/protocols.hpp).
template <class Self, class Dest, class... Ts>
void tell(Self* self, const Dest& dest, Ts&&... xs) {
  if constexpr (caf::statically_typed<Self>())
    caf::anon_send(dest, std::forward<Ts>(xs)...);
  else
    self->send(dest, std::forward<Ts>(xs)...);
}

/// The largest piece of a tensor, or of a message in pieces, on the wire: node.chunk_bytes
/// (validation keeps it at most half a frame; so does this, for a spec built by hand).
inline std::size_t wire_chunk_bytes(const cluster_spec& spec) {
  return static_cast<std::size_t>(
    std::clamp<std::int64_t>(spec.chunk_bytes, 1024, std::max<std::int64_t>(1024, spec.max_message_bytes / 2)));
}

/// A number for a message sent in pieces, never the same twice in this process, and counted
/// from the clock's nanoseconds at its start: a process started again does not reuse the
/// numbers of its previous run (whose pieces a peer may still hold).
inline std::uint64_t next_message_id() {
  static std::atomic<std::uint64_t> next{
    static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count())};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct host_context {
  std::shared_ptr<const cluster_spec> spec;
  host_config host;
  int stage = 0; ///< 0 for data holders
  link_actor link;
  reporter_actor reporter;
  bool joining = false;
  std::uint64_t incarnation = 0;
  /// Node mode: the process's freeze watch (app/run/node.cpp). Once it saw a gap longer than
  /// the connection timeout the host neither sends nor opens a frame: its peers declared it
  /// dead, and its supervisor is about to start it again as a new replica.
  std::shared_ptr<freeze_watch> watch;
  /// What the shell's `actors`, `top` and `trace` read: messages each actor handled.
  std::shared_ptr<const host_meters> meters;

  /// Meters `self` as the host's actor `name` (first thing in its behavior function).
  template <class Self>
  void meter(Self* self, const std::string& name) const {
    if (meters)
      self->meter(meters->of(name), meters);
  }

  bool frozen() const { return watch && watch->frozen(steady_ms()); }
  /// Node mode, started with plain --resume: the host loads nothing until the cluster agreed
  /// on the iteration to resume at (docs/checkpoints.md), then starts again with --resume-at.
  bool awaits_cut() const { return spec->self_restore && spec->resume && !spec->resume_at && !joining; }
  /// Frozen, or silenced for a restore (the process starts again in a moment).
  bool mute() const { return watch && (watch->silenced() || watch->frozen(steady_ms())); }

  /// Encodes `msg` and hands it to the link layer for `to`'s `svc` (nothing when frozen). A
  /// message above the frame limit goes as FRAGMENTs of node.chunk_bytes, one after the other
  /// (docs/runtime.md, "Messages in pieces").
  template <class Self>
  void send(Self* self, const std::string& to, service svc,
            const wire::message& msg) const {
    if (mute())
      return;
    auto frame = make_frame(msg);
    if (frame.bytes.size() <= static_cast<std::size_t>(spec->max_message_bytes)) {
      tell(self, link, send_atom::value, host.name, to, static_cast<std::int32_t>(svc), std::move(frame));
      return;
    }
    for (auto& piece : cut_message(frame.bytes, next_message_id(), wire_chunk_bytes(*spec)))
      tell(self, link, send_atom::value, host.name, to, static_cast<std::int32_t>(svc),
           make_frame(wire::message{std::move(piece)}));
  }
  /// Decodes a frame from a peer; a bad one is reported, never thrown.
  template <class Self>
  std::optional<wire::message> open(Self* self, const std::string& from,
                                    wire_frame&& frame) const {
    if (mute())
      return std::nullopt; // what arrived for the written-off incarnation
    wire::decode_limits limits;
    limits.max_bytes = static_cast<std::size_t>(spec->max_message_bytes);
    auto msg = open_frame(std::move(frame), limits);
    if (!msg) {
      tell(self, reporter, failure_atom::value, host.name,
                 "bad frame from " + from + ": " + self->system().render(msg.error()));
      return std::nullopt;
    }
    return std::move(*msg);
  }
};

/// The self pointer of a host's actor of interface `Handle` with state `State`: metered.
template <class Handle, class State>
using metered_ptr = caf::stateful_actor<State, metered<typename Handle::base>>*;

/// The stage (relay) or data-holder actor of a host (actors/compute/stage_actor.cpp, LibTorch).
/// The host's compute actor, linked to `parent` (its supervisor).
compute_actor spawn_compute(caf::local_actor* parent, supervisor_actor supervisor,
                            std::shared_ptr<const host_context> ctx);

} // namespace gwtf::actors
