// How wire messages travel between hosts inside CAF: as one opaque frame of Cap'n Proto
// bytes (messages/codec.hpp). CAF serialises only the byte vector; the content is decoded,
// with limits, by the receiving actor. Why: one versioned, language-neutral format on the
// wire, validated in one place, instead of CAF's own serialisation of every C++ struct.
#pragma once

#include <cstdint>
#include <vector>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/net/peer_framing.hpp"
#include "messages/codec.hpp"

namespace gwtf::actors {

/// One encoded wire::message.
struct wire_frame {
  std::vector<std::uint8_t> bytes;
};

/// CAF 0.17 inspection: the frame is its bytes.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_frame& x) {
  return f(caf::meta::type_name("gwtf::wire_frame"), x.bytes);
}

/// The lane of one frame of `service` (peer_framing::lane_of), except a membership LEAVE or
/// RESTORE, which goes bulk so that it does not overtake what its host sent the peer before
/// it (its last gradient share: a peer that heard the LEAVE first would wait for that share
/// in vain). The transport and the emulated network (actors/net/link_emulator.hpp) both ask.
peer_framing::lane lane_of(std::int32_t service, const wire_frame& frame);

/// Encodes a message into a frame.
wire_frame make_frame(const wire::message& msg);

/// Decodes a frame with `limits`; a bad frame becomes a `malformed_message` (or
/// `protocol_mismatch` for another version) error naming what was wrong. Never throws.
caf::expected<wire::message> open_frame(const wire_frame& frame, const wire::decode_limits& limits);

/// Same, taking the frame's bytes over: decoded tensors point into them (no copy).
caf::expected<wire::message> open_frame(wire_frame&& frame, const wire::decode_limits& limits);

} // namespace gwtf::actors
