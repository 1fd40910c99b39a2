// The project's error codes as CAF errors (category "gwtf"). Inside actors, errors are
// values: handlers return caf::error / caf::expected, never throw.
#pragma once

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/sec.hpp>

namespace gwtf::actors {

/// Error codes of category `error_category`.
enum class ec : std::uint8_t {
  invalid_config = 1,  ///< a config value was rejected
  malformed_message,   ///< bytes from a peer failed to decode or validate
  protocol_mismatch,   ///< a peer speaks an incompatible protocol version
  over_capacity,       ///< admission would exceed a host's capacity
  unknown_peer,        ///< a message names a peer this host does not know
  peer_unreachable,    ///< a peer stopped answering or its connection dropped
  restart_limit,       ///< a local actor failed more often than the policy allows
  frozen,              ///< this host was frozen (SIGSTOP) past the connection timeout
  bad_query,           ///< the inspection shell asked for something this host does not answer
};

/// CAF category atom for `ec`.
constexpr caf::atom_value error_category = caf::atom("gwtf");

/// Name of an error code, e.g. "malformed_message".
std::string to_string(ec code);

/// Makes `ec` usable wherever CAF expects an error.
caf::error make_error(ec code);

/// Same, with a human-readable context message.
caf::error make_error(ec code, std::string context);

/// The sentence for an error a shell sees: the context of a gwtf error, "the host did not
/// answer in time" for a timeout, else CAF's rendering.
std::string shell_text(const caf::error& e);

} // namespace gwtf::actors
