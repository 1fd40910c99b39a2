#include "actors/net/wire_frame.hpp"

#include "actors/atoms.hpp"
#include "actors/errors.hpp"

namespace gwtf::actors {

peer_framing::lane lane_of(std::int32_t svc, const wire_frame& frame) {
  if (svc == static_cast<std::int32_t>(service::membership)) {
    auto kind = wire::peek_kind(frame.bytes.data(), frame.bytes.size());
    if (kind == "leave" || kind == "restore")
      return peer_framing::bulk;
  }
  return peer_framing::lane_of(svc);
}

wire_frame make_frame(const wire::message& msg) {
  return wire_frame{wire::encode(msg)};
}

namespace {

caf::expected<wire::message> to_expected(std::variant<wire::message, wire::wire_failure> r) {
  if (auto* f = std::get_if<wire::wire_failure>(&r))
    return make_error(f->code == wire::wire_error::unsupported_version ? ec::protocol_mismatch
                                                                       : ec::malformed_message,
                      std::string{wire::to_string(f->code)} + ": " + f->detail);
  return std::move(std::get<wire::message>(r));
}

} // namespace

caf::expected<wire::message> open_frame(const wire_frame& frame, const wire::decode_limits& limits) {
  return to_expected(wire::decode(frame.bytes.data(), frame.bytes.size(), limits));
}

caf::expected<wire::message> open_frame(wire_frame&& frame, const wire::decode_limits& limits) {
  auto shared = std::make_shared<const std::vector<std::uint8_t>>(std::move(frame.bytes));
  return to_expected(wire::decode(std::move(shared), limits));
}

} // namespace gwtf::actors
