// The only code that touches Cap'n Proto builders and readers: wire messages <-> bytes.
// Every decoder treats its input as hostile and reports a typed failure, never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::wire {

/// Version this build speaks (wire.capnp, protocolVersion).
std::uint16_t protocol_version();

/// Why a decode failed.
enum class wire_error {
  too_large,           ///< over the configured size limit, not read
  truncated,           ///< shorter than its own segment table says
  malformed,           ///< Cap'n Proto rejected the structure (pointers, limits)
  bad_magic,           ///< not a caf-gwtf envelope
  unsupported_version, ///< a protocol version this build does not speak
  bad_enum,            ///< an enum value outside its range
  bad_field,           ///< a field outside its documented range
  wrong_kind,          ///< a valid envelope holding another message type than required
};

/// Name of a wire_error, e.g. "truncated".
const char* to_string(wire_error e);

/// A decode failure: code plus what exactly was wrong.
struct wire_failure {
  wire_error code = wire_error::malformed; ///< category
  std::string detail;                      ///< which field and why
};

/// Limits applied before and while decoding.
struct decode_limits {
  std::size_t max_bytes = 64u << 20; ///< whole message, checked before parsing
};

/// Serialises a message into one envelope (flat, word-aligned Cap'n Proto bytes). Tensor
/// bytes are referenced in place by the builder and copied once, into the result.
std::vector<std::uint8_t> encode(const message& msg);

/// Same, into `out`, reusing its capacity: a sender that keeps its buffer pays no page
/// faults for large tensors.
void encode(const message& msg, std::vector<std::uint8_t>& out);

/// Decodes and validates any envelope. Tensor bytes are copied once, out of `data`.
std::variant<message, wire_failure> decode(const std::uint8_t* data, std::size_t size,
                                           const decode_limits& limits = {});

/// Decodes a frame the caller hands over: tensor payloads point into `frame` and keep it
/// alive, so tensor bytes are not copied at all (when the frame is word-aligned, as vector
/// storage is).
std::variant<message, wire_failure> decode(std::shared_ptr<const std::vector<std::uint8_t>> frame,
                                           const decode_limits& limits = {});

/// The kind of message an envelope holds ("activation", ...) without decoding its body:
/// for logs and traces. "not a wire message" for bytes that are no valid envelope.
std::string peek_kind(const std::uint8_t* data, std::size_t size);

/// Decodes an envelope that must hold a `T`; another valid kind is `wrong_kind`.
template <class T>
std::variant<T, wire_failure> decode_as(const std::uint8_t* data, std::size_t size,
                                        const decode_limits& limits = {}) {
  auto r = decode(data, size, limits);
  if (auto* f = std::get_if<wire_failure>(&r))
    return *f;
  auto& m = std::get<message>(r);
  if (auto* v = std::get_if<T>(&m))
    return std::move(*v);
  return wire_failure{wire_error::wrong_kind, std::string{"got "} + kind_name(m)};
}

} // namespace gwtf::wire
