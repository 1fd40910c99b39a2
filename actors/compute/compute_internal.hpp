// Internal to the compute actor (actors/compute/stage_actor.cpp and its role files): its state and
// the functions the files share. The compute of a host is split by role:
//   stage_actor.cpp         the behaviour: messages in, peers up/down, resume after a boundary
//   compute_relay.cpp       forward and backward at a relay or the head stage
//   compute_holder.cpp      a data holder's iteration loop and its microbatch carriers
//   compute_aggregation.cpp the iteration boundary (share, average, apply), state download,
//                           the replica vote and the stall report
//   compute_atom.cpp        training.mode atom: the host as a whole-model peer (its own
//                           behaviour; docs/atom.md)
// The aggregation never calls back into the relay or the holder: its steps return a
// `boundary`, and the behaviour resumes the role (resume()).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>

#include "model/atom_peer.hpp"
#include "model/data.hpp"
#include "model/sizing.hpp"
#include "model/stage.hpp"
#include "model/transformer.hpp"
#include "routing/swarm.hpp"

#include <caf/all.hpp>

#include "actors/core/atom_rounds.hpp"
#include "actors/core/butterfly.hpp"
#include "actors/core/early_calls.hpp"
#include "actors/core/hop_ledger.hpp"
#include "actors/host/host_internal.hpp"
#include "actors/core/iteration_barrier.hpp"
#include "actors/core/replica_vote.hpp"
#include "actors/core/share_assembly.hpp"
#include "actors/core/stage_moves.hpp"
#include "actors/core/state_download.hpp"
#include "actors/compute/tensor_bridge.hpp"

namespace gwtf::actors::compute {

using ctx_ptr = std::shared_ptr<const host_context>;
using clock = std::chrono::steady_clock;

/// The largest stage state this model makes (weights, Adam's two moments and an overlapped
/// run's pending step: 16 bytes a parameter of its largest stage, and 4 MiB for names and
/// shapes): what a state download or a checkpoint copy may announce. Derived from the model,
/// not the frame limit: states cross in chunks.
inline std::uint64_t largest_state_bytes(const cluster_spec& spec) {
  std::int64_t most = 0;
  for (auto& span : model::partition(spec.model))
    most = std::max(most, model::size_of(spec.model, span).parameters);
  return 16 * static_cast<std::uint64_t>(most) + (4u << 20);
}

inline double since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

/// routing.router swarm: one call of a data holder to a stage (compute_swarm.cpp).
struct swarm_call {
  int stage = 0;
  bool backward = false;
  bool repair = false;      ///< a backward again: the peer that counted it died before its stage averaged
  std::string peer;         ///< empty: no peer of the stage was known; chosen again soon
  std::int64_t sent_ms = 0; ///< steady clock: its wall time is the router's throughput sample
};

/// routing.router swarm: what a data holder keeps of one microbatch for its calls.
struct swarm_trip {
  std::vector<torch::Tensor> inputs;   ///< [s]: stage s's input (1..S-1); [S]: the last stage's output
  std::vector<torch::Tensor> grads;    ///< [s]: the gradient of stage s's output
  std::vector<std::string> counted_at; ///< [s]: the peer whose backward of stage s came back
  std::map<std::uint32_t, swarm_call> calls; ///< under way, by call number (the wire's attempt)
};

// One microbatch that this data holder originates.
struct origin {
  torch::Tensor output;  ///< embedding output, kept for re-sends
  torch::Tensor targets;
  std::string first_hop;
  std::string next_next; ///< where first_hop sent it (HOP_PROGRESS): the re-send hint
  std::uint32_t attempt = 0;
  carrier_actor carrier;
  bool done = false;
  std::int64_t started_ms = 0; ///< when its forward began here (the shell's age)
  swarm_trip trip;             ///< routing.router swarm only
};

struct share_data {
  std::int64_t count = 0;
  wire::tensor_payload values;
  std::map<std::string, std::int64_t> holders; // microbatches per data holder (add up to count)
  bool part = false; // butterfly: a peer's count and holders only; its values went to the parts' owners
  std::uint64_t digest = 0; // its sender's exactly-once digest of the keys in it (actors/core/key_digest.hpp)
};

/// One iteration's butterfly averaging at this replica (actors/core/butterfly.hpp).
struct butterfly_state {
  std::optional<butterfly_round> round; ///< once this replica shared by butterfly
  bool whole = false;                   ///< fell back to whole shares (or never left them)
  /// Parts and reduced parts that came before this replica shared: taken once it has.
  std::vector<std::pair<std::string, wire::gradient_chunk>> early;
  /// int8: what the encoding of this replica's reduced part lost (error feedback, added to
  /// the residual when the iteration is applied).
  std::vector<float> reduce_error;
  std::int64_t heard_ms = 0; ///< when a chunk of the round last came (steady clock)
};

/// A relay's microbatches between forward and backward (compute_relay.cpp).
struct relay_stash {
  std::map<std::uint64_t, torch::Tensor> fwd_out, grad_out, head_grad;
  /// Microbatches whose input arrived sparse (compression.mode adaptive): where a value came
  /// (docs/compression.md). Their input gradient goes back only there.
  std::map<std::uint64_t, torch::Tensor> sparse_in;
  std::map<std::uint64_t, double> fwd_seconds;
  std::set<std::uint64_t> stalled;           // forward outputs that found no next hop yet
  std::deque<std::pair<std::string, wire::activation>> pending; // forwards before the weights
  // the shell (`microbatches`): when each held microbatch first arrived
  std::map<std::uint64_t, std::int64_t> arrived_ms;
  /// routing.router swarm: the microbatches whose backward calls this replica counted, until
  /// their iteration is applied (their input gradient in grad_out, for a call asked again).
  std::map<std::uint64_t, wire::microbatch_ref> swarm_counted;

  /// Forgets microbatch `k`'s tensors and timing (its hop is finished or void).
  void forget(std::uint64_t k) {
    fwd_out.erase(k);
    grad_out.erase(k);
    head_grad.erase(k);
    fwd_seconds.erase(k);
    sparse_in.erase(k);
  }
};

/// The iteration boundary: shares, averages, norms, the replica vote (compute_aggregation.cpp).
struct aggregation_state {
  std::map<std::uint64_t, std::map<std::string, share_data>> shares;
  /// The stage-mates' shares under way, chunk by chunk (actors/core/share_assembly.hpp).
  std::optional<share_assembler> incoming;
  std::set<std::uint64_t> shared, normed;
  std::map<std::uint64_t, std::vector<torch::Tensor>> averaged;
  std::map<std::uint64_t, wire::norm_share> my_norm; // this stage's norm, until the next is applied
  // This replica's share of the iteration applied last, until the next is applied: a
  // stage-mate met only after this host shared may still wait for it (catch_up).
  std::optional<wire::gradient_chunk> last_share;
  // int8's error feedback (training.share_compression): what the shares of the iterations
  // applied so far lost to rounding, added to the next share. Iteration i's share leaves
  // next_residual[i], which becomes the residual when i is applied (a share sent again after
  // a verdict is encoded from the same residual). A loaded state starts from none.
  std::vector<float> residual;
  std::map<std::uint64_t, std::vector<float>> next_residual;
  /// Butterfly averaging, by iteration (training.share_exchange).
  std::map<std::uint64_t, butterfly_state> bfly;
  std::uint64_t share_elements = 0; ///< values of a share: this stage's parameters
  std::size_t butterfly_noted = 0;  ///< the group size of the last butterfly round said in the log
  replica_vote vote;
  std::optional<wire::replica_hash> last_hash; // of the last step applied
  bool fresh = false; // loaded a state and applied no step since: may be behind the others
  // the shell (`stage`): when this iteration's gradients went to the replicas, and the last
  // optimizer step's boundary
  std::map<std::uint64_t, std::int64_t> shared_ms;
  struct aggregation {
    std::uint64_t iteration = 0;
    std::int64_t applied_ms = 0; // steady clock
    std::int64_t took_ms = 0;    // from sending its share to the optimizer step
  };
  std::optional<aggregation> last_aggregation;
  /// training.averaging overlap: the global norm of a pending step that came with a loaded
  /// state (its stages' norms were exchanged before this replica was one).
  std::map<std::uint64_t, double> loaded_norm;
  /// training.averaging overlap: state requests of stage-mates that wait until this replica's
  /// pending step is complete (a state is its weights and that step), served then.
  std::vector<std::pair<std::string, wire::state_request>> deferred_requests;
};

/// A state download (joiners, repairs; compute_aggregation.cpp).
struct fetch_state {
  state_download download;
  std::uint64_t transfers = 0; // downloads asked for (transfer ids)
  /// Resuming at this iteration without a checkpoint of its own: besides live replicas, every
  /// host is asked for the checkpoint of it that it keeps (docs/checkpoints.md).
  std::optional<std::uint64_t> copy_iteration;
  bool fetch_armed = false; // a new round of sources is due (fetch_atom)
};

/// A data holder's iteration loop (compute_holder.cpp).
struct holder_state {
  std::uint32_t holder_index = 0;
  bool running = false;
  std::map<std::uint64_t, origin> origins;
  std::map<std::uint64_t, double> losses;
  std::uint32_t done_count = 0;
  std::optional<wire::iteration_done> last_done; // this holder's report of `current`
  std::uint64_t next_carrier = 0;
  std::int64_t waited_ms = 0; // waiting for a flow
  std::int64_t roster_waited_ms = 0; // before the first iteration: waiting to hear every data holder
  /// routing.router swarm: this trainer's router (routing/swarm.hpp) and its call numbers.
  std::optional<routing::swarm_router> swarm;
  std::uint32_t next_call = 0;
  /// routing.swarm.rebalance_ms: when this holder looks next, its last move (actors/core/stage_moves).
  rebalance_state rebalance;
};

/// training.mode atom: this host as one of ATOM's whole-model peers (compute_atom.cpp,
/// docs/atom.md).
struct atom_state {
  std::optional<model::atom_peer> peer;
  std::optional<atom_rounds> rounds;
  std::uint64_t next = 0;               ///< the next iteration to train
  std::uint64_t trained_from = 0;       ///< the first iteration since this peer's last contribution
  std::vector<std::uint64_t> keys;      ///< the microbatch keys trained since then
  std::optional<std::uint64_t> pending; ///< the round contributed and not landed yet
  /// The contributors this peer holds for the pending round, told to its peers once complete
  /// (atom_rounds::holds: what every live peer holds is what lands).
  std::optional<std::vector<std::string>> announced;
  std::map<std::uint64_t, torch::Tensor> sent; ///< its contribution, per round
  /// The contributions' parameters per round and peer (this peer's too), until the round lands.
  std::map<std::uint64_t, std::map<std::string, torch::Tensor>> values;
  torch::Tensor last_average;          ///< the newest average landed (what a joiner downloads)
  std::optional<std::uint64_t> landed; ///< its round
  bool started = false;                ///< founding members fixed, iteration 0 begun
  bool scheduled = false;              ///< a start_atom is on its way
  /// Joiners this peer serves: the round each takes part from (announced with this peer's
  /// contribution to the round before, answered with that round's average) and its transfer.
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> joiners;
  /// A joiner's download: the transfer, its bytes so far, and from whom.
  std::uint64_t transfer = 0;
  std::string source;
  std::vector<std::uint8_t> download;
};

/// Checkpoints (compute_checkpoint.cpp).
struct checkpoint_state {
  caf::actor checkpoint_writer; // detached: files are written off the compute thread
  std::optional<std::uint64_t> last_checkpoint; // the newest iteration its writer wrote
  /// training.averaging overlap: the step after which a checkpoint is due, written once the
  /// next iteration's averaged gradient (the pending step it must carry) is complete.
  std::optional<std::uint64_t> due;
};

/// Metrics since this actor started.
struct compute_metrics {
  double compute_s_total = 0, wasted_s_total = 0;
  std::uint64_t resends = 0;     ///< microbatches sent again to a replacement hop
  std::uint64_t peers_lost = 0;  ///< peers declared down (crashed or hung), not graceful leaves
  std::uint64_t share_bytes = 0; ///< values and scales of the gradient shares, parts and sums it sent
  std::uint64_t butterfly_fallbacks = 0; ///< butterfly rounds it fell back from to whole shares
  std::uint64_t exactly_once_violations = 0; ///< iterations whose averaged shares' digest was wrong
};

/// How activations and gradients go on the wire: compression.mode adaptive (docs/compression.md).
struct wire_encoder_state {
  probe_actor probe;                            ///< told this stage's compute per microbatch
  double call_ema_s = 0;                        ///< moving average of one forward or backward call
  struct peer_link {
    double bandwidth_bytes_s = 0; ///< measured by the link probe (wall clock)
    double compute_s = 0;         ///< the peer's compute per microbatch, forward + backward
  };
  std::map<std::string, peer_link> links;
  struct owed_gradient {
    torch::Tensor values;        ///< what sparse gradients to the peer left out (error feedback)
    std::uint64_t iteration = 0; ///< the iteration they belong to
  };
  std::map<std::string, owed_gradient> residual;
  std::uint64_t sent_dense = 0, sent_sparse = 0; ///< activations and gradients sent each way
  double wire_bytes = 0, dense_bytes = 0;        ///< their payload bytes, and as dense 16-bit
};

/// The compute actor's state: what every role reads, and one part per role.
struct compute_state {
  ctx_ptr ctx;
  supervisor_actor supervisor;
  std::optional<model::stage> model;
  std::optional<model::corpus> data;
  std::unique_ptr<hop_ledger> ledger;
  std::unique_ptr<iteration_barrier> barrier;
  std::map<std::string, std::int32_t> peers; // live peers and their stage
  std::set<std::string> gone;                // peers reported down (late frames ignored)
  std::set<std::string> departed;            // peers that left gracefully (shares stay valid)
  bool draining = false;                     // leaving: finish the iteration's part, start none
  std::vector<flow_hop> flows;
  std::uint64_t current = 0;                 // iteration in progress (= optimizer steps)
  std::uint64_t run_origin = 0;              // holders: the run its microbatches carry (incarnation, +1 per state load)
  bool ready = false;                        // holds valid weights
  std::string armed;                         // injected crash: "forward" / "backward"
  std::uint64_t first_iteration = 0; // where this replica's run started (0, or the checkpoint resumed)
  // routing.gwtf.idle_moves: the balancer is told which flows carry microbatches here
  balancer_actor balancer;
  std::set<std::pair<std::string, std::string>> in_flight; ///< (data holder, next hop), as last told

  relay_stash stash;
  aggregation_state agg;
  fetch_state fetch;
  holder_state holder;
  checkpoint_state ckpt;
  compute_metrics metrics;
  wire_encoder_state encoder;
  atom_state atom; ///< training.mode atom only
  /// Messages above the frame limit, put together piece by piece (actors/core/fragments.hpp).
  std::optional<fragment_assembler> pieces;
};

using self_ptr = metered_ptr<compute_actor, compute_state>;

inline bool is_holder(const compute_state& st) { return st.ctx->stage == 0; }
/// training.averaging overlap (docs/runtime.md, "Overlapped averaging"): iteration i + 1
/// computes while i is averaged; i's step comes at i + 1's boundary.
inline bool overlapped(const compute_state& st) {
  return st.ctx->spec->training.averaging == model::averaging_mode::overlap;
}
/// The iteration whose optimizer step comes next (the stage's steps): `current` in sync; with
/// overlap `current - 1` from `current`'s start until its boundary.
inline std::uint64_t next_step(const compute_state& st) {
  return st.model ? static_cast<std::uint64_t>(st.model->steps()) : st.current;
}
/// Whether iteration i is still open at this replica (its microbatches computed, its share
/// sent again, its average taken): `current`, and with overlap the one before it until its step.
inline bool open_iteration(const compute_state& st, std::uint64_t i) {
  return i == st.current || (i + 1 == st.current && next_step(st) <= i);
}
/// The oldest open iteration.
inline std::uint64_t oldest_open(const compute_state& st) {
  return st.current > 0 && open_iteration(st, st.current - 1) ? st.current - 1 : st.current;
}
inline int stages(const compute_state& st) { return st.ctx->spec->model.stages; }
inline const std::string& me(const compute_state& st) { return st.ctx->host.name; }

/// What an aggregation step did; the caller passes it to resume().
enum class boundary {
  none,    ///< nothing changed
  stepped, ///< applied an iteration: `current` moved on
  loaded,  ///< loaded a stage state (joiner, repair, behind or diverged)
};

// shared helpers (stage_actor.cpp)
std::vector<std::string> live_at(const compute_state& st, int stage);
/// How long a relay stage stays without a live replica before the hosts restore it
/// themselves (node mode): twice the connection timeout.
inline std::chrono::milliseconds restore_delay(const compute_state& st) {
  return std::chrono::milliseconds(2 * st.ctx->spec->faults.connection_timeout_ms);
}
std::vector<candidate> candidates_at(const compute_state& st, int stage);
std::vector<std::string> live_holders(const compute_state& st);
std::vector<std::string> same_stage(const compute_state& st);
void report_failure(self_ptr self, const std::string& what);
/// The seconds a compute that started at t0 took, as this host's compute_scale makes them
/// (hosts[].compute_scale, node mode's hosts[0]): above 1 the host sleeps (scale - 1) x the
/// measured time, so that it is that many times slower than this machine (its peers, its
/// metrics and the wasted-compute accounting see the padded time). Below 1 it cannot be
/// emulated: the machine's speed.
double computed(self_ptr self, clock::time_point t0);
/// A normal event worth a log line (a wait, a planned leave's cost): not a failure, not
/// counted among the handled peer errors.
void report_note(self_ptr self, const std::string& what);
/// Tells the balancer the (data holder, next hop) pairs of the microbatches this host sent on
/// and has not had the backward of, when they changed (routing.gwtf.idle_moves).
void report_in_flight(self_ptr self);
void report_compute(self_ptr self, std::uint64_t iteration, double seconds, double wasted);
/// After a step or a state load: forwards queued meanwhile go on, a data holder starts its
/// next iteration, a relay tries the next boundary (which may step again).
void resume(self_ptr self, boundary b);

template <class T>
T* value_or_report(self_ptr self, model::outcome<T>& r, const std::string& what) {
  if (auto* e = std::get_if<std::string>(&r)) {
    report_failure(self, what + ": " + *e);
    return nullptr;
  }
  return &std::get<T>(r);
}

// checkpoints (compute_checkpoint.cpp)
/// A founding replica with spec.resume: loads its checkpoint (the newest, or resume_at).
/// Without a usable one it becomes a joiner that downloads the state from a live replica.
void resume_from_checkpoint(self_ptr self);
/// After the step of iteration i: writes a checkpoint when training.checkpoint_every says so
/// or i was the last iteration (in the background).
void maybe_checkpoint(self_ptr self, std::uint64_t i);
/// With overlap: the checkpoint due after a step (ckpt.due) goes out once `p`, the pending
/// step it must carry, is complete.
void write_due_checkpoint(self_ptr self, const model::pending_update& p);
/// A STATE_CHUNK of another stage than this host's: a piece of a peer's checkpoint replica.
void on_replica_chunk(self_ptr self, const std::string& from, wire::state_chunk& chunk);
/// With training.averaging overlap: the pending step (next_step's averaged gradient and its
/// global norm) once complete, which a state carries; nullopt while it is averaged still.
std::optional<model::pending_update> pending_step(const compute_state& st);
/// A loaded state's pending step becomes this replica's: `current` moves past it.
void install_pending(compute_state& st, std::optional<model::pending_update>&& p);
/// Sends this replica's stage state to a stage-mate that asked (a joiner, a repair); with
/// overlap once its pending step is complete (deferred until then).
void serve_state(self_ptr self, const std::string& from, const wire::state_request& r);
/// Deferred state requests and a due checkpoint go out once the pending step is complete.
void pending_complete(self_ptr self);
/// A peer asks for the checkpoint of a stage at an iteration: the writer reads it (this
/// host's own or a copy it keeps) and sends it as STATE_CHUNKs, or one empty chunk: none.
void serve_checkpoint(self_ptr self, const std::string& from, const wire::state_request& r);
/// Where checkpoints of any host may lie under node.data_dir: every host directory and every
/// replicas/OWNER directory in them, this host's own first.
std::vector<std::string> checkpoint_roots(const cluster_spec& spec, const std::string& me);

// relay (compute_relay.cpp)
bool crash_now(self_ptr self, const char* phase);
void send_activation(self_ptr self, const std::string& to, const hop_record& r, wire::direction dir,
                     const torch::Tensor& t, const std::string& continue_to = {});
/// A tensor as compression.mode sends it dense (fp32, fp16 or bf16).
wire::tensor_payload dense_payload(const compute_state& st, const torch::Tensor& t);
/// Whether a peer's activation or gradient can reach LibTorch: a float type and the shape
/// [microbatch_size, seq_len, hidden]; else reported (`what`: what it is and whose) and false.
bool acceptable_tensor(self_ptr self, const std::string& what, const wire::tensor_payload& t);
/// An acceptable tensor as fp32.
torch::Tensor as_fp32(const wire::tensor_payload& t);
void handle_forward(self_ptr self, const std::string& from, wire::activation a);
/// A forward (GWTF hop or SWARM call, `what`: what it is and whose) that comes before the
/// weights or for the next iteration: queued until then, within actors/core/early_calls'
/// bound; else dropped and reported.
void queue_early(self_ptr self, const std::string& what, const std::string& from, wire::activation a);
void handle_backward(self_ptr self, const std::string& from, const wire::activation& a);
void resume_stalled(self_ptr self);

// aggregation (compute_aggregation.cpp)
wire::gradient_chunk share_chunk(const compute_state& st, std::uint64_t i, const share_data& mine);
void send_share(self_ptr self, std::uint64_t i);
/// Sends one GRADIENT_CHUNK to `to`, counted in metrics.share_bytes.
void send_share_piece(self_ptr self, const std::string& to, const wire::gradient_chunk& piece);
/// Sends a share to `to` in chunks of node.chunk_bytes (actors/core/share_assembly.hpp).
void send_share_chunks(self_ptr self, const std::vector<std::string>& to, const wire::gradient_chunk& whole);
void maybe_drained(self_ptr self);
void take_report(compute_state& st, wire::iteration_done&& d);
boundary try_share(self_ptr self, std::uint64_t i);
/// A butterfly part or reduced part of iteration i (whole, put together) from `from`.
boundary on_butterfly(self_ptr self, const std::string& from, wire::gradient_chunk&& m);
/// A whole share of iteration i came: a butterfly round of i falls back to whole shares.
void whole_share_came(self_ptr self, std::uint64_t i, const std::string& from);
/// `id` is gone: a butterfly round it was in falls back to whole shares.
void butterfly_peer_down(self_ptr self, const std::string& id);
boundary try_average(self_ptr self, std::uint64_t i);
boundary try_apply(self_ptr self, std::uint64_t i);
/// training.averaging overlap: after `current` was shared, the step before and the next iteration.
boundary try_advance(self_ptr self);
/// Stage 0's norm of iteration i named the holders it counted (relay stages follow it).
boundary on_verdict(self_ptr self, std::uint64_t i, const std::string& from,
                    const std::vector<wire::holder_count>& holders);
/// Asks the next source for the stage state (`fresh_round`: from the first one again).
void request_state(self_ptr self, bool fresh_round = false);
void on_transfer_timeout(self_ptr self, std::uint64_t transfer, std::uint64_t had);
boundary on_state_chunk(self_ptr self, const std::string& from, const wire::state_chunk& c);
void behind(self_ptr self, const std::string& from, std::uint64_t their_iteration);
/// `from` is at `their_iteration`, past this relay's, and no other live host serves its
/// stage: its weights are not the cluster's and nobody can bring it up to date. It withdraws
/// from the stage (true); false when it is not so stranded.
bool stranded(self_ptr self, const std::string& from, std::uint64_t their_iteration);
void on_replica_hash(self_ptr self, const std::string& from, const wire::replica_hash& h);
void stall_watch(self_ptr self, std::uint64_t seen);

// SWARM's calls (compute_swarm.cpp; routing.router: swarm)
/// Whether this cluster routes as SWARM: data holders call each stage, relays answer.
inline bool swarm_routed(const compute_state& st) {
  return st.ctx->spec->routing.router == routing::router_kind::swarm;
}
/// A data holder: calls stage 1 with the embedding output of its microbatch `key`.
void swarm_start(self_ptr self, std::uint64_t key);
/// A relay: a call from a data holder (forward or backward; queued while not ready).
void swarm_request(self_ptr self, const std::string& from, wire::activation a);
/// A data holder: a stage's answer to one of its calls.
void swarm_reply(self_ptr self, const std::string& from, const wire::activation& a);
/// A data holder: call `n` of microbatch `key` got no answer within its timeout.
void swarm_timeout(self_ptr self, std::uint64_t key, std::uint32_t n);
/// A data holder: `id` (of `stage`) is down: calls under way to it go elsewhere
/// (routing.swarm.detection oracle, or a leave; with timeout they wait out their timeout),
/// and backwards it counted in a stage that has not averaged yet are called again elsewhere.
void swarm_peer_down(self_ptr self, const std::string& id, int stage);
/// A data holder at the start of an iteration: SWARM's rebalancing (routing.swarm.rebalance_ms)
/// when it is due and this holder decides (the live one with the lowest name): one relay of
/// the fastest stage is told to move to the slowest (routing::swarm_rebalance over this
/// holder's measured throughputs).
void swarm_rebalance_due(self_ptr self);
/// A relay: a data holder's STAGE_MOVE. Checked (this cluster routes as SWARM, the sender is
/// a live data holder, this relay is ready at the stage the order names and is not its
/// stage's last live replica); then the supervisor drains it and starts it again at the new
/// stage, where it downloads the state like a joiner. A refused order is reported.
void on_stage_move(self_ptr self, const std::string& from, const wire::stage_move& m);
/// A relay: forgets the backward calls of iterations <= `iteration`.
void swarm_forget(compute_state& st, std::uint64_t iteration);

// data holder (compute_holder.cpp)
/// A frame from a peer decoded (stage_actor.cpp): its message, or a message above the frame
/// limit once its last piece came; nothing when refused (reported) or still in pieces.
std::optional<wire::message> open_message(self_ptr self, const std::string& from, wire_frame&& frame);

/// A host's layer swapping (hosts[].memory_budget_mb): its budget, its capacity, and its swap
/// file's directory, node.data_dir/HOST or the temporary directory (made here).
model::swap_options host_swap(const host_context& ctx);

// training.mode atom (compute_atom.cpp)
inline bool atom_mode(const compute_state& st) { return st.ctx->spec->training.mode == model::training_mode::atom; }
/// The compute as a whole-model peer: its own behaviour (set up, iterations, rounds, joins).
compute_actor::behavior_type atom_behaviour(self_ptr self);

void finish_origin(self_ptr self, std::uint64_t key);
void start_iteration(self_ptr self);
/// Sends origin `key` again to `to` (a carrier's timeout or a dead first hop); a finished
/// one only with `finished_too` (its first-stage replica died before sharing it).
void on_resend(self_ptr self, std::uint64_t key, const std::string& to, std::uint32_t attempt,
               const std::string& hint, bool finished_too = false);

} // namespace gwtf::actors::compute
