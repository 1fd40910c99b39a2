// Internal to messages/: what the encoder (encode.cpp) and the decoder (decode.cpp) share: the
// generated schema's names. Only messages/ includes it.
#pragma once

#include <capnp/message.h>
#include <capnp/orphan.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>
#include <kj/io.h>

#include "messages/wire.capnp.h"

namespace gwtf::wire {

namespace schema = capnp_schema;
using body_builder = schema::Envelope::Body::Builder;
using body_reader = schema::Envelope::Body::Reader;

} // namespace gwtf::wire
