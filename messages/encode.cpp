// Wire messages -> bytes: one Cap'n Proto envelope per message (messages/codec.hpp).
#include "messages/codec.hpp"

#include <cstring>

#include "messages/codec_internal.hpp"

namespace gwtf::wire {

namespace {

// Text with its length: never truncated at an embedded NUL (the decoder rejects those).
capnp::Text::Reader txt(const std::string& s) {
  return capnp::Text::Reader(s.data(), s.size());
}

void put(schema::Hello::Builder b, const hello& x) {
  b.setPeerId(txt(x.peer_id));
  b.setAddress(txt(x.address));
  b.setRole(static_cast<schema::Role>(x.role));
  b.setStage(x.stage);
  b.setCapacity(x.capacity);
  b.setIncarnation(x.incarnation);
  b.setRegion(txt(x.region));
  b.setCluster(x.cluster);
  auto held = b.initCheckpoints(static_cast<unsigned>(x.checkpoints.size()));
  for (unsigned i = 0; i < x.checkpoints.size(); ++i) {
    held[i].setStage(x.checkpoints[i].stage);
    held[i].setIteration(x.checkpoints[i].iteration);
  }
}

void put(schema::MicrobatchRef::Builder b, const microbatch_ref& x) {
  b.setIteration(x.iteration);
  b.setHolder(x.holder);
  b.setIndex(x.index);
  b.setOrigin(x.origin);
}

void put(schema::TargetCost::Builder b, const target_cost& x) {
  b.setTarget(txt(x.target));
  b.setCost(x.cost);
  b.setDemand(x.demand);
}

void put(schema::FlowEntry::Builder b, const flow_entry& x) {
  b.setFlowId(x.flow_id);
  b.setTarget(txt(x.target));
  b.setPrev(txt(x.prev));
  b.setNext(txt(x.next));
  b.setHeadCost(x.head_cost);
  b.setInCost(x.in_cost);
  b.setOutCost(x.out_cost);
  b.setTailCost(x.tail_cost);
}

template <class ListBuilder, class T>
void put_list(ListBuilder list, const std::vector<T>& xs) {
  for (unsigned i = 0; i < xs.size(); ++i)
    put(list[i], xs[i]);
}

template <class ListBuilder>
void put_texts(ListBuilder list, const std::vector<std::string>& xs) {
  for (unsigned i = 0; i < xs.size(); ++i)
    list.set(i, txt(xs[i]));
}

void put_done(schema::IterationDone::Builder b, const iteration_done& x) {
  b.setIteration(x.iteration);
  b.setHolder(txt(x.holder));
  b.setMicrobatches(x.microbatches);
  b.setLossSum(x.loss_sum);
  put_texts(b.initParticipants(static_cast<unsigned>(x.participants.size())), x.participants);
}

void put_counts(capnp::List<schema::HolderCount>::Builder b, const std::vector<holder_count>& x) {
  for (unsigned i = 0; i < x.size(); ++i) {
    b[i].setHolder(txt(x[i].holder));
    b[i].setMicrobatches(x[i].microbatches);
  }
}

// Tensor bytes: referenced in place when Cap'n Proto allows it (word-aligned start, whole
// words), so the only copy is the flattening into the output buffer.
void put(schema::Tensor::Builder b, const tensor_payload& x, capnp::MessageBuilder& msg) {
  b.setDtype(static_cast<schema::DType>(x.type));
  auto shape = b.initShape(static_cast<unsigned>(x.shape.size()));
  for (unsigned i = 0; i < x.shape.size(); ++i)
    shape.set(i, x.shape[i]);
  if (x.sparse) {
    b.setLayout(schema::Layout::SPARSE);
    auto idx = b.initIndices(static_cast<unsigned>(x.indices.size()));
    for (unsigned i = 0; i < x.indices.size(); ++i)
      idx.set(i, x.indices[i]);
  }
  auto* p = x.bytes.get();
  if (x.size > 0 && reinterpret_cast<std::uintptr_t>(p) % sizeof(capnp::word) == 0
      && x.size % sizeof(capnp::word) == 0) {
    b.adoptData(msg.getOrphanage().referenceExternalData(capnp::Data::Reader(p, x.size)));
  } else {
    auto d = b.initData(static_cast<unsigned>(x.size));
    if (x.size > 0)
      std::memcpy(d.begin(), p, x.size);
  }
}

struct filler {
  body_builder body;
  capnp::MessageBuilder& msg;

  void operator()(const hello& x) { put(body.initHello(), x); }
  void operator()(const leave& x) {
    auto b = body.initLeave();
    b.setPeerId(txt(x.peer_id));
    b.setIncarnation(x.incarnation);
    b.setDrained(x.drained);
  }
  void operator()(const gossip& x) {
    auto list = body.initGossip().initPeers(static_cast<unsigned>(x.peers.size()));
    for (unsigned i = 0; i < x.peers.size(); ++i) {
      put(list[i].initHello(), x.peers[i].peer);
      list[i].setHeartbeat(x.peers[i].heartbeat);
      list[i].setSuspected(x.peers[i].suspected);
    }
  }
  void operator()(const join_request& x) { put(body.initJoinRequest().initHello(), x.peer); }
  void operator()(const join_reply& x) {
    auto b = body.initJoinReply();
    b.setAccepted(x.accepted);
    b.setStage(x.stage);
    put_texts(b.initReplicas(static_cast<unsigned>(x.replicas.size())), x.replicas);
    b.setReason(txt(x.reason));
  }
  void operator()(const activation& x) {
    auto b = body.initActivation();
    put(b.initMicrobatch(), x.microbatch);
    b.setDirection(static_cast<schema::Direction>(x.dir));
    put_texts(b.initPath(static_cast<unsigned>(x.path.size())), x.path);
    put(b.initTensor(), x.tensor, msg);
    b.setAttempt(x.attempt);
    if (!x.continue_to.empty())
      b.setContinueTo(txt(x.continue_to));
    b.setCall(static_cast<schema::Call>(x.call));
    if (x.input.size > 0)
      put(b.initInput(), x.input, msg);
    b.setStage(x.stage);
  }
  void operator()(const introduction& x) {
    auto b = body.initIntroduction();
    b.setPeerId(txt(x.peer_id));
    b.setStage(x.stage);
    b.setCapacity(x.capacity);
    put_list(b.initCosts(static_cast<unsigned>(x.costs.size())), x.costs);
  }
  void operator()(const cost_advert& x) {
    put_list(body.initCostAdvert().initCosts(static_cast<unsigned>(x.costs.size())), x.costs);
  }
  void operator()(const flow_request& x) {
    auto b = body.initFlowRequest();
    b.setFlowId(x.flow_id);
    b.setTarget(txt(x.target));
    b.setAdvertisedCost(x.advertised_cost);
    b.setHolderFlows(x.holder_flows);
    b.setReplaces(x.replaces);
  }
  void operator()(const flow_response& x) {
    auto b = body.initFlowResponse();
    b.setFlowId(x.flow_id);
    b.setAccepted(x.accepted);
    b.setReason(static_cast<schema::RejectReason>(x.reason));
    b.setCurrentCost(x.current_cost);
    b.setDemand(x.demand);
  }
  void operator()(const flow_listing& x) {
    auto b = body.initFlowListing();
    b.setPeerId(txt(x.peer_id));
    put_list(b.initFlows(static_cast<unsigned>(x.flows.size())), x.flows);
  }
  void operator()(const move_proposal& x) {
    auto b = body.initMoveProposal();
    b.setProposalId(x.proposal_id);
    b.setKind(static_cast<schema::MoveKind>(x.kind));
    put_list(b.initFlows(static_cast<unsigned>(x.flows.size())), x.flows);
    b.setMaxCostBefore(x.max_cost_before);
    b.setMaxCostAfter(x.max_cost_after);
    b.setTemperature(x.temperature);
  }
  void operator()(const move_response& x) {
    auto b = body.initMoveResponse();
    b.setProposalId(x.proposal_id);
    b.setAccepted(x.accepted);
    b.setFlowId(x.flow_id);
  }
  void operator()(const flow_sync& x) {
    auto b = body.initFlowSync();
    b.setKind(static_cast<schema::SyncKind>(x.kind));
    b.setFlowId(x.flow_id);
    b.setTarget(txt(x.target));
    b.setCost(x.cost);
    b.setNode(txt(x.node));
    b.setHolderFlows(x.holder_flows);
    b.setOthersCost(x.others_cost);
  }
  void operator()(const ping& x) {
    auto b = body.initPing();
    b.setProbeId(x.probe_id);
    b.setSentNanos(x.sent_nanos);
    b.setPadding(capnp::Data::Reader(x.padding.data(), x.padding.size()));
  }
  void operator()(const pong& x) {
    auto b = body.initPong();
    b.setProbeId(x.probe_id);
    b.setSentNanos(x.sent_nanos);
    b.setReceivedBytes(x.received_bytes);
    b.setComputeSeconds(x.compute_seconds);
  }
  void operator()(const bandwidth_sample& x) {
    auto b = body.initBandwidthSample();
    b.setPeer(txt(x.peer));
    b.setBytes(x.bytes);
    b.setNanos(x.nanos);
  }
  void operator()(const gradient_chunk& x) {
    auto b = body.initGradientChunk();
    b.setIteration(x.iteration);
    b.setStage(x.stage);
    put_texts(b.initContributors(static_cast<unsigned>(x.contributors.size())), x.contributors);
    b.setMicrobatches(x.microbatches);
    b.setOffset(x.offset);
    b.setTotalElements(x.total_elements);
    put(b.initValues(), x.values, msg);
    auto reports = b.initReports(static_cast<unsigned>(x.reports.size()));
    for (unsigned i = 0; i < x.reports.size(); ++i)
      put_done(reports[i], x.reports[i]);
    put_counts(b.initHolders(static_cast<unsigned>(x.holders.size())), x.holders);
    auto scales = b.initScales(static_cast<unsigned>(x.scales.size()));
    for (unsigned i = 0; i < x.scales.size(); ++i)
      scales.set(i, x.scales[i]);
    put_texts(b.initGroup(static_cast<unsigned>(x.group.size())), x.group);
    b.setReduced(x.reduced);
    auto counts = b.initCounts(static_cast<unsigned>(x.counts.size()));
    for (unsigned i = 0; i < x.counts.size(); ++i)
      counts.set(i, x.counts[i]);
    b.setKeysDigest(x.keys_digest);
  }
  void operator()(const norm_share& x) {
    auto b = body.initNormShare();
    b.setIteration(x.iteration);
    b.setStage(x.stage);
    b.setSumSquares(x.sum_squares);
    put_counts(b.initHolders(static_cast<unsigned>(x.holders.size())), x.holders);
  }
  void operator()(const state_request& x) {
    auto b = body.initStateRequest();
    b.setTransferId(x.transfer_id);
    b.setStage(x.stage);
    b.setCheckpoint(x.checkpoint);
    b.setIteration(x.iteration);
  }
  void operator()(const state_chunk& x) {
    auto b = body.initStateChunk();
    b.setTransferId(x.transfer_id);
    b.setStage(x.stage);
    b.setOffset(x.offset);
    b.setTotalBytes(x.total_bytes);
    b.setData(capnp::Data::Reader(x.data.data(), x.data.size()));
  }
  void operator()(const fragment& x) {
    auto b = body.initFragment();
    b.setId(x.id);
    b.setOffset(x.offset);
    b.setTotalBytes(x.total_bytes);
    b.setData(capnp::Data::Reader(x.data.data(), x.data.size()));
  }
  void operator()(const hop_progress& x) {
    auto b = body.initHopProgress();
    put(b.initMicrobatch(), x.microbatch);
    put_texts(b.initPath(static_cast<unsigned>(x.path.size())), x.path);
  }
  void operator()(const iteration_done& x) { put_done(body.initIterationDone(), x); }
  void operator()(const replica_hash& x) {
    auto b = body.initReplicaHash();
    b.setIteration(x.iteration);
    b.setStage(x.stage);
    b.setHash(x.hash);
  }
  void operator()(const restore& x) {
    auto b = body.initRestore();
    b.setStage(x.stage);
    b.setIteration(x.iteration);
    b.setRestorer(txt(x.restorer));
    b.setFromStage(x.from_stage);
    b.setDecidedBy(txt(x.decided_by));
  }
  void operator()(const stage_move& x) {
    auto b = body.initStageMove();
    b.setStage(x.stage);
    b.setFromStage(x.from_stage);
    b.setIteration(x.iteration);
    b.setDecidedBy(txt(x.decided_by));
  }
  void operator()(const inspect_request& x) {
    auto b = body.initInspectRequest();
    b.setRequestId(x.request_id);
    b.setQuery(txt(x.query));
  }
  void operator()(const inspect_reply& x) {
    auto b = body.initInspectReply();
    b.setRequestId(x.request_id);
    b.setOk(x.ok);
    b.setBody(txt(x.body));
  }
};

} // namespace

std::vector<std::uint8_t> encode(const message& msg) {
  std::vector<std::uint8_t> out;
  encode(msg, out);
  return out;
}

void encode(const message& msg, std::vector<std::uint8_t>& out) {
  capnp::MallocMessageBuilder builder;
  auto env = builder.initRoot<schema::Envelope>();
  env.setMagic(schema::ENVELOPE_MAGIC);
  env.setVersion(schema::PROTOCOL_VERSION);
  std::visit(filler{env.initBody(), builder}, msg);
  // One copy of everything (tensor bytes included) into the output buffer.
  auto segments = builder.getSegmentsForOutput();
  out.resize(capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word));
  kj::ArrayOutputStream stream(kj::ArrayPtr<kj::byte>(out.data(), out.size()));
  capnp::writeMessage(stream, segments);
}

} // namespace gwtf::wire
