#include <doctest/doctest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "messages/codec.hpp"
#include "messages/wire.capnp.h"
#include "samples.hpp"

#include <limits>

using namespace gwtf::wire;
namespace schema = gwtf::wire::capnp_schema;

namespace {

wire_failure failure_of(const std::variant<message, wire_failure>& r) {
  REQUIRE(std::holds_alternative<wire_failure>(r));
  return std::get<wire_failure>(r);
}

std::vector<std::uint8_t> flat(capnp::MallocMessageBuilder& b) {
  auto words = capnp::messageToFlatArray(b);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

// Builds an envelope by hand, so that tests can write what an honest encoder never would.
template <class Fill>
std::vector<std::uint8_t> craft(Fill&& fill) {
  capnp::MallocMessageBuilder b;
  auto env = b.initRoot<schema::Envelope>();
  env.setMagic(schema::ENVELOPE_MAGIC);
  env.setVersion(schema::PROTOCOL_VERSION);
  fill(env);
  return flat(b);
}

void valid_hello(schema::Hello::Builder h) {
  h.setPeerId("p");
  h.setAddress("a:1");
  h.setRole(schema::Role::RELAY);
  h.setStage(1);
  h.setCapacity(1);
}

wire_failure reject(const std::vector<std::uint8_t>& bytes) {
  return failure_of(decode(bytes.data(), bytes.size()));
}

} // namespace

TEST_CASE("codec: every message kind round-trips field for field") {
  auto samples = gwtf::test::all_samples();
  REQUIRE(samples.size() == std::variant_size_v<message>);
  for (std::size_t k = 0; k < samples.size(); ++k) {
    INFO(std::string{kind_name(samples[k])});
    CHECK(samples[k].index() == k); // one sample per kind, in order
    auto bytes = encode(samples[k]);
    CHECK(bytes.size() % 8 == 0);
    auto r = decode(bytes.data(), bytes.size());
    REQUIRE(std::holds_alternative<message>(r));
    CHECK(std::get<message>(r) == samples[k]);
  }
}

TEST_CASE("codec: equality sees every field (a changed field is a different message)") {
  auto a = gwtf::test::all_samples();
  auto b = gwtf::test::all_samples();
  std::get<activation>(b[5]).path.push_back("r2-oregon");
  std::get<flow_listing>(b[10]).flows[1].next = "r3-virginia";
  std::get<gradient_chunk>(b[17]).offset += 1;
  auto c = gwtf::test::all_samples();
  std::get<gradient_chunk>(c[17]).reports.at(0).participants.pop_back();
  CHECK_FALSE(a[17] == c[17]);
  auto bytes = encode(b[5]);
  auto back = std::get<message>(decode(bytes.data(), bytes.size()));
  CHECK_FALSE(back == a[5]);
  CHECK_FALSE(a[10] == b[10]);
  CHECK_FALSE(a[17] == b[17]);
  CHECK(a[0] == b[0]);
}

TEST_CASE("codec: decoded tensors own their bytes (one copy out of the message)") {
  auto sample = gwtf::test::all_samples()[5];
  auto bytes = encode(sample);
  auto r = decode(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<message>(r));
  std::fill(bytes.begin(), bytes.end(), 0); // the receive buffer is reused
  CHECK(std::get<message>(r) == sample);
}

TEST_CASE("codec: a handed-over frame decodes without copying tensor bytes") {
  auto sample = gwtf::test::all_samples()[5];
  auto frame = std::make_shared<const std::vector<std::uint8_t>>(encode(sample));
  const auto* begin = frame->data();
  const auto* end = begin + frame->size();
  auto r = decode(frame);
  REQUIRE(std::holds_alternative<message>(r));
  auto decoded = std::get<activation>(std::get<message>(r));
  CHECK(decoded.tensor.bytes.get() >= begin); // the payload points into the frame ...
  CHECK(decoded.tensor.bytes.get() + decoded.tensor.size <= end);
  CHECK(reinterpret_cast<std::uintptr_t>(decoded.tensor.bytes.get()) % 8 == 0);
  frame.reset(); // ... and keeps it alive
  CHECK(message{decoded} == sample);
}

TEST_CASE("codec: encoding into a reused buffer gives the same bytes") {
  std::vector<std::uint8_t> out;
  for (auto& m : gwtf::test::all_samples()) {
    encode(m, out);
    CHECK(out == encode(m));
  }
}

TEST_CASE("codec: misaligned input decodes through one copy") {
  auto bytes = encode(gwtf::test::all_samples()[0]);
  std::vector<std::uint8_t> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  CHECK(std::holds_alternative<message>(decode(shifted.data() + 1, bytes.size())));
}

TEST_CASE("codec: decode_as names the kind it got instead") {
  auto bytes = encode(leave{"x", 1});
  auto r = decode_as<hello>(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<wire_failure>(r));
  CHECK(std::get<wire_failure>(r).code == wire_error::wrong_kind);
  CHECK(std::get<wire_failure>(r).detail == "got leave");
  CHECK(std::holds_alternative<leave>(decode_as<leave>(bytes.data(), bytes.size())));
}

TEST_CASE("codec: size limit applies before parsing") {
  auto bytes = encode(gwtf::test::all_samples()[5]);
  decode_limits tight;
  tight.max_bytes = bytes.size() - 8;
  CHECK(failure_of(decode(bytes.data(), bytes.size(), tight)).code == wire_error::too_large);
  CHECK(failure_of(decode(nullptr, 0)).code == wire_error::truncated);
}

TEST_CASE("codec: every truncation of every kind is rejected") {
  for (auto& m : gwtf::test::all_samples()) {
    auto bytes = encode(m);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      auto r = decode(bytes.data(), n);
      INFO(std::string{kind_name(m)} << " cut to " << n << " of " << bytes.size());
      REQUIRE(std::holds_alternative<wire_failure>(r));
      auto code = std::get<wire_failure>(r).code;
      CHECK((code == wire_error::truncated || code == wire_error::malformed));
    }
  }
}

TEST_CASE("codec: random corruption never crashes, what decodes is valid") {
  const unsigned seed = 20261122;
  std::mt19937 rng{seed};
  auto samples = gwtf::test::all_samples();
  int decoded = 0;
  int rounds = 0;
  for (auto& m : samples) {
    auto clean = encode(m);
    for (int round = 0; round < 2000; ++round, ++rounds) {
      auto bytes = clean;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k)
        bytes[rng() % bytes.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      INFO("seed " << seed << ", " << std::string{kind_name(m)} << " round " << round);
      auto r = decode(bytes.data(), bytes.size());
      if (auto* msg = std::get_if<message>(&r)) {
        ++decoded; // a flipped payload bit can still be valid: then it re-encodes and decodes
        auto again = encode(*msg);
        auto r2 = decode(again.data(), again.size());
        REQUIRE(std::holds_alternative<message>(r2));
        CHECK(std::get<message>(r2) == *msg);
      }
    }
  }
  CHECK(decoded < rounds);
}

TEST_CASE("codec: hostile envelopes are rejected with the field named") {
  CHECK(reject(craft([](auto env) { env.setMagic(0xdeadbeef); valid_hello(env.initBody().initHello()); })).code
        == wire_error::bad_magic);
  auto v = reject(craft([](auto env) { env.setVersion(99); valid_hello(env.initBody().initHello()); }));
  CHECK(v.code == wire_error::unsupported_version);
  CHECK(v.detail == "version 99, this build speaks 2");

  auto role = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.setRole(static_cast<schema::Role>(7));
  }));
  CHECK(role.code == wire_error::bad_enum);
  CHECK(role.detail == "hello.role: 7 is not one of the 2 known values");

  auto holder = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.setRole(schema::Role::DATA_HOLDER);
    h.setStage(3);
  }));
  CHECK(holder.detail == "hello.stage: 0 (or -1 while it downloads its state) for a data holder, got 3");
  // A joining holder announces -1 until its state is loaded (seen: two holders rejoining after
  // a hang were refused by every peer as malformed, and the run never recovered).
  auto joining = craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.setRole(schema::Role::DATA_HOLDER);
    h.setStage(-1);
  });
  auto joined = decode(joining.data(), joining.size());
  REQUIRE(std::holds_alternative<message>(joined));
  CHECK(std::get<hello>(std::get<message>(joined)).stage == -1);

  auto long_id = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.setPeerId(std::string(65, 'x'));
  }));
  CHECK(long_id.detail == "hello.peerId: 1..64 bytes, got 65");

  auto nul_id = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.setPeerId(capnp::Text::Reader("ab\0c", 4));
  }));
  CHECK(nul_id.detail == "hello.peerId: byte 2 (0x00) is not allowed here");
  auto space_addr = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.setAddress("10.0.0.1 :80");
  }));
  CHECK(space_addr.detail == "hello.address: byte 8 (0x20) is not allowed here");

  auto gossip_entry = reject(craft([](auto env) {
    auto peers = env.initBody().initGossip().initPeers(2);
    valid_hello(peers[0].initHello());
    valid_hello(peers[1].initHello());
    peers[1].getHello().setCapacity(0);
  }));
  CHECK(gossip_entry.detail == "gossip.peers[1].hello.capacity: 1..1000000, got 0");
}

TEST_CASE("codec: tensors: shape against bytes, negative and overflowing dims, dtype") {
  auto tensor_msg = [](auto fill_tensor) {
    return craft([&](auto env) {
      auto a = env.initBody().initActivation();
      a.initPath(1).set(0, "dh");
      fill_tensor(a.initTensor());
    });
  };
  auto mismatch = reject(tensor_msg([](auto t) {
    t.setDtype(schema::DType::FLOAT32);
    auto s = t.initShape(2);
    s.set(0, 2);
    s.set(1, 3);
    t.initData(20);
  }));
  CHECK(mismatch.code == wire_error::bad_field);
  CHECK(mismatch.detail == "activation.tensor: shape and dtype need 24 bytes, data has 20");

  auto negative = reject(tensor_msg([](auto t) {
    auto s = t.initShape(1);
    s.set(0, -4);
  }));
  CHECK(negative.detail == "activation.tensor.shape[0]: negative dimension -4");

  auto huge = reject(tensor_msg([](auto t) {
    auto s = t.initShape(4);
    for (unsigned i = 0; i < 4; ++i)
      s.set(i, std::int64_t{1} << 40); // the product overflows 64 bits
    t.initData(16);
  }));
  CHECK(huge.detail == "activation.tensor: shape and dtype need more than 4 GiB, data has 16");

  auto dtype = reject(tensor_msg([](auto t) { t.setDtype(static_cast<schema::DType>(9)); }));
  CHECK(dtype.code == wire_error::bad_enum);

  auto dims = reject(tensor_msg([](auto t) { t.initShape(9); }));
  CHECK(dims.detail == "activation.tensor.shape: at most 8 entries, got 9");

  auto no_path = reject(craft([](auto env) { env.initBody().initActivation(); }));
  CHECK(no_path.detail == "activation.path: at least 1 entries");
}

TEST_CASE("codec: a SWARM backward call carries its stage input, and a sparse input there is refused") {
  activation call{microbatch_ref{12, 1, 3, 7}, direction::backward, {"dh-virginia"},
                  gwtf::test::sample_tensor({2, 4, 8}), 5, "", call_kind::request, gwtf::test::sample_tensor({2, 4, 8})};
  auto bytes = encode(call);
  auto r = decode(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<message>(r));
  auto back = std::get<activation>(std::get<message>(r));
  CHECK(back.call == call_kind::request);
  CHECK(back.input.size == 2 * 4 * 8 * 4);
  CHECK(message{back} == message{call});
  auto reply = call;
  reply.call = call_kind::reply;
  reply.input = {};
  CHECK_FALSE(message{reply} == message{call});
  auto rb = encode(reply);
  CHECK(std::get<activation>(std::get<message>(decode(rb.data(), rb.size()))).call == call_kind::reply);
  auto sparse_input = call;
  sparse_input.input = gwtf::test::sample_sparse_activation().tensor;
  auto sb = encode(sparse_input);
  CHECK(reject(sb).detail == "activation.input: a dense tensor here, got a sparse one");
}

TEST_CASE("codec: a sparse tensor round-trips, and only where sparse tensors belong") {
  auto sparse = gwtf::test::sample_sparse_activation();
  auto bytes = encode(sparse);
  auto r = decode(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<message>(r));
  auto back = std::get<activation>(std::get<message>(r));
  CHECK(back.tensor.sparse);
  CHECK(back.tensor.indices == sparse.tensor.indices);
  CHECK(back.tensor.size == 10);
  CHECK(message{back} == message{sparse});
  // Equality sees the layout and every position.
  auto moved = sparse;
  moved.tensor.indices[2] = 18;
  CHECK_FALSE(message{moved} == message{sparse});
  auto dense = sparse;
  dense.tensor.sparse = false;
  CHECK_FALSE(message{dense} == message{sparse});

  // A gradient chunk's values must be dense.
  auto chunk = craft([](auto env) {
    auto g = env.initBody().initGradientChunk();
    g.initContributors(1).set(0, "r1");
    g.setTotalElements(4);
    auto t = g.initValues();
    t.initShape(1).set(0, 4);
    t.setLayout(schema::Layout::SPARSE);
    t.initData(4);
    t.initIndices(1).set(0, 2);
  });
  CHECK(reject(chunk).detail == "gradientChunk.values: a dense tensor here, got a sparse one");
}

TEST_CASE("codec: hostile sparse tensors: positions against values, order and shape") {
  auto sparse_msg = [](std::uint32_t values, std::vector<std::uint32_t> idx, schema::Layout layout = schema::Layout::SPARSE) {
    return craft([&](auto env) {
      auto a = env.initBody().initActivation();
      a.initPath(1).set(0, "dh");
      auto t = a.initTensor();
      t.setDtype(schema::DType::FLOAT16);
      auto s = t.initShape(2);
      s.set(0, 2);
      s.set(1, 3);
      t.setLayout(layout);
      t.initData(values * 2);
      auto list = t.initIndices(static_cast<unsigned>(idx.size()));
      for (unsigned i = 0; i < idx.size(); ++i)
        list.set(i, idx[i]);
    });
  };
  auto accepts = [](const std::vector<std::uint8_t>& b) { return std::holds_alternative<message>(decode(b.data(), b.size())); };
  CHECK(accepts(sparse_msg(2, {1, 5})));
  CHECK(accepts(sparse_msg(0, {}))); // nothing kept: all zeros
  CHECK(reject(sparse_msg(2, {1})).detail == "activation.tensor.indices: 1 positions for 2 values");
  CHECK(reject(sparse_msg(2, {1, 6})).detail == "activation.tensor.indices[1]: 6 is outside the shape's 6 elements");
  CHECK(reject(sparse_msg(2, {3, 3})).detail
        == "activation.tensor.indices[1]: 3 does not follow 3 (positions strictly increase)");
  CHECK(reject(sparse_msg(2, {4, 1})).detail
        == "activation.tensor.indices[1]: 1 does not follow 4 (positions strictly increase)");
  CHECK(reject(sparse_msg(7, {0, 1, 2, 3, 4, 5, 6})).detail
        == "activation.tensor.data: 14 bytes are not at most 6 whole values of 2 bytes");
  CHECK(reject(sparse_msg(1, {0}, schema::Layout::DENSE)).detail
        == "activation.tensor.indices: a dense tensor has none, got 1");
  auto layout = reject(sparse_msg(1, {0}, static_cast<schema::Layout>(7)));
  CHECK(layout.code == wire_error::bad_enum);
  // Odd bytes: not whole fp16 values.
  auto odd = reject(craft([](auto env) {
    auto a = env.initBody().initActivation();
    a.initPath(1).set(0, "dh");
    auto t = a.initTensor();
    t.setDtype(schema::DType::FLOAT16);
    t.initShape(1).set(0, 4);
    t.setLayout(schema::Layout::SPARSE);
    t.initData(3);
  }));
  CHECK(odd.detail == "activation.tensor.data: 3 bytes are not at most 4 whole values of 2 bytes");
}

TEST_CASE("codec: a SWARM call names its stage (a relay that moved refuses the calls of its old one)") {
  activation call{microbatch_ref{12, 1, 3, 7}, direction::forward, {"dh-virginia"}, gwtf::test::sample_tensor({2, 4, 8}),
                        1, "", call_kind::request, {}, 3};
  auto bytes = encode(call);
  auto back = decode(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<message>(back));
  CHECK(std::get<activation>(std::get<message>(back)).stage == 3);
  CHECK(std::get<message>(back) == message{call});
  call.stage = 1024;
  auto far = reject(encode(call));
  CHECK(far.detail == "activation.stage: 0..1023, got 1024");
}

TEST_CASE("codec: numbers, ranges and consistency of protocol messages") {
  auto nan_cost = reject(craft([](auto env) {
    auto r = env.initBody().initFlowRequest();
    r.setTarget("dh");
    r.setAdvertisedCost(std::numeric_limits<double>::quiet_NaN());
  }));
  CHECK(nan_cost.detail.rfind("flowRequest.advertisedCost: a finite number >= 0", 0) == 0);

  // A share relays holders' reports of its own iteration only, each with valid names.
  auto foreign_report = reject(craft([](auto env) {
    auto g = env.initBody().initGradientChunk();
    g.setIteration(7);
    g.initContributors(1).set(0, "r1");
    auto v = g.initValues();
    v.setDtype(schema::DType::FLOAT32);
    v.initShape(1).set(0, 0);
    auto r = g.initReports(2);
    r[0].setIteration(7);
    r[0].setHolder("dh-a");
    r[1].setIteration(6);
    r[1].setHolder("dh-b");
  }));
  CHECK(foreign_report.detail == "gradientChunk.reports[1].iteration: 6, not the chunk's 7");
  // Its per-holder counts name each holder once and add up to its microbatches.
  auto counts = [](std::uint64_t microbatches, std::vector<std::pair<const char*, std::uint32_t>> per_holder) {
    return craft([=](auto env) {
      auto g = env.initBody().initGradientChunk();
      g.initContributors(1).set(0, "r1");
      g.setMicrobatches(microbatches);
      auto v = g.initValues();
      v.setDtype(schema::DType::FLOAT32);
      v.initShape(1).set(0, 0);
      auto h = g.initHolders(static_cast<unsigned>(per_holder.size()));
      for (unsigned i = 0; i < per_holder.size(); ++i) {
        h[i].setHolder(per_holder[i].first);
        h[i].setMicrobatches(per_holder[i].second);
      }
    });
  };
  auto fine = counts(5, {{"dh-a", 2}, {"dh-b", 3}});
  CHECK(std::holds_alternative<message>(decode(fine.data(), fine.size())));
  CHECK(reject(counts(6, {{"dh-a", 2}, {"dh-b", 3}})).detail
        == "gradientChunk.holders: 5 microbatches in all, not the chunk's 6");
  CHECK(reject(counts(4, {{"dh-a", 2}, {"dh-a", 2}})).detail == "gradientChunk.holders[1].holder: dh-a named twice");
  // Only stage 0's norm carries a verdict.
  auto relay_verdict = reject(craft([](auto env) {
    auto n = env.initBody().initNormShare();
    n.setStage(2);
    auto h = n.initHolders(1);
    h[0].setHolder("dh-a");
    h[0].setMicrobatches(4);
  }));
  CHECK(relay_verdict.detail == "normShare.holders: only stage 0 names the holders it counted");
  auto bad_participant = reject(craft([](auto env) {
    auto d = env.initBody().initIterationDone();
    d.setHolder("dh-a");
    auto p = d.initParticipants(2);
    p.set(0, "dh-a");
    p.set(1, "");
  }));
  INFO(bad_participant.detail);
  CHECK(bad_participant.detail == "iterationDone.participants[1]: 1..64 bytes, got 0");

  auto accepted_with_reason = reject(craft([](auto env) {
    auto r = env.initBody().initFlowResponse();
    r.setAccepted(true);
    r.setReason(schema::RejectReason::OVER_CAPACITY);
  }));
  CHECK(accepted_with_reason.detail == "flowResponse.reason: 'none' exactly when accepted");

  auto redirect_nowhere = reject(craft([](auto env) {
    auto f = env.initBody().initFlowSync();
    f.setKind(schema::SyncKind::REDIRECT);
    f.setTarget("dh");
  }));
  CHECK(redirect_nowhere.detail == "flowSync.node: set exactly when kind is redirect");
  auto check_with_node = reject(craft([](auto env) {
    auto f = env.initBody().initFlowSync();
    f.setKind(schema::SyncKind::CHECK);
    f.setTarget("dh");
    f.setNode("r2");
  }));
  CHECK(check_with_node.detail == "flowSync.node: set exactly when kind is redirect");
  auto negative_tail = reject(craft([](auto env) {
    auto l = env.initBody().initFlowListing();
    l.setPeerId("p");
    auto e = l.initFlows(1)[0];
    e.setTarget("dh");
    e.setTailCost(-1);
  }));
  CHECK(negative_tail.detail.rfind("flowListing.flows[0].tailCost: a finite number >= 0", 0) == 0);
  auto others_nan = reject(craft([](auto env) {
    auto f = env.initBody().initFlowSync();
    f.setKind(schema::SyncKind::CONFIRM);
    f.setTarget("dh");
    f.setOthersCost(std::numeric_limits<double>::quiet_NaN());
  }));
  CHECK(others_nan.detail.rfind("flowSync.othersCost: a finite number >= 0", 0) == 0);

  auto chunk = reject(craft([](auto env) {
    auto g = env.initBody().initGradientChunk();
    g.initContributors(1).set(0, "r1");
    g.setOffset(10);
    g.setTotalElements(12);
    auto t = g.initValues();
    t.initShape(1).set(0, 4);
    t.initData(16);
  }));
  CHECK(chunk.detail == "gradientChunk: elements [10, +4) exceed totalElements 12");

  auto state = reject(craft([](auto env) {
    auto s = env.initBody().initStateChunk();
    s.setOffset(std::numeric_limits<std::uint64_t>::max());
    s.setTotalBytes(8);
    s.initData(8);
  }));
  CHECK(state.detail.rfind("stateChunk: bytes [", 0) == 0);

  // A piece that is empty, starts at or past its message's end, or runs past it.
  auto piece = [&](std::uint64_t offset, std::uint64_t total, unsigned n) {
    return reject(craft([&](auto env) {
      auto f = env.initBody().initFragment();
      f.setOffset(offset);
      f.setTotalBytes(total);
      f.initData(n);
    })).detail;
  };
  CHECK(piece(0, 8, 0) == "fragment: bytes [0, +0) are empty or exceed totalBytes 8");
  CHECK(piece(8, 8, 1) == "fragment: bytes [8, +1) are empty or exceed totalBytes 8");
  CHECK(piece(4, 8, 5) == "fragment: bytes [4, +5) are empty or exceed totalBytes 8");
  CHECK(piece(std::numeric_limits<std::uint64_t>::max(), 8, 8).rfind("fragment: bytes [", 0) == 0);

  auto many = reject(craft([](auto env) {
    auto l = env.initBody().initFlowListing();
    l.setPeerId("p");
    l.initFlows(65537);
  }));
  CHECK(many.detail == "flowListing.flows: at most 65536 entries, got 65537");

  // A heartbeat's checkpoint inventory and a RESTORE: bounded lists, stages in range, names.
  auto held = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    h.initCheckpoints(4097);
  }));
  CHECK(held.detail == "hello.checkpoints: at most 4096 entries, got 4097");
  auto held_stage = reject(craft([](auto env) {
    auto h = env.initBody().initHello();
    valid_hello(h);
    auto c = h.initCheckpoints(2);
    c[0].setStage(1);
    c[1].setStage(1024);
  }));
  CHECK(held_stage.detail == "hello.checkpoints[1].stage: 0..1023, got 1024");
  auto restore_stage = reject(craft([](auto env) {
    auto r = env.initBody().initRestore();
    r.setStage(1024);
    r.setRestorer("r1");
    r.setDecidedBy("dh-a");
  }));
  CHECK(restore_stage.detail == "restore.stage: 0..1023, got 1024");
  // Stage 0 is a resume order (no stage lost): it names no restorer and no stage it came from.
  auto resume_restorer = reject(craft([](auto env) {
    auto r = env.initBody().initRestore();
    r.setRestorer("r1");
    r.setFromStage(-1);
    r.setDecidedBy("dh-a");
  }));
  CHECK(resume_restorer.detail == "restore.restorer: 0..0 bytes, got 2");
  auto resume_from = reject(craft([](auto env) {
    auto r = env.initBody().initRestore();
    r.setFromStage(1);
    r.setDecidedBy("dh-a");
  }));
  CHECK(resume_from.detail == "restore.fromStage: -1..-1, got 1");
  auto resume = craft([](auto env) {
    auto r = env.initBody().initRestore();
    r.setIteration(8);
    r.setFromStage(-1);
    r.setDecidedBy("dh-a");
  });
  auto ok = decode(resume.data(), resume.size());
  REQUIRE(std::holds_alternative<message>(ok));
  CHECK(std::get<message>(ok) == message{restore{0, 8, "", -1, "dh-a"}});
  auto restore_name = reject(craft([](auto env) {
    auto r = env.initBody().initRestore();
    r.setStage(2);
    r.setRestorer("r1/../x");
    r.setDecidedBy("dh-a");
  }));
  CHECK(restore_name.detail == "restore.restorer: byte 2 (0x2f) is not allowed here");
  // SWARM's rebalancing: a move between two relay stages, never to the stage it is at.
  auto move_to_holders = reject(craft([](auto env) {
    auto m = env.initBody().initStageMove();
    m.setStage(0);
    m.setFromStage(1);
    m.setDecidedBy("dh-a");
  }));
  CHECK(move_to_holders.detail == "stageMove.stage: 1..1023, got 0");
  auto move_nowhere = reject(craft([](auto env) {
    auto m = env.initBody().initStageMove();
    m.setStage(2);
    m.setFromStage(2);
    m.setDecidedBy("dh-a");
  }));
  CHECK(move_nowhere.detail == "stageMove.stage: the stage it moves from, 2");
  auto move_anonymous = reject(craft([](auto env) {
    auto m = env.initBody().initStageMove();
    m.setStage(2);
    m.setFromStage(1);
  }));
  CHECK(move_anonymous.detail == "stageMove.decidedBy: 1..64 bytes, got 0");
}

TEST_CASE("codec: an unknown message kind from a newer peer is a typed error") {
  auto bytes = craft([](auto env) { valid_hello(env.initBody().initHello()); });
  // The union discriminant is the 16-bit field after magic (32) and version (16) in the data
  // section; find it as the HELLO value (2) following the version.
  capnp::FlatArrayMessageReader probe{kj::ArrayPtr<const capnp::word>(
    reinterpret_cast<const capnp::word*>(bytes.data()), bytes.size() / 8)};
  REQUIRE(probe.getRoot<schema::Envelope>().getBody().which() == schema::Envelope::Body::HELLO);
  bool patched = false;
  for (std::size_t i = 0; i + 8 <= bytes.size() && !patched; i += 8) {
    std::uint32_t magic = 0;
    std::memcpy(&magic, bytes.data() + i, 4);
    if (magic == schema::ENVELOPE_MAGIC) {
      bytes[i + 6] = 60; // discriminant = 60: no such kind in this build
      patched = true;
    }
  }
  REQUIRE(patched);
  auto f = reject(bytes);
  CHECK(f.code == wire_error::bad_enum);
  CHECK(f.detail == "envelope.body: unknown message kind 60");
}

TEST_CASE("codec: a segment table announcing more than was sent is truncated") {
  auto bytes = encode(gwtf::test::all_samples()[0]);
  bytes[4] = 0xff; // size of segment 0, in words
  bytes[5] = 0xff;
  CHECK(reject(bytes).code == wire_error::truncated);
}

TEST_CASE("codec: the fuzzers' seed corpus decodes (test/fuzz/corpus stays in sync)") {
  namespace fs = std::filesystem;
  int seeds = 0;
  for (auto& entry : fs::directory_iterator(fs::path{GWTF_SOURCE_DIR} / "test/fuzz/corpus/decode")) {
    std::ifstream in{entry.path(), std::ios::binary};
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().filename().string() << " (regenerate: build/test/gwtf-fuzz-seeds test/fuzz/corpus)");
    CHECK(std::holds_alternative<message>(decode(bytes.data(), bytes.size())));
    ++seeds;
  }
  CHECK(seeds == static_cast<int>(std::variant_size_v<message>) + 1); // + a sparse activation
}

TEST_CASE("codec: peek_kind names every kind without decoding, and garbage as such") {
  for (auto& m : gwtf::test::all_samples()) {
    auto bytes = encode(m);
    CHECK(peek_kind(bytes.data(), bytes.size()) == std::string{kind_name(m)});
  }
  auto bytes = encode(gwtf::test::all_samples()[5]);
  bytes[bytes.size() / 2] ^= 0xff; // a body byte: the kind is still readable
  CHECK(peek_kind(bytes.data(), bytes.size()) == "activation");
  std::vector<std::uint8_t> junk(64, 0xab);
  CHECK(peek_kind(junk.data(), junk.size()) == "not a wire message");
  CHECK(peek_kind(junk.data(), 7) == "not a wire message");
  CHECK(peek_kind(nullptr, 0) == "not a wire message");
}

TEST_CASE("codec: an int8 gradient chunk carries a scale per block of 128 values, from a block's start") {
  std::vector<std::uint8_t> q(300, 0x7f);
  gradient_chunk g;
  g.iteration = 3;
  g.stage = 1;
  g.contributors = {"r1"};
  g.offset = 256;
  g.total_elements = 1000;
  g.values = tensor_payload::copy_of(dtype::int8, {300}, q.data(), q.size());
  g.scales = {0.5f, 0.25f, 0.125f};
  auto back = decode(encode(message{g}).data(), encode(message{g}).size());
  REQUIRE(std::holds_alternative<message>(back));
  CHECK(std::get<message>(back) == message{g});
  auto bf = g;
  bf.values = tensor_payload::copy_of(dtype::bfloat16, {300}, std::vector<std::uint8_t>(600, 1).data(), 600);
  bf.scales.clear();
  auto ok = decode(encode(message{bf}).data(), encode(message{bf}).size());
  CHECK(std::holds_alternative<message>(ok));

  auto few = g;
  few.scales.pop_back();
  CHECK(reject(encode(message{few})).detail == "gradientChunk.scales: 2 scales for 300 int8 values (expected 3)");
  auto shifted = g;
  shifted.offset = 200;
  CHECK(reject(encode(message{shifted})).detail
        == "gradientChunk.offset: 200, not at a block of int8 values (a multiple of 128)");
  auto negative = g;
  negative.scales[1] = -1.0f;
  CHECK(reject(encode(message{negative})).detail == "gradientChunk.scales[1]: a finite scale >= 0");
  auto stray = bf;
  stray.scales = {1.0f};
  CHECK(reject(encode(message{stray})).detail == "gradientChunk.scales: 1 scales for 300 unscaled values (expected 0)");
  auto ints = g;
  ints.values = tensor_payload::copy_of(dtype::int32, {300}, std::vector<std::uint8_t>(1200, 0).data(), 1200);
  ints.scales.clear();
  CHECK(reject(encode(message{ints})).detail
        == "gradientChunk.values: a dense 1-D float32, bfloat16, int8 or int64 tensor");
  auto exact = g; // exact sums (training.reproducible_sums: exact): int64, unscaled
  exact.values = tensor_payload::copy_of(dtype::int64, {300}, std::vector<std::uint8_t>(2400, 7).data(), 2400);
  exact.scales.clear();
  auto bytes = encode(message{exact});
  auto exact_back = decode(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<message>(exact_back));
  CHECK(std::get<message>(exact_back) == message{exact});
  exact.scales = {1.0f, 1.0f, 1.0f};
  CHECK(reject(encode(message{exact})).detail == "gradientChunk.scales: 3 scales for 300 unscaled values (expected 0)");
}

TEST_CASE("codec: a butterfly part names a sorted group, and a reduced part each contributor's microbatches") {
  gradient_chunk g;
  g.iteration = 3;
  g.stage = 1;
  g.contributors = {"r1", "r2"};
  g.microbatches = 5;
  g.holders = {{"h0", 5}};
  g.offset = 256;
  g.total_elements = 1000;
  g.values = tensor_payload::copy_of(dtype::float32, {4}, std::vector<std::uint8_t>(16, 0).data(), 16);
  g.group = {"r1", "r2", "r3"};
  g.reduced = true;
  g.counts = {2, 3};
  g.keys_digest = 0xfedcba9876543210ull;
  auto back = decode(encode(message{g}).data(), encode(message{g}).size());
  REQUIRE(std::holds_alternative<message>(back));
  CHECK(std::get<message>(back) == message{g});

  auto unsorted = g;
  unsorted.group = {"r2", "r1", "r3"};
  CHECK(reject(encode(message{unsorted})).detail
        == "gradientChunk.group[1]: r1, not after r2 (the group is sorted, each name once)");
  auto twice = g;
  twice.group = {"r1", "r1", "r3"};
  CHECK(reject(encode(message{twice})).detail
        == "gradientChunk.group[1]: r1, not after r1 (the group is sorted, each name once)");
  auto lone = g;
  lone.group.clear();
  CHECK(reject(encode(message{lone})).detail == "gradientChunk.reduced: a reduced part without a group");
  auto short_counts = g;
  short_counts.counts = {5};
  CHECK(reject(encode(message{short_counts})).detail == "gradientChunk.counts: 1 counts for 2 contributors");
  auto wrong_sum = g;
  wrong_sum.counts = {1, 3};
  CHECK(reject(encode(message{wrong_sum})).detail == "gradientChunk.counts: 4 microbatches in all, not the chunk's 5");
  auto wraps = g;
  wraps.counts = {2, std::numeric_limits<std::uint64_t>::max()};
  CHECK(reject(encode(message{wraps})).detail
        == "gradientChunk.counts[1]: 18446744073709551615 more, past the chunk's 5 microbatches");
  auto part = g;
  part.reduced = false;
  CHECK(reject(encode(message{part})).detail
        == "gradientChunk.counts: 2 counts for a chunk that is not a reduced part (expected 0)");
  part.counts.clear();
  CHECK(std::holds_alternative<message>(decode(encode(message{part}).data(), encode(message{part}).size())));
}
