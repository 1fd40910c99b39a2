#include "messages/codec.hpp"

#include <cstring>
#include <optional>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include "messages/wire.capnp.h"

namespace gwtf::wire {

namespace schema = capnp_schema;

namespace {

constexpr std::size_t max_peer_id = 64;
constexpr std::size_t max_address = 255;
constexpr std::int32_t max_stage = 1023;
constexpr std::uint32_t max_capacity = 1'000'000;

wire_failure fail(wire_error code, std::string detail) {
  return wire_failure{code, std::move(detail)};
}

// Owns the words of a message: copies only when the input is misaligned.
struct aligned_words {
  kj::Array<capnp::word> copy;
  kj::ArrayPtr<const capnp::word> view;

  aligned_words(const std::uint8_t* data, std::size_t size) {
    std::size_t words = size / sizeof(capnp::word);
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(capnp::word) == 0) {
      view = {reinterpret_cast<const capnp::word*>(data), words};
    } else {
      copy = kj::heapArray<capnp::word>(words);
      std::memcpy(copy.begin(), data, words * sizeof(capnp::word));
      view = kj::ArrayPtr<const capnp::word>(copy.begin(), copy.size());
    }
  }
};

} // namespace

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

namespace {

std::vector<std::uint8_t> to_bytes(capnp::MallocMessageBuilder& builder) {
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

schema::Envelope::Builder init_envelope(capnp::MallocMessageBuilder& builder) {
  auto env = builder.initRoot<schema::Envelope>();
  env.setMagic(schema::ENVELOPE_MAGIC);
  env.setVersion(schema::PROTOCOL_VERSION);
  return env;
}

// Checks everything an envelope of any kind must satisfy, then hands its body to `read`.
// All Cap'n Proto exceptions (bad pointers, limits) become `malformed`.
template <class T, class Read>
std::variant<T, wire_failure> open_envelope(const std::uint8_t* data, std::size_t size,
                                            const decode_limits& limits, Read&& read) {
  if (size > limits.max_bytes)
    return fail(wire_error::too_large, std::to_string(size) + " bytes exceed the limit of "
                                         + std::to_string(limits.max_bytes));
  if (size < sizeof(capnp::word) || size % sizeof(capnp::word) != 0)
    return fail(wire_error::truncated, std::to_string(size) + " bytes is not a whole number of "
                                         "8-byte words");
  aligned_words words{data, size};
  try {
    auto expected = capnp::expectedSizeInWordsFromPrefix(words.view);
    if (expected > words.view.size())
      return fail(wire_error::truncated, "segment table announces " + std::to_string(expected * 8)
                                           + " bytes, got " + std::to_string(size));
    capnp::ReaderOptions options;
    // Bounds the work an amplification attack (pointers aliasing one object) can cause.
    options.traversalLimitInWords = words.view.size() * 2 + 64;
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader reader{words.view, options};
    auto env = reader.getRoot<schema::Envelope>();
    if (env.getMagic() != schema::ENVELOPE_MAGIC)
      return fail(wire_error::bad_magic, "magic is not 'GWTF'");
    if (env.getVersion() != schema::PROTOCOL_VERSION)
      return fail(wire_error::unsupported_version,
                  "version " + std::to_string(env.getVersion()) + ", this build speaks "
                    + std::to_string(schema::PROTOCOL_VERSION));
    return read(env.getBody());
  } catch (const kj::Exception& e) {
    return fail(wire_error::malformed, e.getDescription().cStr());
  }
}

// Copies a Text field after checking its length.
std::optional<wire_failure> read_text(capnp::Text::Reader text, const char* field,
                                      std::size_t max, std::string& out) {
  if (text.size() == 0 || text.size() > max)
    return fail(wire_error::bad_field, std::string{field} + ": 1.." + std::to_string(max)
                                         + " bytes, got " + std::to_string(text.size()));
  out.assign(text.cStr(), text.size());
  return std::nullopt;
}

} // namespace

std::vector<std::uint8_t> encode(const hello& msg) {
  capnp::MallocMessageBuilder builder;
  auto h = init_envelope(builder).initBody().initHello();
  h.setPeerId(msg.peer_id);
  h.setAddress(msg.address);
  h.setRole(msg.role == peer_role::data_holder ? schema::Role::DATA_HOLDER : schema::Role::RELAY);
  h.setStage(msg.stage);
  h.setCapacity(msg.capacity);
  h.setIncarnation(msg.incarnation);
  return to_bytes(builder);
}

std::vector<std::uint8_t> encode(const leave& msg) {
  capnp::MallocMessageBuilder builder;
  auto l = init_envelope(builder).initBody().initLeave();
  l.setPeerId(msg.peer_id);
  l.setIncarnation(msg.incarnation);
  return to_bytes(builder);
}

std::variant<hello, wire_failure> decode_hello(const std::uint8_t* data, std::size_t size,
                                               const decode_limits& limits) {
  return open_envelope<hello>(data, size, limits, [](schema::Envelope::Body::Reader body)
                                                    -> std::variant<hello, wire_failure> {
    if (body.which() != schema::Envelope::Body::HELLO)
      return fail(wire_error::wrong_kind, "expected hello");
    auto h = body.getHello();
    hello out;
    if (auto f = read_text(h.getPeerId(), "hello.peerId", max_peer_id, out.peer_id))
      return *f;
    if (auto f = read_text(h.getAddress(), "hello.address", max_address, out.address))
      return *f;
    switch (h.getRole()) {
      case schema::Role::DATA_HOLDER: out.role = peer_role::data_holder; break;
      case schema::Role::RELAY: out.role = peer_role::relay; break;
      default:
        return fail(wire_error::bad_enum,
                    "hello.role: " + std::to_string(static_cast<unsigned>(h.getRole())));
    }
    if (h.getStage() < -1 || h.getStage() > max_stage)
      return fail(wire_error::bad_field, "hello.stage: -1.." + std::to_string(max_stage)
                                           + ", got " + std::to_string(h.getStage()));
    if (out.role == peer_role::data_holder && h.getStage() != 0)
      return fail(wire_error::bad_field, "hello.stage: 0 for a data holder, got "
                                           + std::to_string(h.getStage()));
    if (h.getCapacity() == 0 || h.getCapacity() > max_capacity)
      return fail(wire_error::bad_field, "hello.capacity: 1.." + std::to_string(max_capacity)
                                           + ", got " + std::to_string(h.getCapacity()));
    out.stage = h.getStage();
    out.capacity = h.getCapacity();
    out.incarnation = h.getIncarnation();
    return out;
  });
}

std::variant<leave, wire_failure> decode_leave(const std::uint8_t* data, std::size_t size,
                                               const decode_limits& limits) {
  return open_envelope<leave>(data, size, limits, [](schema::Envelope::Body::Reader body)
                                                    -> std::variant<leave, wire_failure> {
    if (body.which() != schema::Envelope::Body::LEAVE)
      return fail(wire_error::wrong_kind, "expected leave");
    auto l = body.getLeave();
    leave out;
    if (auto f = read_text(l.getPeerId(), "leave.peerId", max_peer_id, out.peer_id))
      return *f;
    out.incarnation = l.getIncarnation();
    return out;
  });
}

} // namespace gwtf::wire
