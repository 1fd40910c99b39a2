// One realistic sample of every wire message kind, for round-trip, hostile-input and
// cross-process tests and for the fuzzers' seed corpus.
#pragma once

#include <vector>

#include "messages/types.hpp"

namespace gwtf::test {

inline wire::tensor_payload sample_tensor(std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return wire::tensor_payload::copy_of(wire::dtype::float32, std::move(shape), values.data(),
                                       values.size() * sizeof(float));
}

/// A sparse activation (compression.mode adaptive): 5 fp16 values of a [2, 4, 8] tensor.
inline wire::activation sample_sparse_activation() {
  std::vector<std::uint16_t> halves{0x3c00, 0xbc00, 0x4000, 0x3800, 0xc200}; // 1, -1, 2, 0.5, -3
  auto t = wire::tensor_payload::copy_of(wire::dtype::float16, {2, 4, 8}, halves.data(), halves.size() * 2);
  t.sparse = true;
  t.indices = {0, 3, 17, 40, 63};
  return wire::activation{wire::microbatch_ref{12, 1, 3, 1732456789012}, wire::direction::backward,
                          {"dh-virginia", "r1-ohio", "r2-oregon"}, std::move(t), 2, "", wire::call_kind::flow, {}};
}

/// Every message kind, in variant order.
inline std::vector<wire::message> all_samples() {
  using namespace wire;
  hello h{"relay-fra-7", "10.0.1.7:4242", peer_role::relay, 2, 8, 42, "", 0, {{2, 40}, {2, 42}, {1, 42}}};
  hello dh{"dh-virginia", "10.0.0.1:4242", peer_role::data_holder, 0, 6, 1, "", 0, {}};
  flow_entry f1{1001, "dh-virginia", "r1-ohio", "r3-frankfurt", 0.125, 0.25, 0.0625, 1.5};
  flow_entry f2{1002, "dh-frankfurt", "r1-london", "", 0.5, 0.75, 0, 0};
  std::vector<message> out{
    h,
    leave{"relay-fra-7", 42, true},
    gossip{{peer_record{h, 17, false}, peer_record{dh, 3, true}}},
    join_request{hello{"joiner-1", "10.0.9.9:4242", peer_role::relay, -1, 4, 0, "", 0, {}}},
    join_reply{true, 2, {"r2-oregon", "r2-ireland"}, ""},
    activation{microbatch_ref{12, 1, 3, 1732456789012}, direction::forward, {"dh-virginia", "r1-ohio"},
               sample_tensor({2, 4, 8}), 1, "r2-oregon", call_kind::flow, {}},
    introduction{"r2-oregon", 2, 3, {target_cost{"dh-virginia", 0.75, -2}}},
    cost_advert{{target_cost{"dh-virginia", 0.5, 1}, target_cost{"dh-frankfurt", 0.25, -1}}},
    flow_request{77, "dh-frankfurt", 0.375, 5, 76},
    flow_response{77, false, reject_reason::stale_cost, 0.5, 2},
    flow_listing{"r2-oregon", {f1, f2}},
    move_proposal{5, move_kind::swap, {f1, f2}, 0.9, 0.7, 1.7},
    move_response{5, true, 1002},
    flow_sync{sync_kind::redirect, 1001, "dh-virginia", 0.375, "r2-ireland", 3, 1.25},
    ping{9, 123456789, std::vector<std::uint8_t>(100, 0xab)},
    pong{9, 123456789, 100, 0.125},
    bandwidth_sample{"r1-ohio", 1 << 20, 2'500'000},
    gradient_chunk{12, 2, {"r2-oregon", "r2-ireland"}, 7, 64, 1024, sample_tensor({32}),
                   {iteration_done{12, "dh-virginia", 4, 13.25, {"dh-virginia", "dh-frankfurt"}}},
                   {holder_count{"dh-virginia", 4}, holder_count{"dh-frankfurt", 3}}, {},
                   {"r2-ireland", "r2-oregon", "r2-tokyo"}, true, {4, 3}},
    norm_share{12, 0, 3.5, {holder_count{"dh-virginia", 4}, holder_count{"dh-frankfurt", 3}}},
    state_request{314, 2, true, 40},
    state_chunk{314, 2, 16, 64, std::vector<std::uint8_t>(32, 0x5a)},
    inspect_request{1, "flows"},
    inspect_reply{1, true, "flows: []\n"},
    hop_progress{microbatch_ref{12, 1, 3}, {"dh-virginia", "r1-ohio", "r2-oregon"}},
    iteration_done{12, "dh-virginia", 4, 13.25, {"dh-virginia", "dh-frankfurt"}},
    replica_hash{12, 2, 0x0123456789abcdefULL},
    restore{3, 40, "r1-ohio", 1, "dh-virginia"},
    stage_move{3, 1, 40, "dh-virginia"},
    fragment{7, 1 << 20, 3 << 20, std::vector<std::uint8_t>(48, 0xa5)},
  };
  return out;
}

} // namespace gwtf::test
