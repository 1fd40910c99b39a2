// The codec's version and names; encoding is in encode.cpp, decoding (the security boundary)
// in decode.cpp.
#include "messages/codec.hpp"

#include "messages/codec_internal.hpp"

namespace gwtf::wire {

std::uint16_t protocol_version() {
  return schema::PROTOCOL_VERSION;
}

const char* to_string(wire_error e) {
  switch (e) {
    case wire_error::too_large: return "too_large";
    case wire_error::truncated: return "truncated";
    case wire_error::malformed: return "malformed";
    case wire_error::bad_magic: return "bad_magic";
    case wire_error::unsupported_version: return "unsupported_version";
    case wire_error::bad_enum: return "bad_enum";
    case wire_error::bad_field: return "bad_field";
    case wire_error::wrong_kind: return "wrong_kind";
  }
  return "unknown";
}

} // namespace gwtf::wire
