// Bytes -> wire messages: the security boundary. Every input is hostile; every field is checked
// against messages/codec_limits.hpp and its documented range, and a failure is a typed value
// (messages/codec.hpp), never a crash.
#include "messages/codec.hpp"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "common/share_format.hpp"
#include "messages/codec_internal.hpp"
#include "messages/codec_limits.hpp"

namespace gwtf::wire {

namespace {

using namespace limit;

wire_failure fail(wire_error code, std::string detail) {
  return wire_failure{code, std::move(detail)};
}

// ===== decoding ==========================================================================

// Collects the first failure; every check after it is a no-op returning false.
class checker {
public:
  std::optional<wire_failure> failure;
  // When set, the message's bytes live in this buffer for as long as the owner: tensor
  // payloads may point into it instead of copying.
  std::shared_ptr<const void> owner;

  bool ok() const { return !failure; }

  bool bad(wire_error code, std::string detail) {
    if (!failure)
      failure = fail(code, std::move(detail));
    return false;
  }

  enum class charset {
    id,        // host and data holder names: [A-Za-z0-9._-], as in the config
    printable, // addresses: ASCII 0x21..0x7e
    any,       // free text: anything but NUL
  };

  bool text(capnp::Text::Reader t, const std::string& field, std::size_t min, std::size_t max,
            std::string& out, charset allowed = charset::id) {
    if (!ok())
      return false;
    if (t.size() < min || t.size() > max)
      return bad(wire_error::bad_field, field + ": " + std::to_string(min) + ".." + std::to_string(max)
                                          + " bytes, got " + std::to_string(t.size()));
    for (std::size_t i = 0; i < t.size(); ++i) {
      auto ch = static_cast<unsigned char>(t[i]);
      bool good = allowed == charset::any         ? ch != 0
                  : allowed == charset::printable ? ch >= 0x21 && ch <= 0x7e
                                                  : std::isalnum(ch) || ch == '.' || ch == '_' || ch == '-';
      if (!good)
        return bad(wire_error::bad_field, field + ": byte " + std::to_string(i) + " (0x"
                                            + hex(ch) + ") is not allowed here");
    }
    out.assign(t.cStr(), t.size());
    return true;
  }

  static std::string hex(unsigned char ch) {
    const char* digits = "0123456789abcdef";
    return {digits[ch >> 4], digits[ch & 15]};
  }

  bool count(std::size_t n, const std::string& field, std::size_t max) {
    if (ok() && n > max)
      return bad(wire_error::bad_field, field + ": at most " + std::to_string(max)
                                          + " entries, got " + std::to_string(n));
    return ok();
  }

  bool non_negative(double v, const std::string& field, double& out) {
    if (ok() && !(std::isfinite(v) && v >= 0))
      return bad(wire_error::bad_field, field + ": a finite number >= 0, got " + std::to_string(v));
    out = v;
    return ok();
  }

  template <class Out, class In>
  bool enumeration(In v, unsigned values, const std::string& field, Out& out) {
    auto raw = static_cast<unsigned>(v);
    if (ok() && raw >= values)
      return bad(wire_error::bad_enum, field + ": " + std::to_string(raw) + " is not one of the "
                                         + std::to_string(values) + " known values");
    out = static_cast<Out>(raw);
    return ok();
  }

  template <class T>
  bool in_range(long long v, long long lo, long long hi, const std::string& field, T& out) {
    if (ok() && (v < lo || v > hi))
      return bad(wire_error::bad_field, field + ": " + std::to_string(lo) + ".." + std::to_string(hi)
                                          + ", got " + std::to_string(v));
    out = static_cast<T>(v);
    return ok();
  }
};

std::string at(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

void get(schema::Hello::Reader r, hello& x, checker& c, const std::string& f) {
  c.text(r.getPeerId(), f + ".peerId", 1, max_id, x.peer_id);
  c.text(r.getAddress(), f + ".address", 1, max_address, x.address, checker::charset::printable);
  c.enumeration(r.getRole(), 2, f + ".role", x.role);
  c.in_range(r.getStage(), -1, max_stage, f + ".stage", x.stage);
  // -1: a data holder that joins (or rejoins after a hang) and is downloading its state.
  if (c.ok() && x.role == peer_role::data_holder && x.stage != 0 && x.stage != -1)
    c.bad(wire_error::bad_field, f + ".stage: 0 (or -1 while it downloads its state) for a data holder, got "
                                   + std::to_string(x.stage));
  c.in_range(r.getCapacity(), 1, max_capacity, f + ".capacity", x.capacity);
  x.incarnation = r.getIncarnation();
  c.text(r.getRegion(), f + ".region", 0, max_id, x.region);
  x.cluster = r.getCluster();
  auto held = r.getCheckpoints();
  if (!c.count(held.size(), f + ".checkpoints", max_peers))
    return;
  x.checkpoints.resize(held.size());
  for (unsigned i = 0; i < held.size() && c.ok(); ++i) {
    c.in_range(held[i].getStage(), 0, max_stage, at(f + ".checkpoints", i) + ".stage", x.checkpoints[i].stage);
    x.checkpoints[i].iteration = held[i].getIteration();
  }
}

void get_texts(capnp::List<capnp::Text>::Reader list, std::vector<std::string>& out, checker& c,
               const std::string& f, std::size_t min_entries, std::size_t max_entries) {
  if (c.ok() && list.size() < min_entries)
    c.bad(wire_error::bad_field, f + ": at least " + std::to_string(min_entries) + " entries");
  if (!c.count(list.size(), f, max_entries))
    return;
  out.resize(list.size());
  for (unsigned i = 0; i < list.size() && c.ok(); ++i)
    c.text(list[i], at(f, i), 1, max_id, out[i]);
}

// Microbatches per data holder: each holder named once; returns their sum.
std::uint64_t get_counts(capnp::List<schema::HolderCount>::Reader list, std::vector<holder_count>& out, checker& c,
                         const std::string& f) {
  std::uint64_t total = 0;
  if (!c.count(list.size(), f, max_peers))
    return total;
  out.resize(list.size());
  std::set<std::string> seen;
  for (unsigned i = 0; i < list.size() && c.ok(); ++i) {
    c.text(list[i].getHolder(), at(f, i) + ".holder", 1, max_id, out[i].holder);
    out[i].microbatches = list[i].getMicrobatches();
    total += out[i].microbatches;
    if (c.ok() && !seen.insert(out[i].holder).second)
      c.bad(wire_error::bad_field, at(f, i) + ".holder: " + out[i].holder + " named twice");
  }
  return total;
}

void get(schema::TargetCost::Reader r, target_cost& x, checker& c, const std::string& f) {
  c.text(r.getTarget(), f + ".target", 1, max_id, x.target);
  c.non_negative(r.getCost(), f + ".cost", x.cost);
  x.demand = r.getDemand();
}

void get(schema::FlowEntry::Reader r, flow_entry& x, checker& c, const std::string& f) {
  x.flow_id = r.getFlowId();
  c.text(r.getTarget(), f + ".target", 1, max_id, x.target);
  c.text(r.getPrev(), f + ".prev", 0, max_id, x.prev);
  c.text(r.getNext(), f + ".next", 0, max_id, x.next);
  c.non_negative(r.getHeadCost(), f + ".headCost", x.head_cost);
  c.non_negative(r.getInCost(), f + ".inCost", x.in_cost);
  c.non_negative(r.getOutCost(), f + ".outCost", x.out_cost);
  c.non_negative(r.getTailCost(), f + ".tailCost", x.tail_cost);
}

template <class ListReader, class T>
void get_list(ListReader list, std::vector<T>& out, checker& c, const std::string& f, std::size_t max) {
  if (!c.count(list.size(), f, max))
    return;
  out.resize(list.size());
  for (unsigned i = 0; i < list.size() && c.ok(); ++i)
    get(list[i], out[i], c, at(f, i));
}

// A sparse tensor's positions: one per value, strictly increasing, inside the shape's
// `elements` (so each is unique and a receiver may scatter them without a check).
void get_indices(schema::Tensor::Reader r, tensor_payload& x, checker& c, const std::string& f,
                 unsigned __int128 elements) {
  auto idx = r.getIndices();
  auto values = x.size / dtype_size(x.type);
  if (idx.size() != values) {
    c.bad(wire_error::bad_field, f + ".indices: " + std::to_string(idx.size()) + " positions for "
                                   + std::to_string(values) + " values");
    return;
  }
  x.indices.resize(idx.size());
  for (unsigned i = 0; i < idx.size(); ++i) {
    auto v = idx[i];
    if ((i > 0 && v <= x.indices[i - 1]) || v >= elements) {
      c.bad(wire_error::bad_field, at(f + ".indices", i) + ": " + std::to_string(v)
                                     + (v >= elements ? " is outside the shape's "
                                                          + std::to_string(static_cast<std::uint64_t>(elements))
                                                          + " elements"
                                                      : " does not follow " + std::to_string(x.indices[i - 1])
                                                          + " (positions strictly increase)"));
      x.indices.clear();
      return;
    }
    x.indices[i] = v;
  }
}

// The one copy of tensor bytes: out of the message into a buffer the payload owns.
// `sparse_ok`: the field may hold a sparse tensor (activations); elsewhere it is refused.
void get(schema::Tensor::Reader r, tensor_payload& x, checker& c, const std::string& f, bool sparse_ok = false) {
  c.enumeration(r.getDtype(), 6, f + ".dtype", x.type);
  c.enumeration(r.getLayout(), 2, f + ".layout", x.sparse);
  if (c.ok() && x.sparse && !sparse_ok)
    c.bad(wire_error::bad_field, f + ": a dense tensor here, got a sparse one");
  if (c.ok() && !x.sparse && r.getIndices().size() > 0)
    c.bad(wire_error::bad_field, f + ".indices: a dense tensor has none, got " + std::to_string(r.getIndices().size()));
  if (!c.ok())
    return;
  auto shape = r.getShape();
  if (!c.count(shape.size(), f + ".shape", max_dims))
    return;
  // Product of dims in bytes, with overflow checked: never trust the shape.
  unsigned __int128 bytes = dtype_size(x.type);
  x.shape.resize(shape.size());
  for (unsigned i = 0; i < shape.size(); ++i) {
    auto d = shape[i];
    if (d < 0)
      c.bad(wire_error::bad_field, at(f + ".shape", i) + ": negative dimension " + std::to_string(d));
    if (!c.ok())
      return;
    x.shape[i] = d;
    bytes *= static_cast<unsigned __int128>(d);
    if (bytes > std::numeric_limits<std::uint32_t>::max())
      bytes = std::numeric_limits<std::uint32_t>::max() + static_cast<unsigned __int128>(1);
  }
  auto data = r.getData();
  if (x.sparse) {
    // The values of a sparse tensor: whole values, at most one per element.
    auto size = dtype_size(x.type);
    unsigned __int128 elements = bytes / size;
    if (data.size() % size != 0 || data.size() / size > elements) {
      c.bad(wire_error::bad_field, f + ".data: " + std::to_string(data.size()) + " bytes are not at most "
                                     + std::to_string(static_cast<std::uint64_t>(elements)) + " whole values of "
                                     + std::to_string(size) + " bytes");
      return;
    }
    x.size = data.size();
    get_indices(r, x, c, f, elements);
    if (!c.ok())
      return;
  } else if (bytes != data.size()) {
    c.bad(wire_error::bad_field, f + ": shape and dtype need "
                                   + (bytes > std::numeric_limits<std::uint32_t>::max()
                                        ? std::string{"more than 4 GiB"}
                                        : std::to_string(static_cast<std::uint64_t>(bytes)) + " bytes")
                                   + ", data has " + std::to_string(data.size()));
    return;
  }
  if (c.owner) {
    x.bytes = std::shared_ptr<const std::uint8_t>(c.owner, data.begin());
    x.size = data.size();
  } else {
    auto copy = tensor_payload::copy_of(x.type, std::move(x.shape), data.begin(), data.size());
    copy.sparse = x.sparse;
    copy.indices = std::move(x.indices);
    x = std::move(copy);
  }
}

void get(schema::Leave::Reader r, leave& x, checker& c) {
  c.text(r.getPeerId(), "leave.peerId", 1, max_id, x.peer_id);
  x.incarnation = r.getIncarnation();
  x.drained = r.getDrained();
}

void get(schema::Hello::Reader r, hello& x, checker& c) { get(r, x, c, "hello"); }

void get(schema::Gossip::Reader r, gossip& x, checker& c) {
  auto list = r.getPeers();
  if (!c.count(list.size(), "gossip.peers", max_peers))
    return;
  x.peers.resize(list.size());
  for (unsigned i = 0; i < list.size() && c.ok(); ++i) {
    get(list[i].getHello(), x.peers[i].peer, c, at("gossip.peers", i) + ".hello");
    x.peers[i].heartbeat = list[i].getHeartbeat();
    x.peers[i].suspected = list[i].getSuspected();
  }
}

void get(schema::JoinRequest::Reader r, join_request& x, checker& c) {
  get(r.getHello(), x.peer, c, "joinRequest.hello");
}

void get(schema::JoinReply::Reader r, join_reply& x, checker& c) {
  x.accepted = r.getAccepted();
  c.in_range(r.getStage(), -1, max_stage, "joinReply.stage", x.stage);
  get_texts(r.getReplicas(), x.replicas, c, "joinReply.replicas", 0, max_peers);
  c.text(r.getReason(), "joinReply.reason", 0, max_text, x.reason, checker::charset::any);
}

void get(schema::Activation::Reader r, activation& x, checker& c) {
  auto mb = r.getMicrobatch();
  x.microbatch = microbatch_ref{mb.getIteration(), mb.getHolder(), mb.getIndex(), mb.getOrigin()};
  c.enumeration(r.getDirection(), 2, "activation.direction", x.dir);
  get_texts(r.getPath(), x.path, c, "activation.path", 1, max_path);
  if (c.ok())
    get(r.getTensor(), x.tensor, c, "activation.tensor", true);
  x.attempt = r.getAttempt();
  if (r.hasContinueTo() && r.getContinueTo().size() > 0)
    c.text(r.getContinueTo(), "activation.continueTo", 1, max_id, x.continue_to);
  c.enumeration(r.getCall(), 3, "activation.call", x.call);
  if (c.ok() && r.hasInput())
    get(r.getInput(), x.input, c, "activation.input", false);
  c.in_range(r.getStage(), 0, max_stage, "activation.stage", x.stage);
}

void get(schema::Introduction::Reader r, introduction& x, checker& c) {
  c.text(r.getPeerId(), "introduction.peerId", 1, max_id, x.peer_id);
  c.in_range(r.getStage(), 0, max_stage, "introduction.stage", x.stage);
  c.in_range(r.getCapacity(), 1, max_capacity, "introduction.capacity", x.capacity);
  get_list(r.getCosts(), x.costs, c, "introduction.costs", max_peers);
}

void get(schema::CostAdvert::Reader r, cost_advert& x, checker& c) {
  get_list(r.getCosts(), x.costs, c, "costAdvert.costs", max_peers);
}

void get(schema::FlowRequest::Reader r, flow_request& x, checker& c) {
  x.flow_id = r.getFlowId();
  c.text(r.getTarget(), "flowRequest.target", 1, max_id, x.target);
  c.non_negative(r.getAdvertisedCost(), "flowRequest.advertisedCost", x.advertised_cost);
  x.holder_flows = r.getHolderFlows();
  if (x.holder_flows > max_flows)
    c.bad(wire_error::bad_field, "flowRequest.holderFlows: at most " + std::to_string(max_flows) + ", got "
                                   + std::to_string(x.holder_flows));
  x.replaces = r.getReplaces();
}

void get(schema::FlowResponse::Reader r, flow_response& x, checker& c) {
  x.flow_id = r.getFlowId();
  x.accepted = r.getAccepted();
  c.enumeration(r.getReason(), 5, "flowResponse.reason", x.reason);
  if (c.ok() && x.accepted != (x.reason == reject_reason::none))
    c.bad(wire_error::bad_field, "flowResponse.reason: 'none' exactly when accepted");
  c.non_negative(r.getCurrentCost(), "flowResponse.currentCost", x.current_cost);
  x.demand = r.getDemand();
}

void get(schema::FlowListing::Reader r, flow_listing& x, checker& c) {
  c.text(r.getPeerId(), "flowListing.peerId", 1, max_id, x.peer_id);
  get_list(r.getFlows(), x.flows, c, "flowListing.flows", max_flows);
}

void get(schema::MoveProposal::Reader r, move_proposal& x, checker& c) {
  x.proposal_id = r.getProposalId();
  c.enumeration(r.getKind(), 2, "moveProposal.kind", x.kind);
  get_list(r.getFlows(), x.flows, c, "moveProposal.flows", 16);
  c.non_negative(r.getMaxCostBefore(), "moveProposal.maxCostBefore", x.max_cost_before);
  c.non_negative(r.getMaxCostAfter(), "moveProposal.maxCostAfter", x.max_cost_after);
  c.non_negative(r.getTemperature(), "moveProposal.temperature", x.temperature);
}

void get(schema::MoveResponse::Reader r, move_response& x, checker&) {
  x.proposal_id = r.getProposalId();
  x.accepted = r.getAccepted();
  x.flow_id = r.getFlowId();
}

void get(schema::FlowSync::Reader r, flow_sync& x, checker& c) {
  c.enumeration(r.getKind(), 5, "flowSync.kind", x.kind);
  x.flow_id = r.getFlowId();
  c.text(r.getTarget(), "flowSync.target", 1, max_id, x.target);
  c.non_negative(r.getCost(), "flowSync.cost", x.cost);
  c.text(r.getNode(), "flowSync.node", 0, max_id, x.node);
  if (c.ok() && (x.kind == sync_kind::redirect) == x.node.empty())
    c.bad(wire_error::bad_field, "flowSync.node: set exactly when kind is redirect");
  x.holder_flows = r.getHolderFlows();
  if (c.ok() && x.holder_flows > max_flows)
    c.bad(wire_error::bad_field, "flowSync.holderFlows: at most " + std::to_string(max_flows) + ", got "
                                   + std::to_string(x.holder_flows));
  c.non_negative(r.getOthersCost(), "flowSync.othersCost", x.others_cost);
}

void get(schema::Ping::Reader r, ping& x, checker&) {
  x.probe_id = r.getProbeId();
  x.sent_nanos = r.getSentNanos();
  auto pad = r.getPadding();
  x.padding.assign(pad.begin(), pad.end());
}

void get(schema::Pong::Reader r, pong& x, checker& c) {
  x.probe_id = r.getProbeId();
  x.sent_nanos = r.getSentNanos();
  x.received_bytes = r.getReceivedBytes();
  c.non_negative(r.getComputeSeconds(), "pong.computeSeconds", x.compute_seconds);
}

void get(schema::BandwidthSample::Reader r, bandwidth_sample& x, checker& c) {
  c.text(r.getPeer(), "bandwidthSample.peer", 1, max_id, x.peer);
  x.bytes = r.getBytes();
  c.in_range(r.getNanos(), 0, std::numeric_limits<std::int64_t>::max(), "bandwidthSample.nanos", x.nanos);
}

void get(schema::IterationDone::Reader r, iteration_done& x, checker& c, const std::string& f = "iterationDone") {
  x.iteration = r.getIteration();
  c.text(r.getHolder(), f + ".holder", 1, max_id, x.holder);
  x.microbatches = r.getMicrobatches();
  c.non_negative(r.getLossSum(), f + ".lossSum", x.loss_sum);
  get_texts(r.getParticipants(), x.participants, c, f + ".participants", 0, max_peers);
}

void get(schema::GradientChunk::Reader r, gradient_chunk& x, checker& c) {
  x.iteration = r.getIteration();
  c.in_range(r.getStage(), 0, max_stage, "gradientChunk.stage", x.stage);
  get_texts(r.getContributors(), x.contributors, c, "gradientChunk.contributors", 1, max_peers);
  x.microbatches = r.getMicrobatches();
  x.offset = r.getOffset();
  x.total_elements = r.getTotalElements();
  if (c.ok())
    get(r.getValues(), x.values, c, "gradientChunk.values");
  auto type = x.values.type;
  if (c.ok()
      && ((type != dtype::float32 && type != dtype::bfloat16 && type != dtype::int8 && type != dtype::int64)
          || x.values.sparse || x.values.shape.size() != 1))
    c.bad(wire_error::bad_field, "gradientChunk.values: a dense 1-D float32, bfloat16, int8 or int64 tensor");
  if (c.ok()) {
    auto n = static_cast<std::uint64_t>(x.values.shape[0]);
    if (x.offset > x.total_elements || n > x.total_elements - x.offset)
      c.bad(wire_error::bad_field, "gradientChunk: elements [" + std::to_string(x.offset) + ", +"
                                     + std::to_string(n) + ") exceed totalElements "
                                     + std::to_string(x.total_elements));
  }
  // int8 values come with one scale per block of share_int8_block values, from a block's start.
  auto scales = r.getScales();
  if (c.ok()) {
    auto n = static_cast<std::uint64_t>(x.values.shape[0]);
    auto blocks = type == dtype::int8 ? (n + gwtf::share_int8_block - 1) / gwtf::share_int8_block : 0;
    if (scales.size() != blocks)
      c.bad(wire_error::bad_field, "gradientChunk.scales: " + std::to_string(scales.size()) + " scales for "
                                     + std::to_string(n) + " " + (type == dtype::int8 ? "int8" : "unscaled")
                                     + " values (expected " + std::to_string(blocks) + ")");
    else if (type == dtype::int8 && x.offset % gwtf::share_int8_block != 0)
      c.bad(wire_error::bad_field, "gradientChunk.offset: " + std::to_string(x.offset)
                                     + ", not at a block of int8 values (a multiple of "
                                     + std::to_string(gwtf::share_int8_block) + ")");
  }
  if (c.ok()) {
    x.scales.resize(scales.size());
    for (unsigned i = 0; i < scales.size() && c.ok(); ++i) {
      float s = scales[i];
      if (!(std::isfinite(s) && s >= 0))
        c.bad(wire_error::bad_field, at("gradientChunk.scales", i) + ": a finite scale >= 0");
      x.scales[i] = s;
    }
  }
  auto reports = r.getReports();
  if (c.ok() && c.count(reports.size(), "gradientChunk.reports", max_peers)) {
    x.reports.resize(reports.size());
    for (unsigned i = 0; i < reports.size() && c.ok(); ++i) {
      get(reports[i], x.reports[i], c, at("gradientChunk.reports", i));
      if (c.ok() && x.reports[i].iteration != x.iteration)
        c.bad(wire_error::bad_field, at("gradientChunk.reports", i) + ".iteration: "
                                       + std::to_string(x.reports[i].iteration) + ", not the chunk's "
                                       + std::to_string(x.iteration));
    }
  }
  auto total = get_counts(r.getHolders(), x.holders, c, "gradientChunk.holders");
  if (c.ok() && total != x.microbatches)
    c.bad(wire_error::bad_field, "gradientChunk.holders: " + std::to_string(total)
                                   + " microbatches in all, not the chunk's " + std::to_string(x.microbatches));
  // Butterfly averaging: a sorted group of distinct names; a reduced part names each
  // contributor's microbatches.
  get_texts(r.getGroup(), x.group, c, "gradientChunk.group", 0, max_peers);
  for (std::size_t i = 1; i < x.group.size() && c.ok(); ++i)
    if (!(x.group[i - 1] < x.group[i]))
      c.bad(wire_error::bad_field, at("gradientChunk.group", static_cast<unsigned>(i)) + ": " + x.group[i]
                                     + ", not after " + x.group[i - 1] + " (the group is sorted, each name once)");
  x.reduced = r.getReduced();
  x.keys_digest = r.getKeysDigest();
  if (c.ok() && x.reduced && x.group.empty())
    c.bad(wire_error::bad_field, "gradientChunk.reduced: a reduced part without a group");
  auto counts = r.getCounts();
  if (c.ok() && counts.size() != (x.reduced ? x.contributors.size() : 0))
    c.bad(wire_error::bad_field, "gradientChunk.counts: " + std::to_string(counts.size()) + " counts for "
                                   + (x.reduced ? std::to_string(x.contributors.size()) + " contributors"
                                                : std::string{"a chunk that is not a reduced part (expected 0)"}));
  if (c.ok()) {
    std::uint64_t sum = 0;
    for (unsigned i = 0; i < counts.size() && c.ok(); ++i) {
      x.counts.push_back(counts[i]);
      if (counts[i] > x.microbatches - sum) // checked before adding: no sum wraps around
        c.bad(wire_error::bad_field, at("gradientChunk.counts", i) + ": " + std::to_string(counts[i])
                                       + " more, past the chunk's " + std::to_string(x.microbatches) + " microbatches");
      else
        sum += counts[i];
    }
    if (c.ok() && x.reduced && sum != x.microbatches)
      c.bad(wire_error::bad_field, "gradientChunk.counts: " + std::to_string(sum) + " microbatches in all, not the chunk's "
                                     + std::to_string(x.microbatches));
  }
}

void get(schema::NormShare::Reader r, norm_share& x, checker& c) {
  x.iteration = r.getIteration();
  c.in_range(r.getStage(), 0, max_stage, "normShare.stage", x.stage);
  c.non_negative(r.getSumSquares(), "normShare.sumSquares", x.sum_squares);
  if (c.ok())
    get_counts(r.getHolders(), x.holders, c, "normShare.holders");
  if (c.ok() && x.stage != 0 && !x.holders.empty())
    c.bad(wire_error::bad_field, "normShare.holders: only stage 0 names the holders it counted");
}

void get(schema::StateRequest::Reader r, state_request& x, checker& c) {
  x.transfer_id = r.getTransferId();
  c.in_range(r.getStage(), 0, max_stage, "stateRequest.stage", x.stage);
  x.checkpoint = r.getCheckpoint();
  x.iteration = r.getIteration();
}

void get(schema::Fragment::Reader r, fragment& x, checker& c) {
  x.id = r.getId();
  x.offset = r.getOffset();
  x.total_bytes = r.getTotalBytes();
  auto d = r.getData();
  if (c.ok() && (d.size() == 0 || x.offset >= x.total_bytes || d.size() > x.total_bytes - x.offset))
    c.bad(wire_error::bad_field, "fragment: bytes [" + std::to_string(x.offset) + ", +" + std::to_string(d.size())
                                   + ") are empty or exceed totalBytes " + std::to_string(x.total_bytes));
  if (c.ok())
    x.data.assign(d.begin(), d.end());
}

void get(schema::StateChunk::Reader r, state_chunk& x, checker& c) {
  x.transfer_id = r.getTransferId();
  c.in_range(r.getStage(), 0, max_stage, "stateChunk.stage", x.stage);
  x.offset = r.getOffset();
  x.total_bytes = r.getTotalBytes();
  auto d = r.getData();
  if (c.ok() && (x.offset > x.total_bytes || d.size() > x.total_bytes - x.offset))
    c.bad(wire_error::bad_field, "stateChunk: bytes [" + std::to_string(x.offset) + ", +"
                                   + std::to_string(d.size()) + ") exceed totalBytes "
                                   + std::to_string(x.total_bytes));
  if (c.ok())
    x.data.assign(d.begin(), d.end());
}

void get(schema::InspectRequest::Reader r, inspect_request& x, checker& c) {
  x.request_id = r.getRequestId();
  c.text(r.getQuery(), "inspectRequest.query", 1, max_query, x.query, checker::charset::any);
}

void get(schema::InspectReply::Reader r, inspect_reply& x, checker& c) {
  x.request_id = r.getRequestId();
  x.ok = r.getOk();
  c.text(r.getBody(), "inspectReply.body", 0, max_text, x.body, checker::charset::any);
}

void get(schema::HopProgress::Reader r, hop_progress& x, checker& c) {
  auto mb = r.getMicrobatch();
  x.microbatch = microbatch_ref{mb.getIteration(), mb.getHolder(), mb.getIndex(), mb.getOrigin()};
  get_texts(r.getPath(), x.path, c, "hopProgress.path", 2, max_path);
}


void get(schema::ReplicaHash::Reader r, replica_hash& x, checker& c) {
  x.iteration = r.getIteration();
  c.in_range(r.getStage(), 0, max_stage, "replicaHash.stage", x.stage);
  x.hash = r.getHash();
}

void get(schema::Restore::Reader r, restore& x, checker& c) {
  c.in_range(r.getStage(), 0, max_stage, "restore.stage", x.stage);
  x.iteration = r.getIteration();
  // Stage 0: a resume order (no stage lost): no restorer. Else the relay that takes the stage.
  c.text(r.getRestorer(), "restore.restorer", x.stage == 0 ? 0 : 1, x.stage == 0 ? 0 : max_id, x.restorer);
  c.in_range(r.getFromStage(), -1, x.stage == 0 ? -1 : max_stage, "restore.fromStage", x.from_stage);
  c.text(r.getDecidedBy(), "restore.decidedBy", 1, max_id, x.decided_by);
}

void get(schema::StageMove::Reader r, stage_move& x, checker& c) {
  c.in_range(r.getFromStage(), 1, max_stage, "stageMove.fromStage", x.from_stage);
  c.in_range(r.getStage(), 1, max_stage, "stageMove.stage", x.stage);
  if (c.ok() && x.stage == x.from_stage)
    c.bad(wire_error::bad_field, "stageMove.stage: the stage it moves from, " + std::to_string(x.stage));
  x.iteration = r.getIteration();
  c.text(r.getDecidedBy(), "stageMove.decidedBy", 1, max_id, x.decided_by);
}

template <class T, class Reader>
std::variant<message, wire_failure> finish(Reader r, const std::shared_ptr<const void>& owner) {
  checker c;
  c.owner = owner;
  T x;
  get(r, x, c);
  if (c.failure)
    return *c.failure;
  return message{std::move(x)};
}

std::variant<message, wire_failure> read_body(body_reader body, const std::shared_ptr<const void>& owner) {
  using B = schema::Envelope::Body;
  switch (body.which()) {
    case B::HELLO: return finish<hello>(body.getHello(), owner);
    case B::LEAVE: return finish<leave>(body.getLeave(), owner);
    case B::GOSSIP: return finish<gossip>(body.getGossip(), owner);
    case B::JOIN_REQUEST: return finish<join_request>(body.getJoinRequest(), owner);
    case B::JOIN_REPLY: return finish<join_reply>(body.getJoinReply(), owner);
    case B::ACTIVATION: return finish<activation>(body.getActivation(), owner);
    case B::INTRODUCTION: return finish<introduction>(body.getIntroduction(), owner);
    case B::COST_ADVERT: return finish<cost_advert>(body.getCostAdvert(), owner);
    case B::FLOW_REQUEST: return finish<flow_request>(body.getFlowRequest(), owner);
    case B::FLOW_RESPONSE: return finish<flow_response>(body.getFlowResponse(), owner);
    case B::FLOW_LISTING: return finish<flow_listing>(body.getFlowListing(), owner);
    case B::MOVE_PROPOSAL: return finish<move_proposal>(body.getMoveProposal(), owner);
    case B::MOVE_RESPONSE: return finish<move_response>(body.getMoveResponse(), owner);
    case B::FLOW_SYNC: return finish<flow_sync>(body.getFlowSync(), owner);
    case B::PING: return finish<ping>(body.getPing(), owner);
    case B::PONG: return finish<pong>(body.getPong(), owner);
    case B::BANDWIDTH_SAMPLE: return finish<bandwidth_sample>(body.getBandwidthSample(), owner);
    case B::GRADIENT_CHUNK: return finish<gradient_chunk>(body.getGradientChunk(), owner);
    case B::NORM_SHARE: return finish<norm_share>(body.getNormShare(), owner);
    case B::STATE_REQUEST: return finish<state_request>(body.getStateRequest(), owner);
    case B::STATE_CHUNK: return finish<state_chunk>(body.getStateChunk(), owner);
    case B::INSPECT_REQUEST: return finish<inspect_request>(body.getInspectRequest(), owner);
    case B::INSPECT_REPLY: return finish<inspect_reply>(body.getInspectReply(), owner);
    case B::HOP_PROGRESS: return finish<hop_progress>(body.getHopProgress(), owner);
    case B::ITERATION_DONE: return finish<iteration_done>(body.getIterationDone(), owner);
    case B::REPLICA_HASH: return finish<replica_hash>(body.getReplicaHash(), owner);
    case B::RESTORE: return finish<restore>(body.getRestore(), owner);
    case B::STAGE_MOVE: return finish<stage_move>(body.getStageMove(), owner);
    case B::FRAGMENT: return finish<fragment>(body.getFragment(), owner);
  }
  return fail(wire_error::bad_enum, "envelope.body: unknown message kind "
                                      + std::to_string(static_cast<unsigned>(body.which())));
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

namespace {

std::variant<message, wire_failure> decode_impl(const std::uint8_t* data, std::size_t size,
                                                const decode_limits& limits,
                                                std::shared_ptr<const void> owner) {
  if (size > limits.max_bytes)
    return fail(wire_error::too_large, std::to_string(size) + " bytes exceed the limit of "
                                         + std::to_string(limits.max_bytes));
  if (data == nullptr || size < sizeof(capnp::word) || size % sizeof(capnp::word) != 0)
    return fail(wire_error::truncated, std::to_string(size) + " bytes is not a whole number of "
                                         "8-byte words");
  aligned_words words{data, size};
  if (words.copy != nullptr)
    owner.reset(); // read from a private aligned copy: tensor bytes must be copied out
  try {
    auto expected = capnp::expectedSizeInWordsFromPrefix(words.view);
    if (expected > words.view.size())
      return fail(wire_error::truncated, "segment table announces " + std::to_string(expected * 8)
                                           + " bytes, got " + std::to_string(size));
    capnp::ReaderOptions options;
    // Bounds the work an amplification attack (pointers aliasing one object) can cause:
    // a valid message is traversed at most about once.
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
    return read_body(env.getBody(), owner);
  } catch (const kj::Exception& e) {
    return fail(wire_error::malformed, e.getDescription().cStr());
  }
}

} // namespace

std::string peek_kind(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size < sizeof(capnp::word) || size % sizeof(capnp::word) != 0)
    return "not a wire message";
  aligned_words words{data, size};
  try {
    if (capnp::expectedSizeInWordsFromPrefix(words.view) > words.view.size())
      return "not a wire message";
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 64; // the envelope's root struct only
    capnp::FlatArrayMessageReader reader{words.view, options};
    auto env = reader.getRoot<schema::Envelope>();
    if (env.getMagic() != schema::ENVELOPE_MAGIC)
      return "not a wire message";
    return kind_name_at(static_cast<std::size_t>(env.getBody().which()));
  } catch (const kj::Exception&) {
    return "not a wire message";
  }
}

std::variant<message, wire_failure> decode(const std::uint8_t* data, std::size_t size,
                                           const decode_limits& limits) {
  return decode_impl(data, size, limits, nullptr);
}

std::variant<message, wire_failure> decode(std::shared_ptr<const std::vector<std::uint8_t>> frame,
                                           const decode_limits& limits) {
  if (!frame)
    return fail(wire_error::truncated, "no frame");
  const auto* data = frame->data();
  auto size = frame->size();
  return decode_impl(data, size, limits, std::move(frame));
}

} // namespace gwtf::wire
