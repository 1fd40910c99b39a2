// libFuzzer target: wire::decode, the one entry point every byte from a peer goes through
// (decode_as and actors::open_frame wrap it). Anything that decodes must re-encode and
// decode to the same message.
#include <cstdlib>

#include "messages/codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gwtf::wire::decode_limits limits;
  limits.max_bytes = 1 << 20;
  auto r = gwtf::wire::decode(data, size, limits);
  if (auto* msg = std::get_if<gwtf::wire::message>(&r)) {
    auto again = gwtf::wire::encode(*msg);
    auto r2 = gwtf::wire::decode(again.data(), again.size(), gwtf::wire::decode_limits{});
    if (!std::holds_alternative<gwtf::wire::message>(r2) || !(std::get<gwtf::wire::message>(r2) == *msg))
      std::abort(); // a decoded message must survive a round trip unchanged
  }
  return 0;
}
