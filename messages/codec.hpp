// The only code that touches Cap'n Proto builders and readers: plain structs <-> bytes.
// Every decoder treats its input as hostile and reports a typed failure, never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

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
  wrong_kind,          ///< a valid envelope holding another message type
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

/// Role of a peer as it travels on the wire.
enum class peer_role : std::uint8_t { data_holder, relay };

/// Membership introduction (wire.capnp Hello).
struct hello {
  std::string peer_id;          ///< unique host name, 1..64 bytes
  std::string address;          ///< "host:port", 1..255 bytes
  peer_role role = peer_role::relay;
  std::int32_t stage = -1;      ///< -1 while unplaced, else 0..1023
  std::uint32_t capacity = 0;   ///< 1..1'000'000
  std::uint64_t incarnation = 0;
};

/// Membership departure (wire.capnp Leave).
struct leave {
  std::string peer_id;            ///< unique host name, 1..64 bytes
  std::uint64_t incarnation = 0;  ///< the incarnation it announced
};

/// Serialises a hello into one envelope (word-aligned flat Cap'n Proto bytes).
std::vector<std::uint8_t> encode(const hello& msg);

/// Serialises a leave into one envelope.
std::vector<std::uint8_t> encode(const leave& msg);

/// Decodes an envelope that must hold a hello.
std::variant<hello, wire_failure> decode_hello(const std::uint8_t* data, std::size_t size,
                                               const decode_limits& limits = {});

/// Decodes an envelope that must hold a leave.
std::variant<leave, wire_failure> decode_leave(const std::uint8_t* data, std::size_t size,
                                               const decode_limits& limits = {});

} // namespace gwtf::wire
