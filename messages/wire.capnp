# caf-gwtf wire protocol. Every message between hosts is one Envelope.
# Rules: field ordinals are never renumbered or reused; a new version adds fields or
# structs. Decoders treat every byte as hostile (messages/codec.hpp, docs/wire.md).
@0xeedf01236690975c;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("gwtf::wire::capnp_schema");

# "GWTF" in ASCII, big-endian reading.
const envelopeMagic :UInt32 = 0x47575446;

# Bumped when a change breaks older decoders.
const protocolVersion :UInt16 = 2; # 2: per-holder counts in gradientChunk, stage 0's verdict in normShare

enum Role {
  dataHolder @0;
  relay @1;
}

# --- membership ---------------------------------------------------------------------

# A peer introduces itself (on connect and in gossip).
struct Hello {
  peerId @0 :Text;        # unique host name
  address @1 :Text;       # "host:port" where its middleman listens
  role @2 :Role;
  stage @3 :Int32;        # 0 for data holders, 1..S-1 for relays, -1 while unplaced
  capacity @4 :UInt32;    # microbatches it can hold at once
  incarnation @5 :UInt64; # increases on every restart; older gossip loses
  region @6 :Text;        # region of its network matrix (emulation); may be empty
  cluster @7 :UInt64;     # hash of what every host must agree on (model, data, training,
                          # data-holder roster); a peer of another cluster is refused
  checkpoints @8 :List(HeldCheckpoint); # membership heartbeats: the checkpoints it can serve
                          # (its own and copies peers pushed); empty in link gossip
}

# A checkpoint a host keeps under node.data_dir (docs/checkpoints.md).
struct HeldCheckpoint {
  stage @0 :UInt32;
  iteration @1 :UInt64;   # the steps the state holds
}

# A peer leaves cleanly; its flows are re-routed at once, without waiting for failure
# detection.
struct Leave {
  peerId @0 :Text;
  incarnation @1 :UInt64; # must match the incarnation it announced
  drained @2 :Bool;       # it finished and shared its part of the iteration in progress
                          # first: peers keep what it shared instead of redoing it
}

# One entry of a partial view.
struct PeerRecord {
  hello @0 :Hello;
  heartbeat @1 :UInt64;   # increases while the peer is alive; gossip keeps the highest
  suspected @2 :Bool;     # the sender has not heard from it for a while
}

# Periodic exchange of partial views.
struct Gossip {
  peers @0 :List(PeerRecord);
}

# A new host asks to join (stage -1: place me at the bottleneck stage).
struct JoinRequest {
  hello @0 :Hello;
}

# Answer to a join: the stage to hold and replicas to download its state from.
struct JoinReply {
  accepted @0 :Bool;
  stage @1 :Int32;
  replicas @2 :List(Text);
  reason @3 :Text;        # why not, when rejected
}

# --- training data plane ------------------------------------------------------------

enum DType {
  float32 @0;
  float16 @1;
  bfloat16 @2;
  int64 @3;
  int32 @4;
  int8 @5;
}

# A row-major tensor. Dense: data holds exactly product(shape) * size(dtype) bytes.
# Sparse (compression.mode adaptive, activations only): data holds the kept values, indices
# their flat row-major positions in shape, strictly increasing, one per value; every other
# element is 0.
struct Tensor {
  dtype @0 :DType;
  shape @1 :List(Int64);
  data @2 :Data;
  layout @3 :Layout;
  indices @4 :List(UInt32);
}

enum Layout {
  dense @0;
  sparse @1;
}

struct MicrobatchRef {
  iteration @0 :UInt64;
  holder @1 :UInt32;      # data holder index
  index @2 :UInt32;       # microbatch index of that holder in the iteration
  origin @3 :UInt64;      # incarnation of the holder run that made it (a restarted holder's
                          # differs: what its previous run sent is told apart); 0 = not said
}

enum Direction {
  forward @0;             # activations, towards the last stage and back to the holder
  backward @1;            # gradients of those activations, in reverse
}

# Activations (forward) or their gradients (backward) of one microbatch along its flow.
struct Activation {
  microbatch @0 :MicrobatchRef;
  direction @1 :Direction;
  path @2 :List(Text);    # hosts visited so far, data holder first
  tensor @3 :Tensor;
  attempt @4 :UInt32;     # increases each time the hop is re-sent after a failure
  continueTo @5 :Text;    # re-sends only: the hop after the dead one, to keep its state
  call @6 :Call;          # routing.router swarm: a data holder's call to one stage, or its answer
  input @7 :Tensor;       # a backward call: the stage input the callee recomputes the forward from
  stage @8 :UInt32;       # a call (request): the stage it is for (1..1023; 0: a hop, or not said).
                          # A relay that moved (SWARM's rebalancing) refuses the calls of its old stage.
}

# SWARM's calls (routing.router: swarm): a data holder calls one stage per call and gets the
# answer back; the callee keeps nothing between calls. `attempt` numbers the call.
enum Call {
  flow @0;                # not a call: a hop along a GWTF flow
  request @1;             # forward: `tensor` is the stage input; backward: `tensor` the output
                          # gradient and `input` the stage input
  reply @2;               # the stage output (forward) or the input gradient (backward)
}

# --- flow protocol (GWTF balancers) -------------------------------------------------

# Best known cost from the sender to a data holder, and its demand for that holder.
struct TargetCost {
  target @0 :Text;        # data holder id
  cost @1 :Float64;       # seconds
  demand @2 :Int32;       # > 0 holds inflows needing outflows; < 0 can accept inflows
}

# A balancer introduces itself to previous/next-stage balancers.
struct Introduction {
  peerId @0 :Text;
  stage @1 :Int32;
  capacity @2 :UInt32;
  costs @3 :List(TargetCost);
}

# Periodic cost advertisement upstream.
struct CostAdvert {
  costs @0 :List(TargetCost);
}

# Ask a next-stage node to carry a unit flow towards `target`.
struct FlowRequest {
  flowId @0 :UInt64;
  target @1 :Text;
  advertisedCost @2 :Float64; # the cost the requester believed
  holderFlows @3 :UInt32;     # from a data holder: the flows it holds now (fair shares)
  replaces @4 :UInt64;        # a flow just given up for this one: take its path (0: none)
}

enum RejectReason {
  none @0;
  staleCost @1;
  noSparePath @2;
  overCapacity @3;
  duplicate @4;
}

struct FlowResponse {
  flowId @0 :UInt64;
  accepted @1 :Bool;
  reason @2 :RejectReason;  # none when accepted
  currentCost @3 :Float64;  # refreshes the requester's view
  demand @4 :Int32;
}

# One flow as a node holds it.
struct FlowEntry {
  flowId @0 :UInt64;
  target @1 :Text;
  prev @2 :Text;          # upstream host
  next @3 :Text;          # downstream host; empty while half-built
  headCost @4 :Float64;   # seconds: data holder -> ... -> prev (the path before the edge in)
  inCost @5 :Float64;     # d(prev, holder of this entry)
  outCost @6 :Float64;    # d(holder of this entry, next)
  tailCost @7 :Float64;   # next -> ... -> data holder (the path after the edge out)
}

# A node publishes its flows to same-stage peers.
struct FlowListing {
  peerId @0 :Text;
  flows @1 :List(FlowEntry);
}

enum MoveKind {
  redirect @0;            # take over a flow u -> P -> v
  swap @1;                # exchange next hops of two flows with the same target
}

# Simulated-annealing move proposed to a same-stage peer (one outstanding per node).
struct MoveProposal {
  proposalId @0 :UInt64;
  kind @1 :MoveKind;
  flows @2 :List(FlowEntry); # the affected flows as the proposer sees them
  maxCostBefore @3 :Float64; # the move's objective as the proposer judged it (informational)
  maxCostAfter @4 :Float64;
  temperature @5 :Float64;
}

struct MoveResponse {
  proposalId @0 :UInt64;
  accepted @1 :Bool;
  flowId @2 :UInt64;      # accepted: the responder's flow handed to the proposer
}

enum SyncKind {
  check @0;               # do you still hold flow X from/to me?
  confirm @1;             # yes
  cancel @2;              # drop it: the other end no longer agrees
  pushBack @3;            # I cannot carry it any more: re-route it upstream
  redirect @4;            # from a flow's next hop to its previous one: send it to `node` now
}

# Anti-entropy on one flow.
struct FlowSync {
  kind @0 :SyncKind;
  flowId @1 :UInt64;
  target @2 :Text;
  cost @3 :Float64;       # check: the sender's cost back to the data holder along the flow;
                          # confirm: the path cost from the data holder to the receiver
  node @4 :Text;          # redirect: the new next hop; empty otherwise
  holderFlows @5 :UInt32; # confirm: the flows the data holder holds (fair shares, move objective);
                          # relays pass on what the hop before them said
  othersCost @6 :Float64; # confirm: the data holder's slowest ring among its other built flows
                          # (0: none or unknown), passed on likewise
}

# --- link probes --------------------------------------------------------------------

struct Ping {
  probeId @0 :UInt64;
  sentNanos @1 :Int64;    # sender's clock; only the sender interprets it
  padding @2 :Data;       # bandwidth probes carry bulk bytes
}

struct Pong {
  probeId @0 :UInt64;
  sentNanos @1 :Int64;    # echoed
  receivedBytes @2 :UInt64;
  computeSeconds @3 :Float64; # the answering host's compute per microbatch (forward + backward,
                              # its stage, a moving average); 0 = not measured yet
}

# A passive measurement from a real transfer, shared with the peer it concerns.
struct BandwidthSample {
  peer @0 :Text;
  bytes @1 :UInt64;
  nanos @2 :Int64;
}

# --- stage aggregation and state transfer -------------------------------------------

# A slice of a replica's averaged-gradient input: flat float32 elements [offset, offset+n).
struct GradientChunk {
  iteration @0 :UInt64;
  stage @1 :UInt32;
  contributors @2 :List(Text); # replicas whose microbatches are in this sum
  microbatches @3 :UInt64;     # microbatches counted in the sum
  offset @4 :UInt64;           # first element of this chunk
  totalElements @5 :UInt64;    # elements of the stage's whole gradient
  values @6 :Tensor;           # float32, bfloat16 or int8 (training.share_compression), 1-D
  reports @7 :List(IterationDone); # the holders' reports of `iteration` the sender had
  holders @8 :List(HolderCount);   # microbatches in the sum per data holder (sum = microbatches)
  scales @9 :List(Float32);        # int8 values: one per block of 128 (the chunk starts at a block); else empty
  # Butterfly averaging (docs/runtime.md, "Butterfly averaging"): the replicas the share is cut
  # among, sorted; the i-th reduces part i. Empty: a whole share, sent to every replica.
  group @10 :List(Text);
  reduced @11 :Bool;               # with a group: the owner's sum of its part over `contributors`; else a part of the sender's share, to its owner
  counts @12 :List(UInt64);        # reduced: each contributor's microbatches (they add up to microbatches); else empty
  # The sender's exactly-once digest: the sum (mod 2^64) of mix64(key) over the microbatch keys
  # in its share, each as many times as its gradients were added (docs/runtime.md, "Exactly
  # once in node mode"); 0 in a reduced part.
  keysDigest @13 :UInt64;
}

# Microbatches of one data holder.
struct HolderCount {
  holder @0 :Text;
  microbatches @1 :UInt32;
}

# One stage's share of the global gradient norm.
struct NormShare {
  iteration @0 :UInt64;
  stage @1 :UInt32;
  sumSquares @2 :Float64;
  holders @3 :List(HolderCount); # stage 0: the holders whose microbatches it averaged (the verdict)
}

# Ask a replica for its stage state (weights and optimizer), or, with `checkpoint`, any host
# for the checkpoint of `stage` at `iteration` it keeps (its own or a copy pushed to it).
# Answered with StateChunks of the transfer, or one empty chunk (totalBytes 0): none here.
struct StateRequest {
  transferId @0 :UInt64;
  stage @1 :UInt32;
  checkpoint @2 :Bool;
  iteration @3 :UInt64;
}

# A piece of a stage state blob (model/stage.hpp export_state).
struct StateChunk {
  transferId @0 :UInt64;
  stage @1 :UInt32;
  offset @2 :UInt64;
  totalBytes @3 :UInt64;
  data @4 :Data;
}

# --- microbatch recovery and iteration boundaries ----------------------------------

# A hop tells the hop two places upstream that a microbatch reached it, so that a re-send
# after a crash of the hop in between rebinds to the same downstream (docs/runtime.md).
struct HopProgress {
  microbatch @0 :MicrobatchRef;
  path @1 :List(Text);    # hosts visited so far, the sender last
}

# A data holder finished every microbatch of an iteration (stage aggregation may start).
struct IterationDone {
  iteration @0 :UInt64;
  holder @1 :Text;        # data holder id
  microbatches @2 :UInt32;
  lossSum @3 :Float64;    # sum of the microbatch losses
  participants @4 :List(Text); # holders the sender counts as taking part (itself included)
}

# A replica's weights hash after applying an iteration (replica agreement).
struct ReplicaHash {
  iteration @0 :UInt64;
  stage @1 :UInt32;
  hash @2 :UInt64;
}

# Every replica of relay stage `stage` is gone: every host starts again at the consistent cut
# `iteration` and `restorer` takes the lost stage (node mode; docs/checkpoints.md). Stage 0:
# no stage is lost, a cluster started with plain --resume starts again at its cut (no
# restorer). Sent by the data holder that decided to every live peer; each forwards it once.
struct Restore {
  stage @0 :UInt32;       # the lost stage (0: a resume order)
  iteration @1 :UInt64;   # the newest iteration every stage has a checkpoint of somewhere
  restorer @2 :Text;      # the relay that takes the lost stage (empty for a resume order)
  fromStage @3 :Int32;    # its stage until now (-1: it had none; always for a resume order)
  decidedBy @4 :Text;     # the data holder that decided
}

# SWARM's rebalancing (routing.router swarm, routing.swarm.rebalance_ms): the data holder
# that decides tells the relay it moves from stage `fromStage` to `stage`. The relay finishes
# its part of the iteration, leaves its stage, downloads the new stage's state and serves it.
struct StageMove {
  stage @0 :UInt32;       # where it goes (1..1023)
  fromStage @1 :UInt32;   # where the decider saw it (1..1023): a stale order is refused
  iteration @2 :UInt64;   # the decider's iteration when it decided
  decidedBy @3 :Text;     # the data holder that decided
}
# --- inspection ---------------------------------------------------------------------

struct InspectRequest {
  requestId @0 :UInt64;
  query @1 :Text;         # e.g. "flows", "links", "microbatches"
}

struct InspectReply {
  requestId @0 :UInt64;
  ok @1 :Bool;
  body @2 :Text;          # the answer, or the error when not ok
}

# A piece of a message too large for one frame (node.max_message_bytes): the bytes [offset,
# offset + |data|) of the sender's encoded message `id`, which is totalBytes long. The pieces
# of a message come in order, one after the other; the receiver puts them together in bounded
# memory and decodes the whole (docs/runtime.md, "Messages in pieces"). A piece is never
# itself a message in pieces.
struct Fragment {
  id @0 :UInt64;
  offset @1 :UInt64;
  totalBytes @2 :UInt64;
  data @3 :Data;
}

# --- envelope -----------------------------------------------------------------------

struct Envelope {
  magic @0 :UInt32;
  version @1 :UInt16;
  body :union {
    hello @2 :Hello;
    leave @3 :Leave;
    gossip @4 :Gossip;
    joinRequest @5 :JoinRequest;
    joinReply @6 :JoinReply;
    activation @7 :Activation;
    introduction @8 :Introduction;
    costAdvert @9 :CostAdvert;
    flowRequest @10 :FlowRequest;
    flowResponse @11 :FlowResponse;
    flowListing @12 :FlowListing;
    moveProposal @13 :MoveProposal;
    moveResponse @14 :MoveResponse;
    flowSync @15 :FlowSync;
    ping @16 :Ping;
    pong @17 :Pong;
    bandwidthSample @18 :BandwidthSample;
    gradientChunk @19 :GradientChunk;
    normShare @20 :NormShare;
    stateRequest @21 :StateRequest;
    stateChunk @22 :StateChunk;
    inspectRequest @23 :InspectRequest;
    inspectReply @24 :InspectReply;
    hopProgress @25 :HopProgress;
    iterationDone @26 :IterationDone;
    replicaHash @27 :ReplicaHash;
    restore @28 :Restore;
    stageMove @29 :StageMove;
    fragment @30 :Fragment;
  }
}
