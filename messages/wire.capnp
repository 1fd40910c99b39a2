# caf-gwtf wire protocol. Every message between hosts is one Envelope.
# Rules: field ordinals are never renumbered or reused; a new version adds fields or
# structs. Decoders treat every byte as hostile (messages/codec.hpp).
@0xeedf01236690975c;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("gwtf::wire::capnp_schema");

# "GWTF" in ASCII, big-endian reading.
const envelopeMagic :UInt32 = 0x47575446;

# Bumped when a change breaks older decoders.
const protocolVersion :UInt16 = 1;

enum Role {
  dataHolder @0;
  relay @1;
}

# Membership: a peer introduces itself (on connect and in gossip).
struct Hello {
  peerId @0 :Text;        # unique host name
  address @1 :Text;       # "host:port" where its middleman listens
  role @2 :Role;
  stage @3 :Int32;        # 0 for data holders, 1..S-1 for relays, -1 while unplaced
  capacity @4 :UInt32;    # microbatches it can hold at once
  incarnation @5 :UInt64; # increases on every restart; older gossip loses
}

# Membership: a peer leaves cleanly; its flows are re-routed at once, without waiting for
# failure detection.
struct Leave {
  peerId @0 :Text;
  incarnation @1 :UInt64; # must match the incarnation it announced
}

struct Envelope {
  magic @0 :UInt32;
  version @1 :UInt16;
  body :union {
    hello @2 :Hello;
    leave @3 :Leave;
  }
}
