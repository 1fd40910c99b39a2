// Plain C++ forms of every wire message (messages/wire.capnp). No Cap'n Proto, no CAF, no
// LibTorch: actors build and read these; only codec.cpp converts them to and from bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace gwtf::wire {

/// Role of a peer as it travels on the wire.
enum class peer_role : std::uint8_t { data_holder, relay };

/// A checkpoint a host keeps (wire.capnp HeldCheckpoint).
struct held_checkpoint {
  std::uint32_t stage = 0;     ///< 0..1023
  std::uint64_t iteration = 0; ///< steps the state holds
};

/// Membership introduction (wire.capnp Hello).
struct hello {
  std::string peer_id;           ///< unique host name, 1..64 bytes
  std::string address;           ///< "host:port", 1..255 bytes
  peer_role role = peer_role::relay;
  std::int32_t stage = -1;       ///< -1 while unplaced, else 0..1023; 0 for data holders
  std::uint32_t capacity = 0;    ///< 1..1'000'000
  std::uint64_t incarnation = 0; ///< increases on every restart
  std::string region;            ///< 0..64 bytes, [A-Za-z0-9._-]; empty when unknown
  std::uint64_t cluster = 0;     ///< hash of the cluster's shared config; 0 = unchecked
  std::vector<held_checkpoint> checkpoints; ///< at most 4096; membership heartbeats only
};

/// Clean departure.
struct leave {
  std::string peer_id;           ///< 1..64 bytes
  std::uint64_t incarnation = 0; ///< the incarnation it announced
  bool drained = false;          ///< shared its part of the iteration in progress first
};

/// One entry of a partial view.
struct peer_record {
  hello peer;
  std::uint64_t heartbeat = 0;
  bool suspected = false;
};

/// Periodic exchange of partial views.
struct gossip {
  std::vector<peer_record> peers; ///< at most 4096
};

/// A new host asks to join.
struct join_request {
  hello peer;
};

/// Answer to a join.
struct join_reply {
  bool accepted = false;
  std::int32_t stage = -1;
  std::vector<std::string> replicas; ///< hosts to download the stage state from
  std::string reason;                ///< why not, when rejected
};

/// Element type of a tensor.
enum class dtype : std::uint8_t { float32, float16, bfloat16, int64, int32, int8 };

/// Bytes per element of `t`.
std::size_t dtype_size(dtype t);

/// A dense row-major tensor as bytes. `bytes` points at `size` bytes kept alive by its
/// owner (shared_ptr aliasing): encoding reads them in place; decoding fills them with the
/// one copy out of the received message.
struct tensor_payload {
  dtype type = dtype::float32;
  std::vector<std::int64_t> shape;        ///< at most 8 dims, each >= 0
  std::shared_ptr<const std::uint8_t> bytes;
  std::size_t size = 0;                   ///< = product(shape) * dtype_size(type) when dense
  /// Sparse (activations under compression.mode adaptive): `bytes` holds indices.size()
  /// values, at these flat row-major positions in `shape` (strictly increasing); every other
  /// element is 0. Dense when false (indices empty).
  bool sparse = false;
  std::vector<std::uint32_t> indices;

  /// Copies `n` bytes into a new payload that owns them.
  static tensor_payload copy_of(dtype t, std::vector<std::int64_t> shape, const void* data,
                                std::size_t n);
};

/// Identifies a microbatch: (iteration, data holder index, index).
struct microbatch_ref {
  std::uint64_t iteration = 0;
  std::uint32_t holder = 0;
  std::uint32_t index = 0;
  std::uint64_t origin = 0; ///< incarnation of the holder's run that made it; 0 = not said
};

/// Which way a tensor travels along a flow.
enum class direction : std::uint8_t { forward, backward };

/// SWARM's calls (routing.router: swarm): a data holder's call to one stage, or its answer.
enum class call_kind : std::uint8_t {
  flow,    ///< not a call: a hop along a GWTF flow
  request, ///< forward: `tensor` is the stage input; backward: `tensor` the output gradient, `input` the stage input
  reply,   ///< the stage output (forward) or the input gradient (backward)
};

/// Activations (forward) or their gradients (backward) of one microbatch.
struct activation {
  microbatch_ref microbatch;
  direction dir = direction::forward;
  std::vector<std::string> path; ///< hosts visited so far, data holder first; 1..1024
  tensor_payload tensor;
  std::uint32_t attempt = 0;     ///< increases each time the hop is re-sent
  std::string continue_to;       ///< re-sends: the hop after the dead one; empty = any
  call_kind call = call_kind::flow; ///< SWARM: a call or its answer (`attempt` numbers the call)
  tensor_payload input;          ///< a backward call's stage input (dense); empty otherwise
  std::uint32_t stage = 0;       ///< a call: the stage it is for, 1..1023 (0: a hop, or not said)
};

/// Best known cost to a data holder and the demand for it.
struct target_cost {
  std::string target; ///< data holder id, 1..64 bytes
  double cost = 0;    ///< seconds, finite, >= 0
  std::int32_t demand = 0;
};

/// A balancer introduces itself.
struct introduction {
  std::string peer_id;
  std::int32_t stage = 0;
  std::uint32_t capacity = 0;
  std::vector<target_cost> costs;
};

/// Periodic cost advertisement upstream.
struct cost_advert {
  std::vector<target_cost> costs;
};

/// Ask a next-stage node to carry a unit flow.
struct flow_request {
  std::uint64_t flow_id = 0;
  std::string target;
  double advertised_cost = 0;
  std::uint32_t holder_flows = 0; ///< from a data holder: its built flows (fair shares), <= 65536
  std::uint64_t replaces = 0;     ///< a flow just given up for this one: take its path (0: none)
};

/// Why a flow request was rejected.
enum class reject_reason : std::uint8_t { none, stale_cost, no_spare_path, over_capacity, duplicate };

/// Answer to a flow request.
struct flow_response {
  std::uint64_t flow_id = 0;
  bool accepted = false;
  reject_reason reason = reject_reason::none;
  double current_cost = 0;
  std::int32_t demand = 0;
};

/// One flow as a node holds it.
struct flow_entry {
  std::uint64_t flow_id = 0;
  std::string target;
  std::string prev; ///< upstream host
  std::string next; ///< downstream host; empty while half-built
  double head_cost = 0; ///< seconds: data holder -> ... -> prev
  double in_cost = 0;   ///< d(prev, the listing host)
  double out_cost = 0;  ///< d(the listing host, next)
  double tail_cost = 0; ///< next -> ... -> data holder

  /// The whole ring's cost.
  double ring() const { return head_cost + in_cost + out_cost + tail_cost; }
};

/// A node's flows, published to same-stage peers.
struct flow_listing {
  std::string peer_id;
  std::vector<flow_entry> flows; ///< at most 65536
};

/// Simulated-annealing move kinds.
enum class move_kind : std::uint8_t { redirect, swap };

/// A move proposed to a same-stage peer.
struct move_proposal {
  std::uint64_t proposal_id = 0;
  move_kind kind = move_kind::redirect;
  std::vector<flow_entry> flows;
  double max_cost_before = 0;
  double max_cost_after = 0;
  double temperature = 0;
};

/// Answer to a move proposal.
struct move_response {
  std::uint64_t proposal_id = 0;
  bool accepted = false;
  std::uint64_t flow_id = 0; ///< accepted: the responder's flow handed to the proposer
};

/// Anti-entropy message kinds.
enum class sync_kind : std::uint8_t { check, confirm, cancel, push_back, redirect };

/// Anti-entropy on one flow.
struct flow_sync {
  sync_kind kind = sync_kind::check;
  std::uint64_t flow_id = 0;
  std::string target;
  double cost = 0;  ///< check: sender -> data holder along the flow; confirm: holder -> receiver
  std::string node; ///< redirect: the new next hop
  std::uint32_t holder_flows = 0; ///< confirm: the data holder's built flows (relays pass it on), <= 65536
  double others_cost = 0;         ///< confirm: the data holder's slowest other ring (0: none or unknown)
};

/// Link probe request.
struct ping {
  std::uint64_t probe_id = 0;
  std::int64_t sent_nanos = 0;
  std::vector<std::uint8_t> padding; ///< bulk bytes for bandwidth probes
};

/// Link probe answer.
struct pong {
  std::uint64_t probe_id = 0;
  std::int64_t sent_nanos = 0;
  std::uint64_t received_bytes = 0;
  /// The answering host's compute per microbatch (forward + backward of its stage, moving
  /// average), for adaptive compression; 0 = not measured yet.
  double compute_seconds = 0;
};

/// Passive bandwidth measurement of a real transfer.
struct bandwidth_sample {
  std::string peer;
  std::uint64_t bytes = 0;
  std::int64_t nanos = 0; ///< >= 0
};

/// A slice of a replica's gradient sum: float32 elements [offset, offset + n).
/// A data holder finished every microbatch of an iteration.
struct iteration_done {
  std::uint64_t iteration = 0;
  std::string holder;             ///< data holder id
  std::uint32_t microbatches = 0; ///< counted microbatches
  double loss_sum = 0;            ///< sum of their losses, finite, >= 0
  /// The data holders the sender counts as taking part in the iteration (itself and every
  /// holder it holds live): a replica waits for their reports too, even one it never heard.
  std::vector<std::string> participants; ///< 0..4096 ids
};

/// Microbatches of one data holder (a share's breakdown, stage 0's verdict).
struct holder_count {
  std::string holder;
  std::uint32_t microbatches = 0;
};

struct gradient_chunk {
  std::uint64_t iteration = 0;
  std::uint32_t stage = 0;
  std::vector<std::string> contributors;
  std::uint64_t microbatches = 0;
  std::uint64_t offset = 0;
  std::uint64_t total_elements = 0;
  tensor_payload values; ///< 1-D: float32, bfloat16 or int8 (training.share_compression)
  /// The data holders' reports of `iteration` the sender had when it shared: a replica that
  /// cannot hear some holder learns its report here (0..4096, each of `iteration`).
  std::vector<iteration_done> reports;
  /// The microbatches in the sum per data holder (0..4096 distinct holders; they add up to
  /// `microbatches`): what a replica can leave out when stage 0 did not count a holder.
  std::vector<holder_count> holders;
  /// int8 values: one scale per block of share_int8_block values (common/share_format.hpp) (offset is a multiple
  /// of the block); empty otherwise.
  std::vector<float> scales;
  /// Butterfly averaging (docs/runtime.md): the replicas the share is cut among, sorted
  /// (0..4096); the i-th reduces part i (actors/core/butterfly.hpp). Empty: a whole share.
  std::vector<std::string> group;
  /// With a group: the owner's sum of its part over `contributors` (all-gather); else a part
  /// of the sender's own share, sent to the part's owner (reduce-scatter).
  bool reduced = false;
  /// `reduced`: each contributor's microbatches, in `contributors`' order; else empty.
  std::vector<std::uint64_t> counts;
  /// The sender's exactly-once digest of the keys in its share (actors/core/key_digest.hpp).
  std::uint64_t keys_digest = 0;
};

/// One stage's share of the global gradient norm.
struct norm_share {
  std::uint64_t iteration = 0;
  std::uint32_t stage = 0;
  double sum_squares = 0;
  /// Stage 0 only: the data holders whose microbatches it averaged, the iteration's verdict
  /// that every other stage follows (docs/runtime.md); empty from other stages. 0..4096.
  std::vector<holder_count> holders;
};

/// Ask a replica for its stage state, or (`checkpoint`) any host for the checkpoint of `stage`
/// at `iteration` that it keeps (its own or a copy a peer pushed to it: docs/checkpoints.md).
/// Answered with STATE_CHUNKs of the transfer, or one empty chunk (total_bytes 0): none here.
struct state_request {
  std::uint64_t transfer_id = 0;
  std::uint32_t stage = 0;
  bool checkpoint = false;
  std::uint64_t iteration = 0; ///< with `checkpoint`: the training steps the state holds
};

/// A piece of a stage state blob.
struct state_chunk {
  std::uint64_t transfer_id = 0;
  std::uint32_t stage = 0;
  std::uint64_t offset = 0;
  std::uint64_t total_bytes = 0;
  std::vector<std::uint8_t> data;
};

/// Shell query.
struct inspect_request {
  std::uint64_t request_id = 0;
  std::string query; ///< 1..1024 bytes
};

/// Shell answer.
struct inspect_reply {
  std::uint64_t request_id = 0;
  bool ok = false;
  std::string body;
};

/// A microbatch reached the sender (sent to the hop two places upstream).
struct hop_progress {
  microbatch_ref microbatch;
  std::vector<std::string> path; ///< hosts visited so far, the sender last; 2..1024
};
/// A replica's weights hash after applying `iteration`.
struct replica_hash {
  std::uint64_t iteration = 0;
  std::uint32_t stage = 0;
  std::uint64_t hash = 0;
};
/// Every replica of a relay stage is gone: every host starts again at `iteration`, and
/// `restorer` takes the lost stage (node mode). Stage 0: a resume order (no stage lost): a
/// cluster started with plain --resume starts again at its cut.
struct restore {
  std::uint32_t stage = 0;      ///< 0..1023
  std::uint64_t iteration = 0;
  std::string restorer;         ///< 1..64 bytes; empty for stage 0
  std::int32_t from_stage = -1; ///< -1..1023; -1 for stage 0
  std::string decided_by;       ///< 1..64 bytes
};
/// SWARM's rebalancing: the receiving relay moves from `from_stage` to `stage`.
struct stage_move {
  std::uint32_t stage = 1;      ///< 1..1023, not from_stage
  std::uint32_t from_stage = 1; ///< 1..1023
  std::uint64_t iteration = 0;
  std::string decided_by;       ///< 1..64 bytes
};
/// A piece of a message above the frame limit: bytes [offset, offset + data.size()) of the
/// sender's encoded message `id`, total_bytes long (actors/core/fragments.hpp).
struct fragment {
  std::uint64_t id = 0;
  std::uint64_t offset = 0;
  std::uint64_t total_bytes = 0; ///< > 0
  std::vector<std::uint8_t> data; ///< 1 .. total_bytes - offset bytes
};
/// Any wire message.
using message = std::variant<hello, leave, gossip, join_request, join_reply, activation,
                             introduction, cost_advert, flow_request, flow_response,
                             flow_listing, move_proposal, move_response, flow_sync, ping, pong,
                             bandwidth_sample, gradient_chunk, norm_share, state_request,
                             state_chunk, inspect_request, inspect_reply, hop_progress,
                             iteration_done, replica_hash, restore, stage_move, fragment>;

/// Name of the message kind held, e.g. "flow_request".
const char* kind_name(const message& m);
/// The name of the message kind with this variant index (= the envelope's union member);
/// "unknown" outside the range.
const char* kind_name_at(std::size_t index);

// Field-by-field equality (tensor payloads compare their bytes).
bool operator==(const tensor_payload& a, const tensor_payload& b);
#define GWTF_WIRE_EQ(T) bool operator==(const T& a, const T& b);
GWTF_WIRE_EQ(hello) GWTF_WIRE_EQ(leave) GWTF_WIRE_EQ(peer_record) GWTF_WIRE_EQ(gossip)
GWTF_WIRE_EQ(join_request) GWTF_WIRE_EQ(join_reply) GWTF_WIRE_EQ(microbatch_ref)
GWTF_WIRE_EQ(activation) GWTF_WIRE_EQ(target_cost) GWTF_WIRE_EQ(introduction)
GWTF_WIRE_EQ(cost_advert) GWTF_WIRE_EQ(flow_request) GWTF_WIRE_EQ(flow_response)
GWTF_WIRE_EQ(flow_entry) GWTF_WIRE_EQ(flow_listing) GWTF_WIRE_EQ(move_proposal)
GWTF_WIRE_EQ(move_response) GWTF_WIRE_EQ(flow_sync) GWTF_WIRE_EQ(ping) GWTF_WIRE_EQ(pong)
GWTF_WIRE_EQ(bandwidth_sample) GWTF_WIRE_EQ(holder_count) GWTF_WIRE_EQ(gradient_chunk) GWTF_WIRE_EQ(norm_share)
GWTF_WIRE_EQ(state_request) GWTF_WIRE_EQ(state_chunk) GWTF_WIRE_EQ(inspect_request)
GWTF_WIRE_EQ(inspect_reply) GWTF_WIRE_EQ(hop_progress) GWTF_WIRE_EQ(iteration_done)
GWTF_WIRE_EQ(replica_hash) GWTF_WIRE_EQ(held_checkpoint) GWTF_WIRE_EQ(restore)
GWTF_WIRE_EQ(stage_move) GWTF_WIRE_EQ(fragment)
#undef GWTF_WIRE_EQ

} // namespace gwtf::wire
