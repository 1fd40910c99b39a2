// The end of an iteration as one replica sees it (docs/runtime.md), a pure state machine:
// 1. every data holder it must hear from reported ITERATION_DONE (directly, or relayed in a
//    peer replica's share) -> this replica shares its gradient sum. It must hear from the
//    holders it holds live and from every holder a report names as a participant, except
//    those it saw go down: a replica deaf to a holder waits (and is caught up by the replicas'
//    shares) instead of averaging without that holder's microbatches;
// 2. this replica shared and the shares in count every microbatch the data holders reported
//    (a replica that carried none of them need not be waited for: a joiner, or one the
//    others learn of late) -> average the non-empty shares in replica-name order, so all
//    replicas compute bit-identical results, and share the stage's squared norm;
// 3. a norm from every stage is in -> clip by the global norm and step.
// At relay stages step 2 also waits for stage 0's verdict (the holders its norm names): only
// those holders' microbatches are averaged, so that a data holder that died before stage 0
// counted its microbatches is left out at every stage, not only at stage 0. The verdict is
// settled once every holder it names sent its own (or was seen to go down): stage 0's
// replicas name different holders only when one died while they exchanged shares, and the
// one that got the dead holder's share may be the first heard (its share left, the dead
// holder's did not).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

class iteration_barrier {
public:
  /// `stages`: pipeline stages of the model (stage 0 = data holders).
  explicit iteration_barrier(int stages);
  /// A data holder finished `d.iteration`.
  void holder_done(const wire::iteration_done& d);
  /// Holders whose reports of `iteration` this replica waits for: `live_holders` and every
  /// participant named in a report in, less `gone` (holders it saw go down), sorted.
  std::vector<std::string> awaited_holders(std::uint64_t iteration, const std::vector<std::string>& live_holders,
                                           const std::set<std::string>& gone) const;
  /// Every awaited holder reported `iteration` (and at least one did).
  bool holders_done(std::uint64_t iteration, const std::vector<std::string>& live_holders,
                    const std::set<std::string>& gone = {}) const;
  /// Reports of `iteration`, by holder.
  std::map<std::string, wire::iteration_done> reports(std::uint64_t iteration) const;
  /// A replica's share of `iteration` arrived (its payload is kept by the caller).
  void share(std::uint64_t iteration, const std::string& replica);
  /// Microbatches of `iteration` the data holders reported done, summed.
  std::int64_t reported_microbatches(std::uint64_t iteration) const;
  /// `self` shared `iteration`, some holder reported it, and the shares in (`counted`
  /// microbatches in all) cover every reported microbatch; once stage 0's verdict is in,
  /// every microbatch of the holders it names.
  bool shares_complete(std::uint64_t iteration, const std::string& self, std::int64_t counted) const;
  /// Stage 0's verdict of `iteration` from data holder `from` (the holders its norm names,
  /// with their microbatches). Another one narrows it to the holders both name: stage 0's
  /// replicas disagree only when a holder died while they aggregated, and then no stage
  /// counts that holder.
  void verdict(std::uint64_t iteration, const std::string& from, const std::vector<wire::holder_count>& holders);
  /// The verdict of `iteration` so far (holder -> microbatches); nullptr before any. It can
  /// only narrow: leaving out what it leaves out is safe before it is settled.
  const std::map<std::string, std::uint32_t>* verdict(std::uint64_t iteration) const;
  /// A verdict of `iteration` is in, and every holder it names sent its own or is in `gone`
  /// (holders this replica saw go down): no verdict to come can narrow it.
  bool verdict_settled(std::uint64_t iteration, const std::set<std::string>& gone) const;
  /// The holders named by the verdict of `iteration` whose own verdict is still to come,
  /// less `gone`; empty before any verdict.
  std::vector<std::string> verdicts_awaited(std::uint64_t iteration, const std::set<std::string>& gone) const;
  /// Holders of a share (holder -> microbatches) that the verdict of `iteration` leaves out;
  /// empty also while no verdict is in.
  std::vector<std::string> outside_verdict(std::uint64_t iteration,
                                           const std::map<std::string, std::int64_t>& holders) const;
  /// A stage's squared norm of `iteration`; the first per stage counts.
  void norm(std::uint64_t iteration, std::uint32_t stage, double sum_squares);
  /// sqrt of the sum over stages once every stage reported.
  std::optional<double> global_norm(std::uint64_t iteration) const;
  /// What `iteration` still waits for at replica `self` (whose shares in count `counted`
  /// microbatches), in words, for the stall report; empty when nothing is missing.
  /// `relay`: this replica also waits for stage 0's verdict.
  std::string waiting_for(std::uint64_t iteration, const std::string& self,
                          const std::vector<std::string>& live_holders, std::int64_t counted,
                          const std::set<std::string>& gone = {}, bool relay = false) const;
  /// Forgets `iteration` and older.
  void finish(std::uint64_t iteration);

private:
  /// Microbatches the shares must count: the verdict's once it is in, else the reports'.
  std::int64_t expected(std::uint64_t iteration) const;

  int stages_;
  std::map<std::uint64_t, std::map<std::string, wire::iteration_done>> done_;
  std::map<std::uint64_t, std::set<std::string>> shares_;
  std::map<std::uint64_t, std::map<std::uint32_t, double>> norms_;
  std::map<std::uint64_t, std::map<std::string, std::uint32_t>> verdicts_;
  std::map<std::uint64_t, std::set<std::string>> verdict_from_; // holders whose own verdict came
};

} // namespace gwtf::actors
