// What one host remembers about the microbatches that pass through it, and the decisions
// that make crashes cheap (docs/runtime.md): a pure state machine, no CAF, no LibTorch.
//
// Every hop keeps its forward output and its backward output until the iteration ends.
// When a host X dies, the hop upstream of X re-sends its buffered output, with a higher
// attempt, to another replica of X's stage, naming the hop after X (learnt from a
// HOP_PROGRESS) as the place to continue. A hop that receives a microbatch it already holds
// only rebinds its upstream (its input is bit-identical: same microbatch, same weights)
// and, if it already ran the backward, re-sends its gradient to the new upstream. So a crash
// during the forward costs one re-sent hop, a crash during the backward costs one recomputed
// stage, and nothing downstream or upstream of the break is computed twice.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// The key of a microbatch, equal to model::microbatch_id::key().
std::uint64_t key_of(const wire::microbatch_ref& mb);

/// One microbatch as a hop holds it.
struct hop_record {
  wire::microbatch_ref mb;
  std::uint32_t attempt = 0;
  std::vector<std::string> path; ///< hosts from the data holder up to this hop
  std::string prev;              ///< where the forward came from, where the gradient goes
  std::string next;              ///< where the forward output went
  std::string next_next;         ///< the hop after `next` (HOP_PROGRESS), if known
  bool forwarded = false;        ///< the forward output was sent
  bool backward_done = false;    ///< the gradient was sent upstream
};

/// What to do with an arriving forward activation.
enum class forward_action {
  compute, ///< new here: run the forward, then send it on
  rebind,  ///< held already: only the upstream changed (re-send after a crash)
  ignore,  ///< an older or equal attempt, or a previous run of its data holder: a duplicate
};

/// A buffered output to send again because its receiver died.
struct resend {
  std::uint64_t key = 0;
  std::string dead;      ///< the host that died
  std::uint32_t attempt = 0;
  std::string hint;      ///< the hop after the dead one, if known
  bool gradient = false; ///< false: the forward output downstream; true: the gradient upstream
};

/// The microbatches one host holds, for every iteration not yet finished.
class hop_ledger {
public:
  explicit hop_ledger(std::string self);

  /// A forward activation arrived from `from`. `compute` creates the record; `rebind`
  /// updates its upstream and attempt (then resend the gradient if `backward_done`).
  forward_action on_forward(const std::string& from, const wire::activation& a);
  /// The forward output of `key` was sent to `next`.
  void sent_forward(std::uint64_t key, const std::string& next);
  /// A gradient for `key` arrived: true when the backward must run (first time, record held).
  bool on_backward(std::uint64_t key) const;
  /// The gradient of `key` was sent upstream.
  void sent_backward(std::uint64_t key);
  /// A HOP_PROGRESS arrived: remembers the hop after `next`.
  void on_progress(const wire::hop_progress& p);
  /// `peer` died: outputs it was sent to must go elsewhere. Attempts are already raised.
  std::vector<resend> on_peer_down(const std::string& peer);
  /// After a resend: the output of `key` now goes to `next`.
  void redirect(std::uint64_t key, const std::string& next);
  /// Forgets iterations <= `iteration`; returns the keys forgotten.
  std::vector<std::uint64_t> finish(std::uint64_t iteration);
  /// The record of `key`, if held.
  const hop_record* find(std::uint64_t key) const;
  /// Records held.
  std::size_t size() const { return records_.size(); }
  const std::map<std::uint64_t, hop_record>& records() const { return records_; }

private:
  std::string self_;
  std::map<std::uint64_t, hop_record> records_;
};

/// Which host of `stage` should take over from `dead`: the cheapest live candidate that is
/// not excluded, ties by name; nullopt if none.
struct candidate {
  std::string id;
  double cost = 0;
};
std::optional<std::string> choose_replacement(const std::vector<candidate>& live,
                                              const std::string& dead);

/// The next hop of a forward at a relay: a built flow of this host from `from` towards
/// `target` (the microbatch index picks among several), else any flow towards `target`, else
/// the cheapest live next-stage host. `flows` are (target, prev, next) of the flows held.
struct flow_hop {
  std::string target;
  std::string prev;
  std::string next;
};
std::optional<std::string> next_hop(const std::vector<flow_hop>& flows, const std::string& from,
                                    const std::string& target, std::uint32_t index,
                                    const std::vector<candidate>& live_next);

} // namespace gwtf::actors
