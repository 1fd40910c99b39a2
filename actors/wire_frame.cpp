#include "actors/wire_frame.hpp"

#include "actors/errors.hpp"

namespace gwtf::actors {

wire_frame make_frame(const wire::message& msg) {
  return wire_frame{wire::encode(msg)};
}

caf::expected<wire::message> open_frame(const wire_frame& frame, const wire::decode_limits& limits) {
  auto r = wire::decode(frame.bytes.data(), frame.bytes.size(), limits);
  if (auto* f = std::get_if<wire::wire_failure>(&r))
    return make_error(f->code == wire::wire_error::unsupported_version ? ec::protocol_mismatch
                                                                       : ec::malformed_message,
                      std::string{wire::to_string(f->code)} + ": " + f->detail);
  return std::move(std::get<wire::message>(r));
}

} // namespace gwtf::actors
