#include "actors/net/wire_frame.hpp"

#include "actors/errors.hpp"

namespace gwtf::actors {

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
