#include "actors/errors.hpp"

#include <caf/make_message.hpp>

namespace gwtf::actors {

std::string to_string(ec code) {
  switch (code) {
    case ec::invalid_config: return "invalid_config";
    case ec::malformed_message: return "malformed_message";
    case ec::protocol_mismatch: return "protocol_mismatch";
    case ec::over_capacity: return "over_capacity";
    case ec::unknown_peer: return "unknown_peer";
    case ec::peer_unreachable: return "peer_unreachable";
    case ec::restart_limit: return "restart_limit";
    case ec::frozen: return "frozen";
    case ec::bad_query: return "bad_query";
  }
  return "unknown_error_" + std::to_string(static_cast<int>(code));
}

caf::error make_error(ec code) {
  return caf::error{static_cast<std::uint8_t>(code), error_category};
}

caf::error make_error(ec code, std::string context) {
  return caf::error{static_cast<std::uint8_t>(code), error_category,
                    caf::make_message(std::move(context))};
}

std::string shell_text(const caf::error& e) {
  if (e == caf::sec::request_timeout)
    return "the host did not answer in time";
  if (e.category() == error_category && e.context().match_elements<std::string>())
    return e.context().get_as<std::string>(0);
  return caf::to_string(e);
}

} // namespace gwtf::actors
