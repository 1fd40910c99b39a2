#include "messages/types.hpp"

#include <cstring>

namespace gwtf::wire {

std::size_t dtype_size(dtype t) {
  switch (t) {
    case dtype::float32: return 4;
    case dtype::float16: return 2;
    case dtype::bfloat16: return 2;
    case dtype::int64: return 8;
    case dtype::int32: return 4;
    case dtype::int8: return 1;
  }
  return 0;
}

tensor_payload tensor_payload::copy_of(dtype t, std::vector<std::int64_t> shape, const void* data,
                                       std::size_t n) {
  std::shared_ptr<std::uint8_t> owner(new std::uint8_t[n == 0 ? 1 : n],
                                      std::default_delete<std::uint8_t[]>());
  if (n > 0)
    std::memcpy(owner.get(), data, n);
  return tensor_payload{t, std::move(shape), std::move(owner), n, false, {}};
}

namespace {
constexpr const char* kind_names[] = {
    "hello", "leave", "gossip", "join_request", "join_reply", "activation", "introduction",
    "cost_advert", "flow_request", "flow_response", "flow_listing", "move_proposal",
    "move_response", "flow_sync", "ping", "pong", "bandwidth_sample", "gradient_chunk",
    "norm_share", "state_request", "state_chunk", "inspect_request", "inspect_reply",
    "hop_progress", "iteration_done", "replica_hash", "restore", "stage_move", "fragment"};
static_assert(sizeof kind_names / sizeof kind_names[0] == std::variant_size_v<message>);
} // namespace

const char* kind_name(const message& m) {
  return kind_names[m.index()];
}

const char* kind_name_at(std::size_t index) {
  return index < std::variant_size_v<message> ? kind_names[index] : "unknown";
}

bool operator==(const tensor_payload& a, const tensor_payload& b) {
  return a.type == b.type && a.shape == b.shape && a.size == b.size && a.sparse == b.sparse
         && a.indices == b.indices && (a.size == 0 || std::memcmp(a.bytes.get(), b.bytes.get(), a.size) == 0);
}

#define GWTF_WIRE_EQ(T, ...)                                                                  \
  bool operator==(const T& a, const T& b) {                                                   \
    auto fields = [](const T& x) { return std::tie(__VA_ARGS__); };                          \
    return fields(a) == fields(b);                                                            \
  }

GWTF_WIRE_EQ(held_checkpoint, x.stage, x.iteration)
GWTF_WIRE_EQ(hello, x.peer_id, x.address, x.role, x.stage, x.capacity, x.incarnation, x.region, x.cluster,
             x.checkpoints)
GWTF_WIRE_EQ(leave, x.peer_id, x.incarnation, x.drained)
GWTF_WIRE_EQ(peer_record, x.peer, x.heartbeat, x.suspected)
GWTF_WIRE_EQ(gossip, x.peers)
GWTF_WIRE_EQ(join_request, x.peer)
GWTF_WIRE_EQ(join_reply, x.accepted, x.stage, x.replicas, x.reason)
GWTF_WIRE_EQ(microbatch_ref, x.iteration, x.holder, x.index, x.origin)
GWTF_WIRE_EQ(activation, x.microbatch, x.dir, x.path, x.tensor, x.attempt, x.continue_to, x.call, x.input, x.stage)
GWTF_WIRE_EQ(target_cost, x.target, x.cost, x.demand)
GWTF_WIRE_EQ(introduction, x.peer_id, x.stage, x.capacity, x.costs)
GWTF_WIRE_EQ(cost_advert, x.costs)
GWTF_WIRE_EQ(flow_request, x.flow_id, x.target, x.advertised_cost, x.holder_flows, x.replaces)
GWTF_WIRE_EQ(flow_response, x.flow_id, x.accepted, x.reason, x.current_cost, x.demand)
GWTF_WIRE_EQ(flow_entry, x.flow_id, x.target, x.prev, x.next, x.head_cost, x.in_cost, x.out_cost,
             x.tail_cost)
GWTF_WIRE_EQ(flow_listing, x.peer_id, x.flows)
GWTF_WIRE_EQ(move_proposal, x.proposal_id, x.kind, x.flows, x.max_cost_before, x.max_cost_after,
             x.temperature)
GWTF_WIRE_EQ(move_response, x.proposal_id, x.accepted, x.flow_id)
GWTF_WIRE_EQ(flow_sync, x.kind, x.flow_id, x.target, x.cost, x.node, x.holder_flows, x.others_cost)
GWTF_WIRE_EQ(ping, x.probe_id, x.sent_nanos, x.padding)
GWTF_WIRE_EQ(pong, x.probe_id, x.sent_nanos, x.received_bytes, x.compute_seconds)
GWTF_WIRE_EQ(bandwidth_sample, x.peer, x.bytes, x.nanos)
GWTF_WIRE_EQ(gradient_chunk, x.iteration, x.stage, x.contributors, x.microbatches, x.offset,
             x.total_elements, x.values, x.reports, x.holders, x.scales, x.group, x.reduced,
             x.counts, x.keys_digest)
GWTF_WIRE_EQ(holder_count, x.holder, x.microbatches)
GWTF_WIRE_EQ(norm_share, x.iteration, x.stage, x.sum_squares, x.holders)
GWTF_WIRE_EQ(state_request, x.transfer_id, x.stage, x.checkpoint, x.iteration)
GWTF_WIRE_EQ(state_chunk, x.transfer_id, x.stage, x.offset, x.total_bytes, x.data)
GWTF_WIRE_EQ(fragment, x.id, x.offset, x.total_bytes, x.data)
GWTF_WIRE_EQ(inspect_request, x.request_id, x.query)
GWTF_WIRE_EQ(inspect_reply, x.request_id, x.ok, x.body)
GWTF_WIRE_EQ(hop_progress, x.microbatch, x.path)
GWTF_WIRE_EQ(iteration_done, x.iteration, x.holder, x.microbatches, x.loss_sum, x.participants)
GWTF_WIRE_EQ(replica_hash, x.iteration, x.stage, x.hash)
GWTF_WIRE_EQ(restore, x.stage, x.iteration, x.restorer, x.from_stage, x.decided_by)
GWTF_WIRE_EQ(stage_move, x.stage, x.from_stage, x.iteration, x.decided_by)

#undef GWTF_WIRE_EQ

} // namespace gwtf::wire
